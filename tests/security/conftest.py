"""The security suite's service: a real ``pteforge serve`` on PostgreSQL (the production
database, so its URL is a secret a child could leak), with a canary secret in its
environment that no upload-handling child may carry."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.postgres import fresh_database
from tests.server.service import ServiceProcess, running_service

CANARY = "PTEFORGE_SECURITY_CANARY"
CANARY_VALUE = "canary-7f3a9c-never-in-a-child"


@pytest.fixture(scope="package")
def secure_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    with fresh_database("sec") as url:
        env = {
            "PTEFORGE_DATABASE_URL": url,
            "PTEFORGE_COMPILE_WORKERS": "1",
            "PTEFORGE_RUNTIME_POOL_SIZE": "1",
            CANARY: CANARY_VALUE,
        }
        with running_service(tmp_path_factory.mktemp("sec-home"), env) as svc:
            yield svc


@pytest.fixture(scope="package")
def secure_admin(secure_service: ServiceProcess) -> Iterator[httpx.Client]:
    assert secure_service.admin_token, "first start printed no admin token"
    with secure_service.client(secure_service.admin_token) as client:
        yield client
