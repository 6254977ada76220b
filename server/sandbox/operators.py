"""Which callables a serialized graph may name: torch's own operator registry, minus a denylist.

An uploaded program names each node's callable as a string (``torch.ops.aten.add.Tensor``,
``_operator.mul``); ``torch.export.load`` resolves it with ``getattr`` and would happily return
``torch.load`` or any other callable it reaches. A target is accepted only if it is

* an operator overload that the installed torch registers under :data:`OPERATOR_NAMESPACES`
  (read from ``operators_torch.json``, which ``operators_torch.py`` generates from torch itself
  and ``tests/sandbox`` checks against the installed torch), and is not in :data:`DENIED`;
* a higher-order operator of :data:`SAFE_HIGHER_ORDER` that torch registers; or
* one of the :data:`SYMBOLIC_FUNCTIONS` the serializer writes for shape arithmetic.

No torch import: the registry is a file, read once per process (about 2 ms).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Strict
from pydantic.dataclasses import dataclass

from pteforge.contracts.json_types import JsonObject, JsonValue
from pteforge.contracts.specs import JsonForm

REGISTRY_FILE = Path(__file__).with_name("operators_torch.json")
OPS_PREFIX = "torch.ops."
HIGHER_ORDER = "higher_order"
OPERATOR_NAMESPACES = (
    "aten",
    "prims",
    HIGHER_ORDER,
    "quantized_decomposed",
    "torchao",
    "quantized",
    "_quantized",
)

_READS_FILE = "reads a file named in the program"
_FOREIGN_STORAGE = "points a tensor at another storage (raw, or another tensor's at any offset)"
_UNCHECKED_VIEW = "makes a view without checking it against its storage (reads outside it)"
_UNCHECKED_SPARSE = "builds a sparse tensor without checking its indices (reads outside it)"
_GLOBAL_STATE = "changes process-wide state"
_PRINTS = "writes to the process's standard output"
_RUNS_CODE = "runs code that is not part of the graph"
_CALLS_PYTHON = "calls a Python callable that is not part of the graph"
_CUSTOM_OBJECT = "calls a method of a custom (torchbind) object"

# Operators (any overload; or one overload, named in full) and higher-order operators that
# reach outside the graph's own tensors, each with the reason given to the client.
DENIED: dict[str, str] = {
    "torch.ops.aten.from_file": _READS_FILE,
    "torch.ops.aten.set_": _FOREIGN_STORAGE,
    "torch.ops.aten.set": _FOREIGN_STORAGE,
    "torch.ops.aten.set_data": "swaps a tensor's storage for another tensor's",
    "torch.ops.aten._reshape_alias": _UNCHECKED_VIEW,
    "torch.ops.aten._reshape_alias_copy": _UNCHECKED_VIEW,
    "torch.ops.aten._sparse_coo_tensor_unsafe": _UNCHECKED_SPARSE,
    "torch.ops.aten._sparse_compressed_tensor_unsafe": _UNCHECKED_SPARSE,
    "torch.ops.aten._sparse_csr_tensor_unsafe": _UNCHECKED_SPARSE,
    "torch.ops.aten._sparse_csc_tensor_unsafe": _UNCHECKED_SPARSE,
    "torch.ops.aten._sparse_bsr_tensor_unsafe": _UNCHECKED_SPARSE,
    "torch.ops.aten._sparse_bsc_tensor_unsafe": _UNCHECKED_SPARSE,
    "torch.ops.aten._cufft_set_plan_cache_max_size": _GLOBAL_STATE,
    "torch.ops.aten._cufft_clear_plan_cache": _GLOBAL_STATE,
    "torch.ops.aten._print": _PRINTS,
    "torch.ops.higher_order.print": _PRINTS,
    "torch.ops.higher_order.aoti_call_delegate": "runs an AOTInductor-compiled native library",
    "torch.ops.higher_order.executorch_call_delegate": "runs a precompiled backend payload",
    "torch.ops.higher_order.inductor_compiled_code": _RUNS_CODE,
    "torch.ops.higher_order.inline_asm_elementwise": "runs inline assembly",
    "torch.ops.higher_order.triton_kernel_wrapper_functional": "runs a Triton kernel",
    "torch.ops.higher_order.triton_kernel_wrapper_mutation": "runs a Triton kernel",
    "torch.ops.higher_order.call_torchbind": _CUSTOM_OBJECT,
    "torch.ops.higher_order.autograd_function_apply": _CALLS_PYTHON,
    "torch.ops.higher_order.custom_function_call": _CALLS_PYTHON,
    "torch.ops.higher_order.flat_apply": _CALLS_PYTHON,
    "torch.ops.higher_order.invoke_leaf_function": _CALLS_PYTHON,
    "torch.ops.higher_order.dynamo_bypassing_wrapper": _CALLS_PYTHON,
}

# Higher-order operators whose only callables are nested graphs (checked like the outer one)
# or an operator argument (``as_operator``, checked against this same policy).
SAFE_HIGHER_ORDER = frozenset(
    {
        "cond",
        "while_loop",
        "while_loop_stack_output",
        "map_impl",
        "scan",
        "associative_scan",
        "invoke_subgraph",
        "hints_wrapper",
        "wrap_with_set_grad_enabled",
        "wrap_with_autocast",
        "auto_functionalized",
        "auto_functionalized_v2",
        "with_effects",
        "out_dtype",
        "flex_attention",
    }
)

# Pure functions the serializer writes for symbolic shape arithmetic (its ``_SYM_OPS``, which
# tests/sandbox checks are all here, plus a few more it accepted before).
SYMBOLIC_FUNCTIONS = frozenset(
    {
        "_operator.getitem",
        "_operator.add",
        "_operator.sub",
        "_operator.mul",
        "_operator.floordiv",
        "_operator.truediv",
        "_operator.mod",
        "_operator.neg",
        "_operator.pos",
        "_operator.abs",
        "_operator.pow",
        "_operator.eq",
        "_operator.ne",
        "_operator.lt",
        "_operator.le",
        "_operator.gt",
        "_operator.ge",
        "_operator.and_",
        "_operator.or_",
        "_operator.not_",
        "_operator.xor",
        "_operator.lshift",
        "_operator.rshift",
        "math.ceil",
        "math.floor",
        "math.trunc",
        "math.sqrt",
        "torch.sym_max",
        "torch.sym_min",
        "torch.sym_float",
        "torch.sym_int",
        "torch.sym_not",
        "torch.sym_ite",
        "torch.sym_sqrt",
        "torch.sym_sum",
        "torch._sym_sqrt",  # what torch.sym_sqrt is serialized as
    }
)


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class Registry(JsonForm):
    """The operator overloads and higher-order operators one torch build registers; its
    JSON form (``operators_torch.json``) is ``{"torch_version", "operators": [...]}``, parsed
    by :meth:`~JsonForm.from_json`."""

    torch_version: Annotated[str, Strict()]
    operators: frozenset[Annotated[str, Strict()]]

    def to_json(self) -> JsonObject:
        """One operator per line when indented: a torch upgrade shows as a readable diff."""
        operators: list[JsonValue] = [*sorted(self.operators)]
        return {"torch_version": self.torch_version, "operators": operators}


@functools.cache
def registry() -> Registry:
    """The registry shipped with this package (read once per process)."""
    return Registry.from_json(json.loads(REGISTRY_FILE.read_text()))


def refusal(target: Any) -> str | None:
    """Why a serialized graph may not call ``target``; None if it may."""
    if not isinstance(target, str):
        return "an operator must be named by a string"
    if target in SYMBOLIC_FUNCTIONS:
        return None
    if not target.startswith(OPS_PREFIX):
        return (
            "not a torch operator (torch.ops.NAMESPACE.OPERATOR.OVERLOAD)"
            " nor a symbolic shape function"
        )
    denied = DENIED.get(target) or DENIED.get(target.rpartition(".")[0])
    if denied:
        return f"denied: {denied}"
    namespace = target[len(OPS_PREFIX) :].partition(".")[0]
    if namespace not in OPERATOR_NAMESPACES:
        return f"namespace {namespace!r} is not accepted (only {', '.join(OPERATOR_NAMESPACES)})"
    found = registry()
    if target not in found.operators:
        return f"not an operator overload registered by the installed torch {found.torch_version}"
    if namespace == HIGHER_ORDER and target.rpartition(".")[2] not in SAFE_HIGHER_ORDER:
        return "a higher-order operator that has not been reviewed as safe"
    return None
