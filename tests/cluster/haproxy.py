"""HAProxy from Debian's package in front of API replicas on loopback, configured by
``docker/haproxy.cfg`` (the compose file's) with the replicas' ports as its servers."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import httpx

from tests.server.service import free_port, wait_until

CONFIG = Path(__file__).resolve().parents[2] / "docker" / "haproxy.cfg"
ENSURE = Path(__file__).resolve().parent / "ensure-haproxy.sh"


def haproxy_binary() -> str:
    """The haproxy executable, installed from apt when missing."""
    done = subprocess.run(["bash", str(ENSURE)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"no HAProxy: {done.stderr[-2000:]}"
    return done.stdout.strip().splitlines()[-1]


def render(ports: Sequence[int], grpc_ports: Sequence[int] = ()) -> str:
    """``docker/haproxy.cfg`` with loopback servers and no Docker DNS; the gRPC backend gets
    ``grpc_ports`` (none: replicas run with gRPC off)."""
    text = re.sub(r"# BEGIN docker-dns.*?# END docker-dns\n", "", CONFIG.read_text(), flags=re.S)
    grpc = "".join(
        f"    server grpc{i} 127.0.0.1:{port} proto h2\n" for i, port in enumerate(grpc_ports)
    )
    text = re.sub(r"^    server-template grpc .*\n", grpc, text, flags=re.M)
    servers = "\n".join(f"    server api{i} 127.0.0.1:{port}" for i, port in enumerate(ports))
    return re.sub(r"^    server-template .*$", servers, text, flags=re.M)


class LoadBalancer:
    """One haproxy process on a free port."""

    def __init__(self, ports: Sequence[int], directory: Path, grpc_ports: Sequence[int] = ()):
        self.port, self.grpc_port = free_port(), free_port()
        self.config = directory / "haproxy.cfg"
        self.config.write_text(render(ports, grpc_ports))
        self.log_path = directory / "haproxy.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {
            **os.environ,
            "PTEFORGE_LB_BIND": f"127.0.0.1:{self.port}",
            "PTEFORGE_LB_GRPC_BIND": f"127.0.0.1:{self.grpc_port}",
        }
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [haproxy_binary(), "-db", "-f", str(self.config)],
                env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

        def up() -> bool:
            assert self.proc is not None and self.proc.poll() is None, self.log_path.read_text()
            try:
                return httpx.get(f"{self.url}/v2/health/ready", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, 30, "HAProxy and a ready replica behind it", every=0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
