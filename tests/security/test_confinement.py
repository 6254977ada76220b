"""Every confinement layer stops the escape it is for, and every process that touches an
upload runs with all of them (issue 18).

The escapes run in a real child (``escape_attempts.py``) that applies one layer at a time;
the ``none`` case is the control that shows each attempt works without confinement. The
service test reads the live processes of a real server from ``/proc``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pteforge.children import landlock, seccomp
from pteforge.children.identity import SANDBOX_UID
from tests.models import save_programs, small_mlp_programs
from tests.security.conftest import CANARY, CANARY_VALUE
from tests.server.helpers import submit, upload_methods, wait_job
from tests.server.service import ServiceProcess, process_table, wait_until

SCRIPT = Path(__file__).with_name("escape_attempts.py")
REFUSED_BY = {
    "landlock": {
        "write_outside": "EACCES",
        "read_database": "EACCES",
        "read_root_only_file": "EACCES",
        "tcp_connect": "EACCES",
        "exec_shell": "EACCES",
        "exec_flatc": "EACCES",
        "signal_parent": "EPERM",
    },
    "seccomp": {
        "tcp_connect": "EPERM",
        "exec_shell": "EPERM",
        "exec_flatc": "EPERM",
        "new_namespace": "EPERM",
    },
    "netns": {"tcp_connect": "ENETUNREACH"},
    "uid": {
        "write_outside": "EACCES",
        "signal_parent": "EPERM",
        "parent_environ": "EACCES",
        "new_namespace": "EPERM",
    },
}
ATTEMPTS = (
    "write_scratch",
    "read_granted",
    "write_outside",
    "read_database",
    "read_root_only_file",
    "tcp_connect",
    "exec_shell",
    "exec_flatc",
    "signal_parent",
    "parent_environ",
    "new_namespace",
)
ALLOWED = {"write_scratch", "read_granted"}

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and capabilities as root")


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on loopback that accepts connections (the escape tries to reach it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])


def _escape(layers: str, tmp_path: Path, port: int) -> dict[str, str]:
    scratch, home = tmp_path / "scratch", tmp_path / "home"
    scratch.mkdir()
    home.mkdir()
    granted, secret, locked = tmp_path / "upload.pt2", home / "pteforge.db", home / "locked"
    for path in (granted, secret, locked):
        path.write_text("data")
    locked.chmod(0)
    args = [layers, scratch, granted, secret, locked, port]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@needs_root
def test_without_confinement_every_escape_works(tmp_path: Path, listener: int) -> None:
    """The control: each attempt succeeds in an unconfined child, so a refusal below is the
    layer's doing."""
    assert _escape("none", tmp_path, listener) == dict.fromkeys(ATTEMPTS, "ok")


@needs_root
@pytest.mark.parametrize("layer", sorted(REFUSED_BY))
def test_each_layer_refuses_its_escapes(layer: str, tmp_path: Path, listener: int) -> None:
    if layer == "landlock" and landlock.abi_version() < 6:
        pytest.skip("this kernel's Landlock lacks network and signal scoping (ABI < 6)")
    if layer == "seccomp" and not seccomp.available():
        pytest.skip("this kernel has no seccomp")
    results = _escape(layer, tmp_path, listener)
    for attempt, code in REFUSED_BY[layer].items():
        assert results[attempt] == code, (attempt, results)
    assert {a for a, r in results.items() if r == "ok"} >= ALLOWED


@needs_root
def test_confine_refuses_every_escape_and_keeps_the_job_working(
    tmp_path: Path, listener: int
) -> None:
    results = _escape("all", tmp_path, listener)
    assert {a for a, r in results.items() if r == "ok"} == ALLOWED, results


@needs_root
def test_a_runtime_worker_may_start_no_program(tmp_path: Path, listener: int) -> None:
    """A runtime worker's own confinement: no ``execve`` at all, ``flatc`` included (it reads
    program tables and ETDumps in process)."""
    results = _escape("worker", tmp_path, listener)
    assert {a for a, r in results.items() if r == "ok"} == ALLOWED, results
    assert results["exec_flatc"] == results["exec_shell"] != "ok", results


# -- the live processes of a real server --------------------------------------------------


def _upload_handlers(root: int) -> tuple[list[int], list[int]]:
    """The fork servers under ``root`` and the children they forked (runtime workers, a
    standby lowering process, sandbox loaders)."""
    processes = process_table()
    forked = {p for p, (_, cmd) in processes.items() if b"multiprocessing.forkserver" in cmd}
    # a forked child has its fork server's command line too; a fork server's parent has not
    servers = [p for p in forked if processes[p][0] not in forked]
    servers = [p for p in servers if _descends(p, root, processes)]
    children = [p for p, (ppid, _) in processes.items() if ppid in servers]
    return servers, children


def _descends(pid: int, root: int, processes: dict[int, tuple[int, bytes]]) -> bool:
    while pid in processes and pid > 1:
        if pid == root:
            return True
        pid = processes[pid][0]
    return False


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def _confined_yet(pid: int) -> bool:
    try:
        return _status(pid).get("Seccomp") == "2"
    except FileNotFoundError:  # gone: look again
        return False


def _tcp_inodes() -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            inodes.add(line.split()[9])
    return inodes


def _open_files(pid: int) -> list[str]:
    fds = Path(f"/proc/{pid}/fd")
    return [os.readlink(fd) for fd in fds.iterdir()]


@needs_root
def test_processes_that_touch_uploads_are_confined(
    secure_service: ServiceProcess, secure_admin: httpx.Client, tmp_path: Path
) -> None:
    files = save_programs(small_mlp_programs().programs, tmp_path)
    program = upload_methods(secure_admin, files, name="mlp")
    job = wait_job(secure_admin, submit(secure_admin, program["id"], {"all": {}})["id"])
    assert job["status"] == "succeeded", job
    assert secure_service.proc is not None
    root = secure_service.proc.pid

    def handlers() -> tuple[list[int], list[int]] | None:
        found = _upload_handlers(root)
        # a child just forked has not confined itself yet: one that never does times out here
        settled = all(_confined_yet(pid) for pid in found[1])
        return found if len(found[1]) >= 2 and settled else None

    servers, children = wait_until(handlers, 60, "a runtime worker and a standby lowering child")
    assert len(servers) == 2, servers  # the server's and the compile worker's
    own_net = os.readlink(f"/proc/{root}/ns/net")
    tcp = _tcp_inodes()
    for pid in servers + children:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert b"PTEFORGE_" not in environ and CANARY_VALUE.encode() not in environ, pid
    for pid in children:
        status = _status(pid)
        assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2", (pid, status)
        assert status["Uid"].split() == [str(SANDBOX_UID)] * 4, status
        kept = 1 << 2  # CAP_DAC_READ_SEARCH only: reads are Landlock's to limit
        assert int(status["CapEff"], 16) == kept and int(status["CapBnd"], 16) == kept, status
        assert os.readlink(f"/proc/{pid}/ns/net") != own_net, pid
        files = _open_files(pid)
        assert not [f for f in files if f.startswith("socket:[") and f[8:-1] in tcp], files
        assert not [f for f in files if "pteforge.db" in f], files
    assert CANARY in secure_service.env  # the server itself had it


def test_the_host_entry_reports_every_layer(secure_admin: httpx.Client) -> None:
    entries = secure_admin.get("/v1/backends").raise_for_status().json()
    host = entries[-1]
    assert host["kind"] == "host" and host["name"] == "host"
    layers = host["host"]["confinement"]
    assert layers["clean_environment"] is True
    assert layers["landlock_abi"] == landlock.abi_version()
    assert layers["seccomp"] is seccomp.available()
    if os.geteuid() == 0:
        assert layers["network_namespace"] is True and layers["capabilities_dropped"] is True
        assert layers["dedicated_uid"] == SANDBOX_UID


def test_a_home_inside_what_children_may_read_is_reported(tmp_path: Path) -> None:
    from pteforge.children.confine import python_read_roots
    from pteforge.server.startup.host import readable_home_note

    assert readable_home_note(tmp_path / "home") is None
    inside = python_read_roots()[0] / "pteforge-home"
    note = readable_home_note(inside)
    assert note is not None and str(inside) in note
