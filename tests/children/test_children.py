"""The sandboxed-child facility: limits, environment, death classification, replies, preloads."""

from __future__ import annotations

import errno
import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pteforge.children.death import (
    TIMED_OUT,
    DeathReason,
    death_from_exception,
    death_from_exit,
    is_out_of_memory,
    reached_memory_limit,
)
from pteforge.children.forkserver import (
    LOWERING_PRELOAD,
    RUNTIME_WORKER_PRELOAD,
    SANDBOX_PRELOAD,
    preload_union,
)
from pteforge.children.limits import CPU_HARD_GRACE_SECONDS, child_env
from pteforge.children.reply import ChildReply

_SHOW_LIMITS = """
import json, resource, sys
from pteforge.children.limits import ChildLimits, apply_limits
memory, cpu = (None if a == "-" else int(a) for a in sys.argv[1:3])
apply_limits(ChildLimits(memory_bytes=memory, cpu_seconds=cpu))
names = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_CORE")
print(json.dumps({n: resource.getrlimit(getattr(resource, n)) for n in names}))
"""


def _limits_in_child(memory: str, cpu: str) -> dict[str, list[int]]:
    out = subprocess.run(
        [sys.executable, "-c", _SHOW_LIMITS, memory, cpu], capture_output=True, check=True
    )
    result: dict[str, list[int]] = json.loads(out.stdout)
    return result


def test_apply_limits_caps_memory_and_cpu_and_core_dumps() -> None:
    limits = _limits_in_child(str(3 << 30), "7")
    assert limits["RLIMIT_AS"] == [3 << 30, 3 << 30]
    assert limits["RLIMIT_CPU"] == [7, 7 + CPU_HARD_GRACE_SECONDS]
    assert limits["RLIMIT_CORE"] == [0, 0]


def test_unset_limits_leave_the_resource_alone_but_never_dump_core() -> None:
    import resource

    limits = _limits_in_child("-", "-")
    assert tuple(limits["RLIMIT_AS"]) == resource.getrlimit(resource.RLIMIT_AS)
    assert limits["RLIMIT_CORE"] == [0, 0]


def test_child_env_is_minimal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTEFORGE_DATABASE_URL", "postgresql://secret")
    env = child_env({"EXTRA": "1"})
    assert env["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] == "1"
    assert env["EXTRA"] == "1"
    assert not [name for name in env if name.startswith("PTEFORGE_")]


@pytest.mark.parametrize(
    ("exit_code", "output", "reason"),
    [
        (-signal.SIGKILL, "", DeathReason.SIGNAL),
        (-signal.SIGSEGV, "MemoryError", DeathReason.SIGNAL),  # the signal says more
        (1, "Traceback ...\nMemoryError", DeathReason.OUT_OF_MEMORY),
        (1, "terminate called after throwing an instance of 'std::bad_alloc'", "out_of_memory"),
        (1, "OSError: libfoo.so: failed to map segment from shared object", "out_of_memory"),
        (7, "", DeathReason.FAILED),
        (None, "", DeathReason.FAILED),
    ],
)
def test_death_from_exit(exit_code: int | None, output: str, reason: str) -> None:
    assert death_from_exit(exit_code, output).reason == reason


def test_signal_deaths_are_named() -> None:
    killed, crashed = death_from_exit(-signal.SIGKILL), death_from_exit(-signal.SIGSEGV)
    assert (killed.signal_name, killed.killed, killed.crashed) == ("SIGKILL", True, False)
    assert (crashed.signal_name, crashed.killed, crashed.crashed) == ("SIGSEGV", False, True)
    assert death_from_exit(-200).signal_name == "200"
    assert TIMED_OUT.reason == DeathReason.TIMEOUT


def test_out_of_memory_is_found_in_the_cause_chain() -> None:
    try:
        try:
            raise OSError(errno.ENOMEM, "no")
        except OSError as inner:
            raise RuntimeError("loading failed") from inner
    except RuntimeError as outer:
        assert is_out_of_memory(outer)
    assert is_out_of_memory(RuntimeError("std::bad_alloc"))
    assert is_out_of_memory(MemoryError())
    assert death_from_exception(ValueError("bad shape")).reason == DeathReason.FAILED


def test_reply_round_trips_and_refuses_other_shapes() -> None:
    done = ChildReply.done({"methods": ({"name": "forward"},)})
    assert ChildReply.from_bytes(done.to_bytes()) == done
    assert done.result == {"methods": [{"name": "forward"}]}
    refused = ChildReply.refused("job_failed", "no")
    assert ChildReply.from_output(b"noise\n" + refused.to_bytes() + b"\n") == refused
    for foreign in (b"", b"[1]", b'{"ok": true}', b'{"ok": false, "bogus": 1}', b"{"):
        assert ChildReply.from_bytes(foreign) is None


def test_preload_lists_name_importable_modules() -> None:
    names = preload_union(RUNTIME_WORKER_PRELOAD, SANDBOX_PRELOAD, LOWERING_PRELOAD)
    assert len(names) == len(set(names))
    assert [name for name in names if importlib.util.find_spec(name) is None] == []


def test_a_failure_close_to_the_memory_cap_counts_as_out_of_memory(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmPeak:\t  1000000 kB\nVmSize:\t  900000 kB\n")
    peak = 1000000 * 1024
    assert reached_memory_limit(peak, status)
    assert reached_memory_limit(peak + 16 * 2**20, status)  # within the last 32 MiB
    assert not reached_memory_limit(peak * 2, status)
    assert not reached_memory_limit(None, status)
    assert not reached_memory_limit(peak, tmp_path / "missing")


def test_any_failure_at_the_address_space_cap_is_out_of_memory() -> None:
    """Under a cap it has already reached, a process takes even an error that names no
    allocation (a library's own, hiding the ``MemoryError``) for running out of memory; with
    no cap, the same error is not."""
    probe = (
        "import resource\n"
        "from pteforge.children.death import is_out_of_memory\n"
        "from pteforge.children.limits import memory_figure\n"
        "hidden = ValueError(\"field 'target' is required for AnnAssign\")\n"
        "uncapped = is_out_of_memory(hidden)\n"
        "cap = memory_figure('VmPeak')\n"
        "resource.setrlimit(resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))\n"
        "print(uncapped, is_out_of_memory(hidden))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]
