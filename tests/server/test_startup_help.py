"""What ``pteforge serve`` prints before it starts: how clients reach this server."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from pteforge.server.cli import public_url, startup_help
from pteforge.server.settings import Settings


@pytest.mark.parametrize(
    ("host", "shown", "reach"),
    [
        ("127.0.0.1", "http://127.0.0.1:8000", "from this machine only (--host 0.0.0.0 for"),
        ("0.0.0.0", f"http://{socket.gethostname()}:8000", "from any machine: pteforge login"),
        ("::", f"http://{socket.gethostname()}:8000", "from any machine: pteforge login"),
        ("::1", "http://[::1]:8000", "from this machine only"),
    ],
)
def test_the_login_line_names_a_url_a_client_can_reach(
    host: str, shown: str, reach: str, tmp_path: Path
) -> None:
    """It said 'from any machine' for a server listening on 127.0.0.1 only, and gave
    ``--host 0.0.0.0`` servers the URL http://0.0.0.0:8000, which no client connects to."""
    settings = Settings(home=tmp_path)
    settings.public_url = public_url(host, 8000)
    login = startup_help(settings).splitlines()[-1]
    assert settings.public_url == shown
    assert reach in login and login.endswith(f" login {shown} --token TOKEN")
