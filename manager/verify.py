"""The numerics check of a compiled program: the ``.pte`` in the native runtime against eager.

Each method of the ``.pte`` runs in ``executorch.runtime`` (a freshly loaded program per
method, so every method starts from the program's initial state) on the exported program's
example inputs (``inputs: "example"``) or, where the archive keeps none, on inputs generated
from its input specs (``inputs: "generated"``: floats ``randn`` with a fixed seed, integers
zero so that ids and indices stay in range, booleans true; ``example_inputs.py``). The same
inputs go through the
exported program before quantization (``ExportedProgram.module()``, on copies of its
buffers), and every output tensor is compared, both as float64, ``a`` the runtime's, ``b``
the exported program's:

- ``max_abs_error`` = max |a - b|;
- ``max_rel_error`` = max |a - b| / max |b|: normwise (infinity norm), not elementwise, so
  that outputs near zero do not blow it up; with ``b`` all zeros the denominator is the
  smallest normal float32;
- ``sqnr_db`` = 10 log10(sum b^2 / sum (a - b)^2), null when ``a`` equals ``b`` exactly
  (``exact: true``) or ``b`` is all zeros (no signal to measure against).

Positions where both are NaN, or both the same infinity, count as equal; a metric that is
still not finite (a NaN or infinity on one side only) is null and fails the check. An fp32
method passes when every output's ``max_rel_error`` is at most the plan's ``verify.rtol``
(default 1e-4), a quantized method when every output's ``sqnr_db`` is at least
``verify.min_sqnr_db`` (default 20 dB). A method with a half-precision output (float16,
bfloat16) is judged, unless the plan sets ``rtol``, on ten of that format's epsilons
(float16: 9.8e-3, bfloat16: 7.8e-2): its rounding alone goes past 1e-4 (a DistilBERT in
float16: 6.9e-3, as in-process ExecuTorch gives too), so every such method was flagged. A
method delegated to a backend this host's runtime does not have (CoreML) is
``not_executable`` and says which backend.

ExecuTorch's own numerics tooling does not fit here: ``Inspector.calculate_numeric_gap``
compares per-operator *intermediate* outputs of the ``forward`` method only (the ETRecord's
debug handle map and representative inputs are read for ``forward``), needs an ETRecord
generated with representative inputs and an ETDump recorded with a debug buffer, and sees
nothing inside a delegate; our programs are multi-method and the question is whether each
method's final outputs match. Its ``SNRComparator`` is the formula used for ``sqnr_db``
here, but importing it loads pandas (about 1 s per lowering process) for one line.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch.export import ExportedProgram
from torch.utils import _pytree as pytree

from pteforge.contracts.artifact_report import unrunnable_reason
from pteforge.contracts.et_errors import failure_message
from pteforge.contracts.plan import TargetSpec, VerifySpec
from pteforge.manager.example_inputs import method_inputs
from pteforge.manager.signature import fixed_dimensions
from pteforge.quiet import keeping_native_lines

if TYPE_CHECKING:  # the compiler runs this check: its type only
    from pteforge.manager.compiler import CompiledProgram

_TINY = torch.finfo(torch.float32).tiny
_TINY_64 = torch.finfo(torch.float64).tiny
_STATUS_ORDER = ("error", "over_tolerance", "not_executable", "passed")


def output_error(actual: torch.Tensor, reference: torch.Tensor) -> dict[str, Any]:
    """``max_abs_error``, ``max_rel_error``, ``sqnr_db`` and ``exact`` of one output."""
    a = actual.detach().to(torch.float64).reshape(reference.shape)
    b = reference.detach().to(torch.float64)
    same = (a == b) | (a.isnan() & b.isnan())
    diff = torch.where(same, torch.zeros_like(a), (a - b).abs())
    exact = bool(same.all())
    max_abs = float(diff.max()) if diff.numel() else 0.0
    finite = torch.where(b.isfinite(), b, torch.zeros_like(b))
    scale = float(finite.abs().max()) if finite.numel() else 0.0
    return {
        "max_abs_error": _finite(max_abs),
        "max_rel_error": _finite(max_abs / max(scale, _TINY)),
        "sqnr_db": None if exact else _finite(_sqnr_db(finite, diff, max(scale, max_abs))),
        "exact": exact,
    }


def _sqnr_db(signal: torch.Tensor, noise: torch.Tensor, scale: float) -> float | None:
    """10 log10(sum signal^2 / sum noise^2), both divided by ``scale`` (their largest
    magnitude) first, so that outputs near float32's smallest normal do not square to
    nothing; None for a zero reference (no signal) or a non-finite error."""
    if not scale > 0 or not math.isfinite(scale):
        return None
    power = float((signal / scale).square().sum())
    error = float((noise / scale).square().sum())
    if power == 0 or not math.isfinite(error):
        return None
    return 10 * math.log10(power / max(error, _TINY_64))


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _clone(flat: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in flat]


def reference_outputs(program: ExportedProgram, flat: list[Any]) -> list[Any]:
    """Flat outputs of ``program`` run eagerly from its initial state. Its module aliases the
    program's buffers, so the run gets copies: the caller's program is never changed."""
    module = program.module()
    for name, buffer in list(module.named_buffers()):
        owner, _, leaf = name.rpartition(".")
        module.get_submodule(owner)._buffers[leaf] = buffer.clone()
    args, kwargs = pytree.tree_unflatten(_clone(flat), program.call_spec.in_spec)
    with torch.no_grad():
        return list(pytree.tree_leaves(module(*args, **kwargs)))


def runtime_outputs(pte: bytes, method: str, flat: list[Any]) -> list[Any]:
    """Outputs of ``method`` in a freshly loaded ``executorch.runtime`` program."""
    from executorch.runtime import Runtime, Verification

    program = Runtime.get().load_program(pte, verification=Verification.Minimal)
    loaded = program.load_method(method)
    if loaded is None:
        raise RuntimeError(f"the runtime could not load method {method!r}")
    return list(loaded.execute(_clone(flat)))


def _unavailable_backends(compiled: CompiledProgram, method: str) -> list[str]:
    from pteforge.backends import executable_backend_ids

    used = {lowered.backend_id for lowered in compiled.manager.lowered_modules(method)}
    return sorted(used - executable_backend_ids())


def _check(target: TargetSpec, settings: VerifySpec) -> tuple[str, float]:
    """The metric a method is judged on and its limit."""
    if target.quantize:
        return "sqnr_db", settings.min_sqnr_db
    return "max_rel_error", settings.rtol


_HALF = (torch.float16, torch.bfloat16)
_HALF_EPSILONS = 10


def _limit_for(outputs: list[Any], metric: str, limit: float, settings: VerifySpec) -> float:
    """``limit``, or for a method with a half-precision output and no ``rtol`` in the plan,
    ten epsilons of its least precise output's format (see the module docstring)."""
    if metric != "max_rel_error" or "rtol" in settings.model_fields_set:
        return limit
    halves = [o.dtype for o in outputs if isinstance(o, torch.Tensor) and o.dtype in _HALF]
    widest = max((torch.finfo(dtype).eps for dtype in halves), default=0.0)
    return max(limit, _HALF_EPSILONS * widest)


def _within(metric: str, limit: float, error: dict[str, Any]) -> bool:
    if error["exact"]:
        return True
    value = error[metric]
    if value is None:
        return False
    return bool(value >= limit) if metric == "sqnr_db" else bool(value <= limit)


def _compare(
    names: list[str], actual: list[Any], reference: list[Any], metric: str, limit: float
) -> list[dict[str, Any]]:
    tensors = [r for r in reference if isinstance(r, torch.Tensor)]
    if len(actual) != len(tensors):
        raise RuntimeError(
            f"the runtime returned {len(actual)} outputs, the exported program {len(tensors)}"
        )
    if len(names) != len(tensors):
        names = [f"output_{i}" for i in range(len(tensors))]
    outputs = []
    for name, a, b in zip(names, actual, tensors, strict=True):
        error = output_error(a, b)
        outputs.append({"name": name, **error, "within_tolerance": _within(metric, limit, error)})
    return outputs


NumericsCase = tuple[list[Any], list[Any]]
"""The flat inputs a method ran on in the numerics check, and the exported program's outputs."""


def verify_method(
    program: ExportedProgram,
    compiled: CompiledProgram,
    method: str,
    settings: VerifySpec,
    cases: dict[str, NumericsCase] | None = None,
) -> dict[str, Any]:
    """The numerics record of one method (see the module docstring); the inputs and the
    exported program's outputs go into ``cases`` when the method ran."""
    metric, limit = _check(compiled.targets.get(method, TargetSpec()), settings)
    record: dict[str, Any] = {"check": {"metric": metric, "limit": limit}}
    missing = _unavailable_backends(compiled, method)
    if missing:
        return {**record, "status": "not_executable", "message": unrunnable_reason(missing)}
    log: list[str] = []  # what the native runtime logged while the method ran
    try:
        flat, source = method_inputs(program)
        record["inputs"] = source
        reference = reference_outputs(program, flat)
        limit = record["check"]["limit"] = _limit_for(reference, metric, limit, settings)
        with keeping_native_lines() as log:
            actual = runtime_outputs(compiled.pte, method, flat)
        names = [spec.name for spec in compiled.methods[method].outputs]
        record["outputs"] = _compare(names, actual, reference, metric, limit)
        if cases is not None:
            cases[method] = (flat, reference)
    except Exception as exc:  # any failure to run is reported on the artifact, not raised
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:1000]
        return {**record, "status": "error", "message": failure_message(message, "".join(log))}
    passed = all(output["within_tolerance"] for output in record["outputs"])
    notes = [ALL_ZERO_REFERENCE] if passed and _all_zero(reference) else []
    fixed = fixed_dimensions(compiled.methods[method])
    notes += [f"{'; '.join(fixed)}: {FIXED_BY_LOWERING}"] if fixed else []
    if notes:
        record["message"] = "; ".join(notes)
    return {**record, "status": "passed" if passed else "over_tolerance"}


ALL_ZERO_REFERENCE = (
    "the exported program's outputs on these inputs are all zero, so the check compared "
    "nothing: export it with example inputs that give non-zero outputs (a language model's "
    "pad or BOS ids alone can give all-zero logits)"
)
"""The message of a method that passed against an all-zero reference."""

FIXED_BY_LOWERING = (
    "the .pte takes only that size (ExecuTorch's to_edge fixes a dimension its edge-operator "
    "check reads, such as the first one of a split's input), so /v2 refuses any other"
)
"""The message of a method whose exported dynamic dimension lowering fixed at one size."""


def _all_zero(reference: list[Any]) -> bool:
    floats = [r for r in reference if isinstance(r, torch.Tensor) and r.is_floating_point()]
    return bool(floats) and not any(bool(r.any()) for r in floats)


def verify_numerics(
    programs: Mapping[str, ExportedProgram],
    compiled: CompiledProgram,
    cases: dict[str, NumericsCase] | None = None,
) -> dict[str, Any]:
    """Run every method of ``compiled`` in the runtime and compare it with ``programs`` (the
    exported programs it was compiled from, before quantization).

    Returns the JSON record shown as ``numerics`` on artifacts and by ``pteforge compile``:
    ``status`` (the worst of the methods': ``error``, ``over_tolerance``, ``not_executable``,
    ``passed``), ``flagged`` (an error or a method over tolerance), ``tolerance``,
    ``seconds``, and per method its ``status``, ``check``, ``inputs`` and ``outputs``.
    ``cases`` (if given) receives each method's inputs and expected outputs, for a bundle.
    """
    start = time.perf_counter()
    settings = compiled.plan.tolerances
    methods = {
        m: verify_method(programs[m], compiled, m, settings, cases) for m in sorted(programs)
    }
    statuses = {record["status"] for record in methods.values()}
    status = next((s for s in _STATUS_ORDER if s in statuses), "passed")
    return {
        "status": status,
        "flagged": status in ("error", "over_tolerance"),
        "tolerance": settings.model_dump(),
        "seconds": round(time.perf_counter() - start, 4),
        "methods": methods,
    }
