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
from executorch.exir.lowered_backend_module import LoweredBackendModule
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

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
