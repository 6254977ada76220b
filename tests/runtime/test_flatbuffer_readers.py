"""The generated flatbuffer readers (``runtime.flatbuffer_readers``) read an ETDump and a
program's delegate table as upstream's ``flatc``-based readers do, on a small MLP lowered to
XNNPACK and the same MLP on portable kernels; a malformed ETDump raises ``ExecutionError``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pteforge.runtime.errors import ExecutionError
from pteforge.runtime.instances import run_method
from pteforge.runtime.profiling import delegate_backends, etdump_runs
from tests.models import small_mlp_programs
from tests.runtime.helpers import Compiled


@pytest.fixture(scope="module")
def programs(
    artifacts: dict[str, Compiled], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """The small MLP lowered to XNNPACK, and on portable kernels only."""
    from executorch.exir import to_edge_transform_and_lower

    portable = tmp_path_factory.mktemp("portable") / "mlp.pte"
    portable.write_bytes(
        to_edge_transform_and_lower(small_mlp_programs().programs).to_executorch().buffer
    )
    return {"xnnpack": artifacts["mlp"].path, "portable": portable}


def _etdump(path: Path, runs: int, scratch: Path) -> bytes:
    from executorch.runtime import Runtime

    inputs = [t.numpy() for t in small_mlp_programs().inputs["forward"]]
    program = Runtime.get().load_program(path, enable_etdump=True, debug_buffer_size=0)
    method = program.load_method("forward")
    for _ in range(runs):
        run_method(method, inputs)
    program.write_etdump_result_to_file(str(scratch / "run.etdp"), str(scratch / "run.bin"))
    return (scratch / "run.etdp").read_bytes()


def _upstream_runs(data: bytes) -> list[list[dict[str, Any]]]:
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    return [
        [vars(e.profile_event) for e in run.events or [] if e.profile_event is not None]
        for run in deserialize_from_etdump_flatcc(data).run_data
        if run.name == "Execute"
    ]


@pytest.mark.parametrize("kind", ["xnnpack", "portable"])
def test_etdump_and_delegates_read_as_upstream_reads_them(
    programs: dict[str, Path], kind: str, tmp_path: Path
) -> None:
    from pteforge.runtime.metadata import program_table

    data = _etdump(programs[kind], 3, tmp_path)
    ours, upstream = etdump_runs(data), _upstream_runs(data)
    assert len(ours) == 3 and all(ours)
    fields = ("name", "instruction_id", "delegate_debug_id_str", "start_time", "end_time")
    assert all(tuple(event) == fields for run in ours for event in run)
    assert [[{f: e[f] for f in fields} for e in run] for run in upstream] == ours
    expected = {
        plan.name: {
            index: str(plan.delegates[instruction.instr_args.delegate_index].id)
            for index, instruction in enumerate(plan.chains[0].instructions)
            if hasattr(instruction.instr_args, "delegate_index")
        }
        for plan in program_table(programs[kind]).execution_plan
    }
    assert delegate_backends(programs[kind]) == expected
    assert bool(expected["forward"]) == (kind == "xnnpack")


def test_a_malformed_etdump_raises_execution_error(
    programs: dict[str, Path], tmp_path: Path
) -> None:
    data = _etdump(programs["xnnpack"], 1, tmp_path)
    broken = [data[:cut] for cut in range(0, len(data), 7)]
    broken += [data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :] for at in range(len(data))]
    broken.append(np.uint32(1 << 31).tobytes() + data[4:])  # a size past the end
    for case in broken:
        try:
            etdump_runs(case)
        except ExecutionError as exc:
            assert "malformed ETDump" in str(exc)


def test_a_malformed_program_raises_execution_error(
    programs: dict[str, Path], tmp_path: Path
) -> None:
    from pteforge.runtime.metadata import program_flatbuffer

    data = program_flatbuffer(programs["xnnpack"])
    broken = tmp_path / "broken.pte"
    for at in range(0, len(data), max(1, len(data) // 200)):
        broken.write_bytes(data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :])
        try:
            delegate_backends(broken)
        except ExecutionError as exc:
            assert "malformed program" in str(exc)
