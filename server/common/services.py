"""The long-lived objects one app instance works with, held on ``app.state``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from fastapi.encoders import jsonable_encoder

from pteforge.backends.catalog import BackendCatalog
from pteforge.server.backends_api.schemas import host_entry
from pteforge.server.http.memory import RequestMemory
from pteforge.server.jobs.streams import OpenStreams
from pteforge.server.sandbox import Isolation, ProcessLimits
from pteforge.server.settings import Settings
from pteforge.server.startup.host import HostOut
from pteforge.storage.store import Store


@dataclass
class Services:
    """Settings, the store, the backend catalog and how uploads are validated, of one service."""

    settings: Settings
    store: Store
    catalog: BackendCatalog
    process_limits: ProcessLimits
    # How upload loaders start: the app forks them from its preloaded fork server.
    isolation: Isolation
    # Called after a job is committed to the queue (the app points it at its workers).
    job_queued: Callable[[], None] = field(default=lambda: None)
    # Called after a running job's cancel is committed (the app interrupts its workers).
    job_canceled: Callable[[], None] = field(default=lambda: None)
    # Called with (project id, model name, version) after a model version is added, deleted
    # or given a tokenizer (the app forgets its resolved generation targets).
    model_changed: Callable[[str, str, int], None] = field(default=lambda *_: None)
    # What this host gives upload-handling children (probed at startup); None: not probed.
    host: HostOut | None = None
    # What requests in flight may hold in memory (/v1 JSON bodies; /v2 and gRPC infer).
    memory: RequestMemory = field(kw_only=True)
    # The job event streams open per project (each polls the database).
    event_streams: OpenStreams = field(kw_only=True)
    # Set when the server starts to stop (SIGTERM): job event streams, which would hold it
    # until their jobs end, close, and their clients resume elsewhere with Last-Event-ID.
    draining: threading.Event = field(default_factory=threading.Event)
    _catalog_json: bytes | None = field(default=None, init=False, repr=False)
    _describing: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def catalog_json(self) -> bytes:
        """The body of ``GET /v1/backends``, built once by whichever thread asks first (the
        others wait for it): the catalog does not change while the service runs, and
        describing it imports every backend's lowering package (seconds; call it off the
        event loop). The host entry comes last."""
        with self._describing:
            if self._catalog_json is None:
                self._catalog_json = self._describe_catalog()
        return self._catalog_json

    def _describe_catalog(self) -> bytes:
        described = jsonable_encoder(self.catalog.describe_with_plan_options())
        if self.host is not None:
            described.append(host_entry(self.host).model_dump(mode="json"))
        return json.dumps(described).encode()


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def _services_dependency(request: Request) -> Services:
    # async: FastAPI would run a plain def dependency in the threadpool, a hop per request.
    return get_services(request)


ServicesDep = Annotated[Services, Depends(_services_dependency)]
