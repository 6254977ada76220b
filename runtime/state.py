"""Which methods of a ``.pte`` keep state between calls, read from the program flatbuffer.

A method keeps state in its mutable buffers: registered buffers the graph writes, planned
into the program's memory arenas and left there between ``execute`` calls (the arenas live
as long as the loaded program; ExecuTorch's Python runtime even shares them across the
program's methods). In the flatbuffer a mutable buffer is a non-input tensor value with a
memory plan (``allocation_info``) that is also

- named (``extra_tensor_info.fully_qualified_name``: compiled with
  ``emit_mutable_buffer_names=True``; ``Method.get_attribute(name)`` then returns a view of
  it, so it can be reset in place), or
- given initial data (``data_buffer_idx`` > 0: the initial-value pass), or
- unnamed: a placeholder of the graph, which the emitter writes before the method's user
  inputs (``torch.export`` orders lifted parameters and buffers before user inputs).

Programs compiled with names have every mutable buffer named, so there unnamed planned
values are activations. Without names, a method with no user inputs cannot be told apart
by position and is assumed to keep state (it then pays a reload, never a leak).
"""

from __future__ import annotations

import logging
from typing import Any

from pteforge.contracts.runtime_messages import MethodState, ProgramState, planned_bytes

__all__ = ["MethodState", "ProgramState", "program_state", "read_program_state"]

_log = logging.getLogger(__name__)


def _planned_tensor(value: Any) -> Any:
    """The tensor of ``value`` if it is one with a memory plan, else None."""
    tensor = value.val
    return tensor if getattr(tensor, "allocation_info", None) is not None else None


def _name(tensor: Any) -> str | None:
    info = getattr(tensor, "extra_tensor_info", None)
    name = getattr(info, "fully_qualified_name", None) if info is not None else None
    return str(name) if name else None


def _method_state(plan: Any, named_program: bool) -> MethodState:
    inputs = set(plan.inputs)
    last_input = max(plan.inputs, default=None)
    names: list[str] = []
    unnamed = 0
    for index, value in enumerate(plan.values):
        tensor = _planned_tensor(value)
        if tensor is None or index in inputs:
            continue
        name = _name(tensor)
        if name is not None:
            names.append(name)
        elif named_program:
            continue  # every mutable buffer has a name here: this is an activation
        elif tensor.data_buffer_idx > 0 or last_input is None or index < last_input:
            unnamed += 1
    return MethodState(tuple(dict.fromkeys(names)), unnamed, planned_bytes(plan))


def _planned_bytes(plans: list[Any]) -> int:
    """Arena bytes of one loaded copy: per memory id, the largest any method plans."""
    sizes: dict[int, int] = {}
    for plan in plans:
        for mem_id, size in enumerate(plan.non_const_buffer_sizes[1:], start=1):
            sizes[mem_id] = max(sizes.get(mem_id, 0), int(size))
    return sum(sizes.values())


def program_state(program: Any) -> ProgramState:
    """The ``ProgramState`` of a deserialized ``executorch.exir.schema.Program``."""
    plans = list(program.execution_plan)
    named = any(
        _name(t) is not None
        for plan in plans
        for t in map(_planned_tensor, plan.values)
        if t is not None
    )
    return ProgramState(
        {plan.name: _method_state(plan, named) for plan in plans}, _planned_bytes(plans)
    )


def read_program_state(path: Any) -> ProgramState | None:
    """``program_state`` of the ``.pte`` at ``path``; None, with a warning naming the file,
    if its flatbuffer is malformed (callers then treat every method as keeping state). A
    file that cannot be read raises ``OSError``."""
    from pteforge.runtime.metadata import MALFORMED_FLATBUFFER, program_table

    try:
        return program_state(program_table(path))
    except MALFORMED_FLATBUFFER as exc:
        _log.warning(
            "cannot read the program flatbuffer of %s (%s: %s); every method is assumed to "
            "keep state",
            path,
            type(exc).__name__,
            exc,
        )
        return None
