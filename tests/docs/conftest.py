"""One real ``pteforge serve`` on a free port with a temporary home, for the quickstart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.service import ServiceProcess, running_service


@pytest.fixture(scope="package")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    env = {"PTEFORGE_COMPILE_WORKERS": "1", "PTEFORGE_RUNTIME_POOL_SIZE": "1"}
    with running_service(tmp_path_factory.mktemp("docs-home"), env) as svc:
        yield svc
