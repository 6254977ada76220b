"""``ProgramManager.report()``: operator delegation per method and constant sharing.

Operator counting is upstream's ``get_delegation_info``; constants are compared by content
(dtype, shape and a sha256 of the bytes), so identical tensors in two methods count once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from executorch.devtools.backend_debug import get_delegation_info
from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program
from executorch.exir._serialize._program import _get_extended_header
from executorch.exir.lowered_backend_module import LoweredBackendModule
from executorch.exir.schema import DataLocation, Program
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from pteforge.contracts.runtime_messages import planned_bytes

_CONSTANT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
ConstantKey = tuple[str, tuple[int, ...], str]


def lowered_modules(program: ExportedProgram) -> Iterator[LoweredBackendModule]:
    """The delegate modules called from the top-level graph of ``program``."""
    module = program.graph_module
    for node in module.graph.nodes:
        if node.op == "get_attr":
            value = getattr(module, str(node.target), None)
            if isinstance(value, LoweredBackendModule):
                yield value


def method_report(program: ExportedProgram) -> dict[str, Any]:
    """Delegated operators per backend id and operators left to the portable runtime."""
    info = get_delegation_info(program.graph_module)
    backends: dict[str, dict[str, int]] = {}
    for lowered in lowered_modules(program):
        inner = get_delegation_info(lowered.original_module.graph_module)
        entry = backends.setdefault(
            lowered.backend_id, {"delegated_operators": 0, "delegated_subgraphs": 0}
        )
        entry["delegated_operators"] += inner.num_non_delegated_nodes
        entry["delegated_subgraphs"] += 1
    operators = {
        op: {"delegated": b.delegated, "non_delegated": b.non_delegated}
        for op, b in sorted(info.delegation_by_operator.items())
    }
    return {
        "delegated_operators": info.num_delegated_nodes,
        "non_delegated_operators": info.num_non_delegated_nodes,
        "delegated_subgraphs": info.num_delegated_subgraphs,
        "backends": backends,
        "operators": operators,
    }


def constant_key(tensor: torch.Tensor) -> ConstantKey:
    """Content identity of a constant tensor."""
    flat = tensor.detach().contiguous().reshape(-1)
    digest = hashlib.sha256(flat.view(torch.uint8).numpy()).hexdigest()
    return (str(tensor.dtype), tuple(tensor.shape), digest)


def method_constants(program: ExportedProgram) -> dict[ConstantKey, int]:
    """Constant tensors used by a method (its own and its delegates'), key -> bytes."""
    found: dict[ConstantKey, int] = {}
    for spec in program.graph_signature.input_specs:
        if spec.kind not in _CONSTANT_KINDS or spec.target is None:
            continue
        value = program.state_dict.get(spec.target, program.constants.get(spec.target))
        if isinstance(value, torch.Tensor):
            found[constant_key(value)] = value.numel() * value.element_size()
    for lowered in lowered_modules(program):
        found.update(method_constants(lowered.original_module))
    return found


def constants_report(programs: Mapping[str, ExportedProgram]) -> dict[str, int]:
    """Total constant bytes over methods, unique bytes, and bytes used by several methods."""
    per_method = [method_constants(p) for p in programs.values()]
    uses: dict[ConstantKey, int] = {}
    sizes: dict[ConstantKey, int] = {}
    for constants in per_method:
        for key, size in constants.items():
            uses[key] = uses.get(key, 0) + 1
            sizes[key] = size
    return {
        "constant_bytes": sum(sum(c.values()) for c in per_method),
        "unique_constant_bytes": sum(sizes.values()),
        "shared_constant_bytes": sum(sizes[k] for k, n in uses.items() if n > 1),
    }


def program_report(programs: Mapping[str, ExportedProgram]) -> dict[str, Any]:
    """The JSON-serialisable report of ``ProgramManager.report()``."""
    return {
        "methods": {name: method_report(p) for name, p in sorted(programs.items())},
        "program": constants_report(programs),
    }


def planned_memory(pte: bytes) -> dict[str, int]:
    """Per method of ``pte``, the bytes its memory plan allocates when it is loaded
    (activations and mutable buffers, each dynamic dimension planned for its max): what a
    runtime worker, or a /v2 session, holds for it besides the weights."""
    program, _, _ = _program_of(pte)
    return {str(plan.name): planned_bytes(plan) for plan in program.execution_plan}


def _program_of(pte: bytes) -> tuple[Program, int, int]:
    """The flatbuffer program of ``pte``, its size and the segment base offset (0: none)."""
    header = _get_extended_header(pte)
    if header is None or not header.is_valid():
        return _flatbuffer_to_program(pte), len(pte), 0
    return (
        _flatbuffer_to_program(pte[: header.program_size]),
        header.program_size,
        header.segment_base_offset,
    )


def _segment_roles(program: Program) -> list[tuple[str, int]]:
    """(role, segment index) in the order that decides who a shared byte is counted for."""
    roles = (
        [("constant_bytes", program.constant_segment.segment_index)]
        if (len(program.constant_segment.offsets) > 1)
        else []
    )
    roles += [("mutable_data_bytes", s.segment_index) for s in program.mutable_data_segments or []]
    roles += [
        ("delegate_bytes", d.processed.index)
        for plan in program.execution_plan
        for d in plan.delegates
        if d.processed.location == DataLocation.SEGMENT
    ]
    roles += [("named_data_bytes", n.segment_index) for n in program.named_data or []]
    return roles


def _merged(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Disjoint, sorted union of half-open byte ranges."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def pte_layout(pte: bytes) -> dict[str, int]:
    """Where the bytes of a ``.pte`` go, each byte counted once.

    ``program_bytes`` is the flatbuffer (instructions, tensor metadata, inline data);
    ``constant_bytes`` the portable constant segment; ``named_data_bytes`` named blobs (the
    weights XNNPACK reads, a Core ML model) outside the constant segment, so a blob that
    aliases a portable constant adds nothing; ``delegate_bytes`` delegate payloads;
    ``padding_bytes`` the rest. ``(constant_bytes + named_data_bytes)`` over the report's
    ``unique_constant_bytes`` says how much weight data the file stores per unique weight byte
    (1.0 plus alignment padding: each weight once; about 2: stored twice).
    """
    program, program_size, base = _program_of(pte)
    layout = dict.fromkeys(
        ("constant_bytes", "mutable_data_bytes", "delegate_bytes", "named_data_bytes"), 0
    )
    covered: list[tuple[int, int]] = []
    seen: set[int] = set()
    for role, index in _segment_roles(program) if base else []:
        if index in seen:
            continue
        seen.add(index)
        segment = program.segments[index]
        start, end = segment.offset, segment.offset + segment.size
        overlap = sum(max(0, min(end, e) - max(start, s)) for s, e in covered)
        layout[role] += segment.size - overlap
        covered = _merged([*covered, (start, end)])
    layout["program_bytes"] = program_size
    layout["padding_bytes"] = len(pte) - sum(layout.values())
    layout["pte_bytes"] = len(pte)
    return layout
