"""Opt-in profiling: run a method once with ETDump on and summarise per-op and per-delegate time."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.contracts.runtime_messages import Profile, ProfileEvent
from pteforge.runtime.errors import ExecutionError

_OPERATOR_PREFIX = "native_call_"


def _event_entry(event: Any) -> tuple[str, ProfileEvent] | None:
    """Classify one ETDump profile event as an operator or a delegate-internal event."""
    if event is None:
        return None
    us = (event.end_time - event.start_time) / 1e3
    instruction = None if event.instruction_id is None else int(event.instruction_id)
    if event.name and event.name.startswith(_OPERATOR_PREFIX):
        name = event.name[len(_OPERATOR_PREFIX) :]
        return "operators", ProfileEvent(name=name, instruction=instruction, us=us)
    if event.name == "DELEGATE_CALL":
        return "delegate_calls", ProfileEvent(instruction=instruction, us=us)
    label = event.delegate_debug_id_str
    if event.name is None and label is not None:
        return "delegates", ProfileEvent(name=str(label), instruction=instruction, us=us)
    return None


def summarize_etdump(data: bytes) -> Profile:
    """Per-operator, per-delegate-call and per-delegate-event times (µs) of the execute runs."""
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    events: dict[str, list[ProfileEvent]] = {"operators": [], "delegate_calls": [], "delegates": []}
    for run in deserialize_from_etdump_flatcc(data).run_data:
        if run.name != "Execute":
            continue
        for event in run.events or []:
            entry = _event_entry(event.profile_event)
            if entry is not None:
                events[entry[0]].append(entry[1])
    return Profile.model_validate(events)


def profile_method(
    runtime: Any, path: str, method_name: str, inputs: list[np.ndarray]
) -> tuple[list[np.ndarray], Profile]:
    """Run method ``method_name`` of the (already verified) file at ``path`` with ETDump on.

    Uses a separate, uncached program instance so the cached one stays un-instrumented.
    """
    from pteforge.runtime.worker import run_method

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
