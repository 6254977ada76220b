"""The long-lived objects one app instance works with, held on ``app.state``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from pteforge.backends.catalog import BackendCatalog
from pteforge.server.sandbox import ProcessLimits
from pteforge.server.settings import Settings
from pteforge.storage.store import Store


@dataclass
class Services:
    """Settings, the store, the backend catalog and upload-validation limits of one service."""

    settings: Settings
    store: Store
    catalog: BackendCatalog
    process_limits: ProcessLimits


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]
