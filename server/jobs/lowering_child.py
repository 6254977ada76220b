"""The disposable process that lowers one job, forked from a preloaded fork server.

Each compile worker keeps a ``forkserver`` that imported torch, ExecuTorch and the manager
once and, with the warm-up on, lowered a tiny program of its own (:mod:`warmup`); each job is
a fresh child of it, ready in milliseconds and warm (no per-job imports, no state shared
between jobs). The child is started *before* its job, as a standby: it waits for one
request, lowers it, runs the numerics check on the ``.pte`` it wrote (stage ``verify``: each
method in the native runtime against the exported programs it already holds) and exits.
First it confines itself (:mod:`pteforge.children.confine`: it reads and writes only the
worker's scratch directory, has no network, no capabilities and starts no program but
``flatc``, with which XNNPACK serialises its graphs; its fork server started with a clean
environment, so no database URL or ``PTEFORGE_*`` secret is in it). Before
touching the job it caps its own address space, so an out-of-memory lowering dies there and
only fails its job, and it loads programs only after the sandbox validated them, with
``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1``.
A profile job's child measures an artifact's method instead (:mod:`profile_child`).
Messages both ways are JSON, never pickles: the child reads untrusted programs, so the worker
must not unpickle what it sends.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from pteforge.children.confine import Confinement, confine, flatc
from pteforge.children.death import is_out_of_memory
from pteforge.children.limits import (
    WEIGHTS_ONLY_ENV,
    ChildLimits,
    apply_limits,
    take_default_signals,
)
from pteforge.contracts import jobs as messages
from pteforge.contracts.errors import ErrorCode, code_of
from pteforge.contracts.json_types import plain_json
from pteforge.quiet import start_native_threadpool
from pteforge.server.jobs.pipe import recv_request, send_message
from pteforge.server.startup.heap import freeze_startup_heap

if TYPE_CHECKING:
    from pteforge.manager.verify import NumericsCase

_PR_SET_PDEATHSIG = 1


def _detach() -> None:
    """Take default signal handling and die with the fork server (and so the worker)."""
    take_default_signals()
    apply_limits(ChildLimits())  # no core dumps
    with contextlib.suppress(OSError, AttributeError):  # not Linux: no parent-death signal
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, 9)
    os.environ.update(WEIGHTS_ONLY_ENV)


def _contain(memory_limit: int | None) -> None:
    """Cap the address space before the job's programs are read."""
    apply_limits(ChildLimits(memory_bytes=memory_limit))


def _load_programs(path: Path, scratch: Path) -> dict[str, Any]:
    from pteforge.server.programs.bundle import extract_bundle, is_bundle
    from pteforge.server.sandbox import load_validated_programs

    if not is_bundle(path):
        return dict(load_validated_programs(path))
    programs: dict[str, Any] = {}
    for method, file in extract_bundle(path, scratch).items():
        loaded = load_validated_programs(file)
        if len(loaded) != 1:
            raise ValueError(f"method {method!r} archive holds {len(loaded)} programs, not 1")
        programs[method] = next(iter(loaded.values()))
    return programs


def _lower(request: messages.LoweringRequest, conn: Connection) -> messages.LoweringResult:
    from pteforge.backends import default_catalog
    from pteforge.manager import compile_programs, verify_numerics

    def on_stage(stage: str) -> None:
        send_message(conn, messages.StageMessage(stage=stage))

    with tempfile.TemporaryDirectory(prefix="pteforge-lower-") as scratch:
        programs = _load_programs(Path(request.program_path), Path(scratch))
    result = compile_programs(programs, request.plan, default_catalog(), on_stage=on_stage)
    result.write(request.output_path)
    on_stage("verify")
    methods = [result.methods[name] for name in sorted(result.methods)]
    cases: dict[str, NumericsCase] = {}
    numerics = plain_json(verify_numerics(programs, result, cases))
    bundled = request.bundle_path is not None and _bundle(request, cases)
    return messages.LoweringResult(
        report=plain_json(result.report), methods=tuple(methods), numerics=numerics,
        bundled=bundled,
    )  # fmt: skip


def _bundle(request: messages.LoweringRequest, cases: dict[str, NumericsCase]) -> bool:
    """Write the BundledProgram of the job's ``.pte`` and numerics-check cases; False if
    no method ran."""
    from pteforge.manager.bundle import bundled_program

    data = bundled_program(Path(request.output_path), cases)
    if data is None or request.bundle_path is None:
        return False
    Path(request.bundle_path).write_bytes(data)
    return True


def _serve(request: messages.ChildRequest, conn: Connection) -> BaseModel:
    """The job's last message: a lowering's result or a profile."""
    if isinstance(request, messages.ProfileRequest):
        from pteforge.server.jobs.profile_child import profile

        return messages.ProfileMessage(profile=profile(request, _load_programs))
    return messages.ResultMessage(result=_lower(request, conn))


def standby_main(conn: Connection, warm_up: bool, scratch: str) -> None:
    """Entry point of the forked child: confine itself to ``scratch`` (before any thread
    starts), warm up if asked (only where its fork server did not), report itself ready, wait
    for one request, lower it, exit."""
    start = time.perf_counter()
    _detach()
    confine(Confinement(Path(scratch), (Path(scratch),), executable=flatc()))  # XNNPACK's
    start_native_threadpool()  # now, confined: its CPU probe would log on every job
    if warm_up:
        from pteforge.server.jobs.warmup import warm_up_lowering

        warm_up_lowering()
    # Torch, ExecuTorch and warm caches live as long as this one-job process: the job's full
    # collections walk only what it allocates (GC time in a 4-layer lowering: 2.3 s -> 1.0 s).
    freeze_startup_heap()
    seconds = time.perf_counter() - start
    print(f"lowering process {os.getpid()} ready in {seconds:.2f}s", file=sys.stderr, flush=True)
    try:
        request = recv_request(conn)
    except EOFError:  # discarded before it got a job
        return
    _contain(request.memory_limit_bytes)
    try:
        send_message(conn, _serve(request, conn))
    except Exception as exc:
        send_message(conn, messages.ErrorMessage(error=_error(exc, request.memory_limit_bytes)))
    finally:
        conn.close()


def _error(exc: Exception, memory_limit: int | None) -> messages.JobError:
    if is_out_of_memory(exc):
        limit = memory_limit or 0
        message = f"lowering ran out of memory (limit {limit / 2**20:.0f} MiB): {exc}"
        return messages.JobError(code=ErrorCode.OUT_OF_MEMORY, message=message)
    return messages.JobError(code=code_of(exc), message=str(exc) or repr(exc))
