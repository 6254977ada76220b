"""Processes of a multi-node deployment on loopback: API replicas, worker nodes, HAProxy."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx

from tests import tiers
from tests.server.service import (
    FAST_JOB_ENV,
    children_running,
    free_port,
    process_table,
    wait_until,
)


class Node:
    """One ``python -m pteforge ...`` process (its own session, so it can be killed whole)."""

    def __init__(self, name: str, args: Sequence[str], home: Path, env: Mapping[str, str]) -> None:
        self.name = name
        self.args = list(args)
        self.home = home
        self.env = {**os.environ, **FAST_JOB_ENV, **env, "PTEFORGE_HOME": str(home)}
        self.log_path = home / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        tiers.need("server")
        self.home.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pteforge", *self.args],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            raise AssertionError(f"{self.name} exited:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def kill_tree(self) -> None:
        """SIGKILL the process and all its descendants at once (``kill -9`` of the tree:
        workers run in sessions of their own, so killing the process group is not enough)."""
        if self.proc is None:
            return
        for pid in [self.proc.pid, *descendants(self.proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL of the whole session if it does not exit in time."""
        if not self.alive():
            self.kill_tree()  # reap what a dead leader may have left in its session
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=timeout)
        self.kill_tree()


class ApiNode(Node):
    """``pteforge serve --no-workers`` on a free port."""

    def __init__(self, name: str, home: Path, env: Mapping[str, str], workers: bool = False):
        self.port = free_port()
        args = ["serve", "--port", str(self.port), "--grpc-port", "0"]  # gRPC off
        args += [] if workers else ["--no-workers"]
        super().__init__(name, args, home, env)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 300.0) -> None:
        # As long as running_service waits: a replica restarted while clients load the
        # cluster took over 180 s to answer on a machine at load 12 (CI, two runs at once).
        def ready() -> bool:
            self.check_alive()
            try:
                return httpx.get(f"{self.url}/v2/health/ready", timeout=5.0).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout, f"{self.name} on {self.url}", every=0.2)

    def client(self, token: str, timeout: float = 60.0) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout
        )


@contextlib.contextmanager
def ready_api(name: str, home: Path, env: Mapping[str, str]) -> Iterator[ApiNode]:
    """An API replica started and answering ``/v2/health/ready``, stopped on exit."""
    node = ApiNode(name, home, env)
    node.start()
    try:
        node.wait_ready()
        yield node
    finally:
        node.stop()


class WorkerNode(Node):
    """``pteforge worker --count N``."""

    def __init__(self, name: str, home: Path, env: Mapping[str, str], count: int = 1):
        super().__init__(name, ["worker", "--count", str(count)], home, env)

    def worker_pids(self) -> list[int]:
        """The worker processes this node supervises."""
        assert self.proc is not None
        return children_running(self.proc.pid, b"pteforge.server.jobs.worker")


def descendants(root: int) -> list[int]:
    """Every process below ``root``, children first."""
    table, found, frontier = process_table(), [], [root]
    while frontier:
        below = [pid for pid, (ppid, _) in table.items() if ppid in frontier]
        found += below
        frontier = below
    return found


def create_token(env: Mapping[str, str], home: Path, project: str = "default") -> str:
    """A new token of ``project`` through ``pteforge tokens create``."""
    out = subprocess.run(
        [sys.executable, "-m", "pteforge", "tokens", "create", "--name", "t", "--project", project],
        env={**os.environ, **env, "PTEFORGE_HOME": str(home)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout.strip().splitlines()[-1]
