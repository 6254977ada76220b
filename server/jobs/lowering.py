"""The disposable process that lowers one job: ``python -m pteforge.server.jobs.lowering``.

It is started per job by a compile worker with the request on stdin and a message pipe
on the file descriptor named in argv. It caps its own address space first, so an
out-of-memory lowering dies here and only fails its job. Programs are loaded only after
the sandbox validated them, with ``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1``.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from pteforge.server.jobs.protocol import LoweringRequest, encode


def _cap_memory(limit: int | None) -> None:
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


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


def _lower(request: LoweringRequest, emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    from pteforge.backends import default_catalog
    from pteforge.manager import Plan, compile_programs

    with tempfile.TemporaryDirectory(prefix="pteforge-lower-") as scratch:
        programs = _load_programs(Path(request.program_path), Path(scratch))
    plan = Plan.parse(request.plan)
    result = compile_programs(
        programs, plan, default_catalog(), on_stage=lambda stage: emit({"stage": stage})
    )
    Path(request.output_path).write_bytes(result.pte_bytes)
    return {"report": result.report, "methods": result.method_specs_json()}


def _error_code(exc: BaseException) -> str:
    from pteforge.server.jobs.failures import failure_code

    return failure_code(exc)


def run(request: LoweringRequest, pipe: BinaryIO) -> int:
    """Lower ``request``, reporting on ``pipe``; returns the process exit code."""

    def emit(message: dict[str, Any]) -> None:
        pipe.write(encode(message))
        pipe.flush()

    _cap_memory(request.memory_limit_bytes)
    try:
        emit({"result": _lower(request, emit)})
    except MemoryError:
        emit({"error": {"code": "out_of_memory", "message": "lowering ran out of memory"}})
        return 1
    except Exception as exc:
        emit({"error": {"code": _error_code(exc), "message": str(exc) or type(exc).__name__}})
        return 1
    return 0


def main(argv: list[str]) -> int:
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    request = LoweringRequest.from_json(sys.stdin.read())
    with os.fdopen(int(argv[1]), "wb") as pipe:
        return run(request, pipe)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
