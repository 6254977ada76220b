"""A real ``pteforge serve`` process on a free port, for end-to-end tests and benchmarks."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests import tiers

_TOKEN_LINE = re.compile(r"^\s+(ptf_\S+)\s*$", re.MULTILINE)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@contextmanager
def uvicorn_in_thread(app: Any, **options: Any) -> Iterator[int]:
    """``app`` served by uvicorn (uvloop, ``options`` added to its ``Config``) on a free port
    from a thread of this process, for tests of the HTTP protocol layer; its port."""
    import threading

    import uvicorn

    chosen = free_port()
    config = uvicorn.Config(app, port=chosen, log_level="warning", loop="uvloop", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 30, "the test server")
    try:
        yield chosen
    finally:
        server.should_exit = True
        thread.join(timeout=10)


FAST_JOB_ENV = {
    "PTEFORGE_JOB_LEASE_SECONDS": "4",
    "PTEFORGE_HEARTBEAT_SECONDS": "0.5",
    "PTEFORGE_WORKER_POLL_SECONDS": "0.2",
    "PTEFORGE_SSE_POLL_SECONDS": "0.1",
    # Warming each standby lowering process up costs seconds of CPU per job on a 2-core
    # machine; tests that measure or exercise it turn it back on.
    "PTEFORGE_COMPILE_WARMUP": "false",
    # Describing the catalog imports every backend (~14 s of CPU); few tests list backends.
    "PTEFORGE_DESCRIBE_BACKENDS_AT_START": "false",
}


# The service the benchmarks measure: one compile worker and one runtime worker (what a
# 2-core machine affords), uploads up to 2 GiB.
BENCH_ENV = {
    "PTEFORGE_COMPILE_WORKERS": "1",
    "PTEFORGE_RUNTIME_POOL_SIZE": "1",
    "PTEFORGE_MAX_UPLOAD_BYTES": str(2 * 1024**3),
}


class ServiceProcess:
    """``python -m pteforge serve`` with its own home; restartable on the same home."""

    def __init__(self, home: Path, env: Mapping[str, str] | None = None) -> None:
        self.home = home
        self.port = free_port()
        self.grpc_port = free_port()  # never 8001: test servers run side by side
        self.env = {**os.environ, **FAST_JOB_ENV, **(env or {}), "PTEFORGE_HOME": str(home)}
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = home / "server.log"
        self.admin_token: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def listen_args(self) -> list[str]:
        return ["--port", str(self.port), "--grpc-port", str(self.grpc_port)]

    def start(self, timeout: float = 120.0) -> None:
        tiers.need("server")
        self.home.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pteforge", "serve", *self.listen_args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        wait_until(self._ready, timeout, f"the server on {self.url}", every=0.2)
        match = _TOKEN_LINE.search(self.log_path.read_text())
        if match and self.admin_token is None:
            self.admin_token = match.group(1)

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"server exited early:\n{self.log_path.read_text()[-4000:]}")
        try:
            return httpx.get(f"{self.url}/v1/health", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def client(self, token: str | None = None, timeout: float = 120.0) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def create_token(self, name: str, project: str) -> str:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pteforge",
                "tokens",
                "create",
                "--name",
                name,
                "--project",
                project,
            ],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip().splitlines()[-1]

    def kill(self) -> None:
        """SIGKILL the server only (its workers notice and exit on their own)."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def worker_pids(self) -> list[int]:
        """The compile worker processes the server supervises (children running the worker)."""
        assert self.proc is not None
        return children_running(self.proc.pid, b"pteforge.server.jobs.worker")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@contextmanager
def running_service(
    home: Path, env: Mapping[str, str] | None = None, timeout: float = 300.0
) -> Iterator[ServiceProcess]:
    """A server started on ``home`` (a loaded 2-core machine can take minutes to import
    torch), stopped on the way out."""
    svc = ServiceProcess(home, env)
    svc.start(timeout=timeout)
    try:
        yield svc
    finally:
        svc.stop()


def process_table() -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, command line) of every process now."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            found[int(stat.parent.name)] = (ppid, (stat.parent / "cmdline").read_bytes())
        except (OSError, IndexError, ValueError):
            continue  # the process went away while we looked
    return found


def children_running(parent: int, marker: bytes) -> list[int]:
    """Direct children of ``parent`` whose command line holds ``marker``."""
    return [pid for pid, (ppid, cmd) in process_table().items() if ppid == parent and marker in cmd]


def temp_home(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


def store_artifact(home: Path, chunks: Iterable[bytes], source: str) -> tuple[Any, Any]:
    """An artifact of ``chunks``, put straight into the store of the service at ``home`` (in
    project ``default``, without compiling anything), and its blob."""
    from pteforge.storage import default_sqlite_url, open_store

    store = open_store(default_sqlite_url(home), migrate=False)
    try:
        blob = store.blobs.write(chunks)
        with store.transaction() as tx:
            project = tx.projects.get_by_name("default")
            assert project is not None
            return tx.artifacts.create(project.id, None, blob, {}, source, {}, []), blob
    finally:
        store.close()
