"""Opt-in profiling: run a method once with ETDump on and summarise per-op and per-delegate time."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.contracts.jobs import OperatorTime
from pteforge.contracts.runtime_messages import Profile, ProfileEvent
from pteforge.contracts.specs import MethodSignature
from pteforge.runtime.artifact_files import data_beside
from pteforge.runtime.errors import ExecutionError, MalformedProgramError
from pteforge.runtime.flatbuffer_readers import (
    ETDUMP_SCHEMA,
    PROGRAM_SCHEMA,
    ElementBudget,
    FlatbufferReaderError,
    generated_reader,
)
from pteforge.runtime.metadata import MALFORMED_FLATBUFFER, program_flatbuffer

_OPERATOR_PREFIX = "native_call_"
_DELEGATE_CALL = "DELEGATE_CALL"
PORTABLE = "portable"
"""The backend of an operator no delegate ran."""
_MALFORMED: tuple[type[Exception], ...] = (FlatbufferReaderError, *MALFORMED_FLATBUFFER)
MAX_ETDUMP_BYTES = 1 << 30
"""The largest ETDump read back (a profile's runs of a large model stay far below)."""


def _event_entry(event: dict[str, Any]) -> tuple[str, ProfileEvent] | None:
    """Classify one ETDump profile event (see :func:`etdump_runs`) as an operator, a
    delegate call or a delegate-internal event."""
    us = (event["end_time"] - event["start_time"]) / 1e3
    instruction = event.get("instruction_id")
    instruction = None if instruction is None else int(instruction)
    name, label = event.get("name"), event.get("delegate_debug_id_str")
    if name and name.startswith(_OPERATOR_PREFIX):
        name = name[len(_OPERATOR_PREFIX) :]
        return "operators", ProfileEvent(name=name, instruction=instruction, us=us)
    if name == _DELEGATE_CALL:
        return "delegate_calls", ProfileEvent(instruction=instruction, us=us)
    if name is None and label is not None:
        return "delegates", ProfileEvent(name=str(label), instruction=instruction, us=us)
    return None


NameFilter = Callable[[str | None], bool]
"""Which profile events (by name) a reader keeps: the others' other fields are not read."""


def is_operator_row_event(name: str | None) -> bool:
    """Whether an event named ``name`` makes an operator row (:func:`operator_times`): an
    operator (``native_call_...``) or a delegate call, not a delegate's own event."""
    return name is not None and (name.startswith(_OPERATOR_PREFIX) or name == _DELEGATE_CALL)


def etdump_runs(
    data: bytes,
    skip_runs: int = 0,
    keep: NameFilter | None = None,
    max_events: int | None = None,
) -> list[list[dict[str, Any]]]:
    """The profile events of each ``Execute`` run but the first ``skip_runs`` (not read at
    all) of an ETDump (size-prefixed, as
    ExecuTorch writes it): the fields of ETDump's ``ProfileEvent`` that a profile reads
    (``name``, ``instruction_id``, ``delegate_debug_id_str``, ``start_time``, ``end_time``)
    as upstream's reader gives them: an unset string is ``None``, an unset number its
    schema default. With ``keep``, only the events whose name it accepts (the others are
    left after their name: a third of an event's reading). With ``max_events``, only the
    first runs whose events (kept or not) add up to at most that many: at least one.

    Upstream's reader has ``flatc`` write the whole ETDump as JSON in a subprocess (15-25 ms
    wall, most of a short profile's fixed cost); the reader generated from the same schema
    (:mod:`pteforge.runtime.flatbuffer_readers`) reads these fields in place, in about 10 us
    of CPU an event (0.6 ms for a small MLP's 11 runs, 5-9 ms for 500-900 events). The ETDump is
    our own child's, of an untrusted program: a malformed one raises ``ExecutionError``.
    """
    schema = generated_reader(ETDUMP_SCHEMA)  # its failure is no malformed ETDump
    try:
        return _execute_runs(schema, data, skip_runs, keep, max_events)
    except _MALFORMED as exc:
        raise ExecutionError(f"malformed ETDump ({type(exc).__name__}: {exc})") from exc


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


def _execute_runs(
    schema: Any, data: bytes, skip_runs: int, keep: NameFilter | None, max_events: int | None
) -> list[list[dict[str, Any]]]:
    if not 8 <= len(data) <= MAX_ETDUMP_BYTES or struct.unpack_from("<I", data)[0] > len(data) - 4:
        raise FlatbufferReaderError(f"not a size-prefixed ETDump of at most {MAX_ETDUMP_BYTES} B")
    root, budget = schema.ETDump.GetRootAs(data, 4), ElementBudget(data)
    runs: list[list[dict[str, Any]]] = []
    left = max_events
    for index in range(budget.take(root.RunDataLength(), "run_data")):
        run = root.RunData(index)
        if _text(run.Name()) != "Execute":
            continue
        if skip_runs > 0:
            skip_runs -= 1
            continue
        length = budget.take(run.EventsLength(), "events")
        if left is not None:
            if runs and length > left:
                break
            left -= length
        events = (run.Events(i) for i in range(length))
        profiled = (event.ProfileEvent() for event in events)
        read = (_profile_event(event, keep) for event in profiled if event is not None)
        runs.append([event for event in read if event is not None])
    return runs


def _profile_event(event: Any, keep: NameFilter | None) -> dict[str, Any] | None:
    name = _text(event.Name())
    if keep is not None and not keep(name):
        return None
    return {
        "name": name,
        "instruction_id": event.InstructionId(),
        "delegate_debug_id_str": _text(event.DelegateDebugIdStr()),
        "start_time": event.StartTime(),
        "end_time": event.EndTime(),
    }


def etdump_bytes(program: Any) -> bytes:
    """The ETDump of the runs of ``program`` (loaded with ETDump on). ExecuTorch writes it
    to a path only, and at most once per program (a second write, even after a refused
    one, crashes the process): to an anonymous file in memory (``memfd``) named by its
    ``/proc/self/fd`` path, read back from there. No file on disk to create and remove: 0.1
    ms, where a temporary file took 0.6 ms in a fresh process, and several ms while the disk
    was busy. The debug buffer (``debug_buffer_size=0``: none) goes to ``/dev/null``."""
    fd = os.memfd_create("pteforge-etdump", os.MFD_CLOEXEC)
    try:
        program.write_etdump_result_to_file(f"/proc/self/fd/{fd}", os.devnull)
        return os.pread(fd, min(os.fstat(fd).st_size, MAX_ETDUMP_BYTES + 1), 0)
    finally:
        os.close(fd)


def summarize_etdump(data: bytes, skip_runs: int = 0) -> Profile:
    """Per-operator, per-delegate-call and per-delegate-event times (µs) of the execute
    runs, leaving out the first ``skip_runs`` (a warm-up)."""
    return summarize_runs(etdump_runs(data, skip_runs))


def summarize_runs(runs: list[list[dict[str, Any]]]) -> Profile:
    """The :class:`Profile` of the events of ``runs`` (:func:`etdump_runs`)."""
    events: dict[str, list[ProfileEvent]] = {"operators": [], "delegate_calls": [], "delegates": []}
    for run in runs:
        for event in run:
            entry = _event_entry(event)
            if entry is not None:
                events[entry[0]].append(entry[1])
    return Profile.model_validate(events)


def delegate_backends(path: Path) -> dict[str, dict[int, str]]:
    """Per method, the backend id of each instruction that calls a delegate, from the
    program flatbuffer of the ``.pte`` at ``path`` (untrusted: read in place by the
    generated reader, bounds checked; a malformed one raises ``MalformedProgramError``,
    an ``ExecutionError``)."""
    schema = generated_reader(PROGRAM_SCHEMA)
    try:
        return _delegate_calls(schema, program_flatbuffer(path))
    except _MALFORMED as exc:
        raise MalformedProgramError(f"malformed program ({type(exc).__name__}: {exc})") from exc


def _delegate_calls(schema: Any, data: bytes) -> dict[str, dict[int, str]]:
    program, budget = schema.Program.GetRootAs(data, 0), ElementBudget(data)
    backends: dict[str, dict[int, str]] = {}
    for p in range(budget.take(program.ExecutionPlanLength(), "execution_plan")):
        plan = program.ExecutionPlan(p)
        calls = backends.setdefault(_text(plan.Name()) or "", {})
        if plan.ChainsLength():
            calls.update(_chain_delegates(schema, plan, budget))
    return backends


def _chain_delegates(schema: Any, plan: Any, budget: ElementBudget) -> dict[int, str]:
    """Instruction index -> backend id of each delegate call of ``plan``'s first chain."""
    calls, chain = {}, plan.Chains(0)
    for index in range(budget.take(chain.InstructionsLength(), "instructions")):
        instruction = chain.Instructions(index)
        if instruction.InstrArgsType() != schema.InstructionArguments.DelegateCall:
            continue
        call, args = schema.DelegateCall(), instruction.InstrArgs()
        call.Init(args.Bytes, args.Pos)
        delegate = call.DelegateIndex()
        if not 0 <= delegate < plan.DelegatesLength():
            raise FlatbufferReaderError(f"instruction {index} calls delegate {delegate}")
        calls[index] = _text(plan.Delegates(delegate).Id()) or ""
    return calls


def operator_times(profile: Profile, backends: dict[int, str]) -> list[OperatorTime]:
    """One row per operator name (backend ``portable``) and per delegate backend id (name
    ``DELEGATE_CALL``, from ``backends``: instruction -> backend id), summed over the
    profile's runs, largest ``total_us`` first; ``share`` is of the rows' total."""
    rows: dict[tuple[str, str], list[float]] = {}
    for event in profile.operators:
        rows.setdefault((event.name or "unknown", PORTABLE), []).append(event.us)
    for event in profile.delegate_calls:
        instruction = -1 if event.instruction is None else event.instruction
        backend = backends.get(instruction, "unknown delegate")
        rows.setdefault((_DELEGATE_CALL, backend), []).append(event.us)
    total = sum(sum(times) for times in rows.values()) or 1.0
    table = [
        OperatorTime(name=name, backend=backend, calls=len(times), total_us=round(sum(times), 3),
                     share=sum(times) / total)
        for (name, backend), times in rows.items()
    ]  # fmt: skip
    return sorted(table, key=lambda row: (-row.total_us, row.name))


def profile_method(
    runtime: Any, path: str, signature: MethodSignature, inputs: list[np.ndarray]
) -> tuple[list[np.ndarray], Profile]:
    """Run the method of ``signature`` (its constants in their places) of the (already
    verified) file at ``path`` with ETDump on.

    Uses a separate, uncached program instance so the cached one stays un-instrumented.
    """
    from pteforge.runtime.instances import run_method

    program = runtime.load_program(
        Path(path), enable_etdump=True, debug_buffer_size=0, data_path=data_beside(Path(path))
    )
    try:
        method = program.load_method(signature.name)
    except Exception as exc:
        raise ExecutionError(f"cannot load method for profiling: {exc}") from exc
    outputs = run_method(method, inputs, signature.name, signature)
    return outputs, summarize_etdump(etdump_bytes(program))
