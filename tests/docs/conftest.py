"""The quickstart's server: the test process's shared ``pteforge serve`` on a free port."""

from __future__ import annotations

import pytest

from tests.server.service import ServiceProcess


@pytest.fixture(scope="package")
def service(shared_service: ServiceProcess) -> ServiceProcess:
    """The server of this test process, shared with other packages (``tests/conftest.py``)."""
    return shared_service
