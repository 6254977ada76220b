"""One real ``pteforge serve`` on a free port with a temporary home, for the quickstart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.service import ServiceProcess


@pytest.fixture(scope="package")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    svc = ServiceProcess(
        tmp_path_factory.mktemp("docs-home"),
        env={"PTEFORGE_COMPILE_WORKERS": "1", "PTEFORGE_RUNTIME_POOL_SIZE": "1"},
    )
    svc.start(timeout=300)  # a loaded 2-core machine can take minutes to import torch
    try:
        yield svc
    finally:
        svc.stop()
