"""Opt-in profiling: run a method once with ETDump on and summarise per-op and per-delegate time."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.contracts.jobs import OperatorTime
from pteforge.contracts.runtime_messages import Profile, ProfileEvent
from pteforge.runtime.errors import ExecutionError

_OPERATOR_PREFIX = "native_call_"
_DELEGATE_CALL = "DELEGATE_CALL"
PORTABLE = "portable"
"""The backend of an operator no delegate ran."""


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


def etdump_runs(data: bytes) -> list[list[dict[str, Any]]]:
    """The profile events of each ``Execute`` run of an ETDump, as ``flatc`` writes them in
    JSON (the fields of ETDump's ``ProfileEvent``; an unset one is absent).

    Upstream's reader (``deserialize_from_etdump_flatcc``) has ``flatc`` write this JSON,
    then builds dataclasses from it in pure Python: about 5 ms per run of a small encoder,
    most of a profile's fixed cost. Here the same JSON is read with ``json``.
    """
    from executorch.devtools.etdump.serialize import _convert_from_flatcc

    document = json.loads(_convert_from_flatcc(data))
    runs = [r for r in document.get("run_data") or [] if r.get("name") == "Execute"]
    return [
        [e["profile_event"] for e in run.get("events") or [] if e.get("profile_event")]
        for run in runs
    ]


def summarize_etdump(data: bytes, skip_runs: int = 0) -> Profile:
    """Per-operator, per-delegate-call and per-delegate-event times (µs) of the execute
    runs, leaving out the first ``skip_runs`` (a warm-up)."""
    events: dict[str, list[ProfileEvent]] = {"operators": [], "delegate_calls": [], "delegates": []}
    for run in etdump_runs(data)[skip_runs:]:
        for event in run:
            entry = _event_entry(event)
            if entry is not None:
                events[entry[0]].append(entry[1])
    return Profile.model_validate(events)


def delegate_backends(path: Path) -> dict[str, dict[int, str]]:
    """Per method, the backend id of each instruction that calls a delegate, from the
    program flatbuffer of the ``.pte`` at ``path`` (read confined: it is untrusted)."""
    from pteforge.runtime.metadata import program_table

    backends: dict[str, dict[int, str]] = {}
    for plan in program_table(path).execution_plan:
        calls = backends.setdefault(plan.name, {})
        for index, instruction in enumerate(plan.chains[0].instructions if plan.chains else []):
            delegate = getattr(instruction.instr_args, "delegate_index", None)
            if delegate is not None:
                calls[index] = str(plan.delegates[delegate].id)
    return backends


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
    runtime: Any, path: str, method_name: str, inputs: list[np.ndarray]
) -> tuple[list[np.ndarray], Profile]:
    """Run method ``method_name`` of the (already verified) file at ``path`` with ETDump on.

    Uses a separate, uncached program instance so the cached one stays un-instrumented.
    """
    from pteforge.runtime.instances import run_method

    program = runtime.load_program(Path(path), enable_etdump=True, debug_buffer_size=0)
    try:
        method = program.load_method(method_name)
    except Exception as exc:
        raise ExecutionError(f"cannot load method for profiling: {exc}") from exc
    outputs = run_method(method, inputs)
    with tempfile.TemporaryDirectory() as tmp:
        etdump, debug = Path(tmp, "run.etdp"), Path(tmp, "run.bin")
        program.write_etdump_result_to_file(str(etdump), str(debug))
        return outputs, summarize_etdump(etdump.read_bytes())
