"""The generated flatbuffer readers (``runtime.flatbuffer_readers``) read an ETDump, a
program's delegate table and its whole Program table as upstream's readers do, on a small
MLP lowered to XNNPACK, the same MLP on portable kernels and a KV-cache program on upstream's
``llama::`` operators; a malformed ETDump or program raises ``ExecutionError``, and a
program whose vectors share one table costs linear work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pteforge.runtime.errors import ExecutionError, MalformedProgramError
from pteforge.runtime.instances import run_method
from pteforge.runtime.profiling import delegate_backends, etdump_runs
from tests.models import small_mlp_programs
from tests.runtime.helpers import Compiled
from tests.security import kv_cache_program


@pytest.fixture(scope="module")
def programs(
    artifacts: dict[str, Compiled], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """The small MLP lowered to XNNPACK, and on portable kernels only; a KV-cache program."""
    from executorch.exir import to_edge_transform_and_lower

    root = tmp_path_factory.mktemp("portable")
    portable = root / "mlp.pte"
    portable.write_bytes(
        to_edge_transform_and_lower(small_mlp_programs().programs).to_executorch().buffer
    )
    kv_cache = kv_cache_program.build(root / "kv_cache.pte")
    return {"xnnpack": artifacts["mlp"].path, "portable": portable, "kv_cache": kv_cache}


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


def _upstream_program(data: bytes) -> Any:
    from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program

    return _flatbuffer_to_program(data)


@pytest.mark.parametrize("kind", ["xnnpack", "portable", "kv_cache"])
def test_the_program_table_reads_as_upstream_reads_it(programs: dict[str, Path], kind: str) -> None:
    from pteforge.runtime.kernel_guards import kernel_guards
    from pteforge.runtime.metadata import program_flatbuffer, program_table

    table = program_table(programs[kind])
    assert table == _upstream_program(program_flatbuffer(programs[kind]))
    guarded = {"forward", "attend"} if kind == "kv_cache" else set()
    assert kernel_guards(programs[kind]).positions == guarded


def test_a_malformed_program_table_raises_or_reads_as_upstream(
    programs: dict[str, Path], tmp_path: Path
) -> None:
    """Truncated or with a byte flipped: ``MalformedProgramError``, or what upstream reads."""
    from pteforge.runtime.metadata import program_flatbuffer, program_table

    data = program_flatbuffer(programs["kv_cache"])
    step = max(1, len(data) // 150)
    broken = [data[:cut] for cut in range(0, len(data), step)]
    broken += [
        data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :] for at in range(0, len(data), step)
    ]
    path, read = tmp_path / "broken.pte", 0
    for case in broken:
        path.write_bytes(case)
        try:
            table = program_table(path)
        except MalformedProgramError as exc:
            assert "malformed program" in str(exc)
            continue
        read += 1
        assert table == _upstream_program(case)
    assert read  # some flips land on values any reader takes


def _shared_tables(count: int) -> bytes:
    """A program of ``count`` plans that are one plan of ``count`` values that are one."""
    import flatbuffers

    from pteforge.runtime.flatbuffer_readers import PROGRAM_SCHEMA, generated_reader

    fb, builder = generated_reader(PROGRAM_SCHEMA), flatbuffers.Builder(0)
    fb.IntStart(builder)
    fb.IntAddIntVal(builder, 7)
    number = fb.IntEnd(builder)
    fb.EValueStart(builder)
    fb.EValueAddValType(builder, fb.KernelTypes.Int)
    fb.EValueAddVal(builder, number)
    value = fb.EValueEnd(builder)
    values = _repeated(builder, fb.ExecutionPlanStartValuesVector, value, count)
    fb.ExecutionPlanStart(builder)
    fb.ExecutionPlanAddValues(builder, values)
    plan = fb.ExecutionPlanEnd(builder)
    plans = _repeated(builder, fb.ProgramStartExecutionPlanVector, plan, count)
    fb.ProgramStart(builder)
    fb.ProgramAddExecutionPlan(builder, plans)
    builder.Finish(fb.ProgramEnd(builder), file_identifier=b"ET12")
    return bytes(builder.Output())


def _repeated(builder: Any, start_vector: Any, table: int, count: int) -> int:
    """A vector of ``count`` offsets all pointing at one ``table``."""
    start_vector(builder, count)
    for _ in range(count):
        builder.PrependUOffsetTRelative(table)
    return int(builder.EndVector())


def test_shared_tables_are_paid_for_each_time_they_are_read(tmp_path: Path) -> None:
    """Upstream unpacks 40 000 values out of this 1.7 kB; the budget stops at 430."""
    from pteforge.runtime.metadata import program_table

    path = tmp_path / "shared.pte"
    path.write_bytes(_shared_tables(200))
    assert (
        sum(len(plan.values) for plan in _upstream_program(path.read_bytes()).execution_plan)
        == 200 * 200
    )
    with pytest.raises(MalformedProgramError, match="malformed program"):
        program_table(path)
