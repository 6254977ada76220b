"""``compile_programs``: run a lowering plan over exported programs to a ``.pte``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import torch
from executorch.exir.backend.partitioner import Partitioner
from executorch.exir.error import InternalError
from executorch.exir.tensor import AddressSpaceOverflowException
from torch.export import ExportedProgram

from pteforge.backends import BackendCatalog, BackendCatalogError, UnknownBackendError
from pteforge.contracts.llm_runner import generation_info
from pteforge.contracts.plan import PlanSpec, TargetSpec
from pteforge.manager.buffers import executorch_config
from pteforge.manager.errors import PlanError, ProgramInputError, UnknownBackendIdError
from pteforge.manager.example_inputs import method_inputs
from pteforge.manager.lowering import MethodTarget
from pteforge.manager.partitioners import StageCallback
from pteforge.manager.plan import Calibration, calibration_tensors, parse_plan, resolve_targets
from pteforge.manager.plan_check import check_plan
from pteforge.manager.program_manager import ProgramManager, to_edge_transform_and_lower
from pteforge.manager.report import planned_memory
from pteforge.manager.signature import MethodSignature, fixed_by_lowering, method_signature

_E = TypeVar("_E")


@dataclass
class CompiledProgram:
    """A compiled ``.pte``, the signatures of its methods, (lazily) its report, and the plan
    and per-method targets it was compiled with."""

    pte: bytes
    methods: dict[str, MethodSignature]
    manager: ProgramManager = field(repr=False)
    plan: PlanSpec = field(default_factory=PlanSpec)
    targets: dict[str, TargetSpec] = field(default_factory=dict)

    @cached_property
    def report(self) -> dict[str, Any]:
        """``ProgramManager.report()`` of the lowered program, each method's
        ``planned_memory_bytes`` read from the ``.pte``, and ``generation`` when the plan's
        constant methods make it a language model in the LLM runner convention."""
        report = self.manager.report()
        for name, nbytes in planned_memory(self.pte).items():
            if name in report["methods"]:
                report["methods"][name]["planned_memory_bytes"] = nbytes
        constants = self.plan.constant_methods or {}
        answers = {k: v if isinstance(v, list) else [v] for k, v in constants.items()}
        info = generation_info([*self.methods, *constants], answers)
        if info is not None:
            report["generation"] = info.model_dump(mode="json")
        return report

    def write(self, path: str | Path) -> None:
        """Write the ``.pte`` bytes to ``path``."""
        Path(path).write_bytes(self.pte)


def compile_programs(
    programs: Mapping[str, ExportedProgram],
    plan: PlanSpec | Mapping[str, Any] | None,
    catalog: BackendCatalog,
    on_stage: StageCallback | None = None,
) -> CompiledProgram:
    """Quantize, lower and emit ``programs`` as ``plan`` says, with ``catalog``'s targets.

    ``on_stage`` is called with "quantize" (when a target quantizes), "to_edge",
    "partition" and "preprocess" (when anything is delegated) and "emit". Mutable buffers
    are planned as :func:`pteforge.manager.buffers.executorch_config` says. The numerics
    check is a separate step: :func:`pteforge.manager.verify.verify_numerics`.
    """
    if not programs:
        raise ProgramInputError("no programs given")
    parsed = parse_plan(plan)
    check_plan(parsed, sorted(programs), catalog)  # every name it uses, before any work
    targets = resolve_targets(parsed, sorted(programs))
    signatures = {m: method_signature(m, p) for m, p in sorted(programs.items())}
    quantized = _quantize(programs, targets, catalog, on_stage)
    requests = {m: _lowering_target(m, t, catalog) for m, t in targets.items() if t.delegated}
    constants = _constant_methods(parsed, programs)
    manager = to_edge_transform_and_lower(
        quantized, requests, on_stage=on_stage, constant_methods=constants
    )
    if on_stage is not None:
        on_stage("emit")
    edge = {m: manager.exported_program(m) for m in manager.methods}
    signatures = {m: fixed_by_lowering(s, edge[m]) for m, s in signatures.items()}
    config = executorch_config(edge, parsed.share_mutable_buffers)
    with torch.no_grad():  # config's passes retrace graphs whose parameters require grad
        pte = _emit(manager, config)
    return CompiledProgram(pte, signatures, manager, parsed, targets)


def _emit(manager: ProgramManager, config: Any) -> bytes:
    """The ``.pte`` bytes. A memory plan past 64 bits is the program's fault (a dynamic
    dimension exported with a huge ``Dim`` max), not a bug: upstream's InternalError for it
    becomes a ProgramInputError (``invalid_program``) that says so."""
    # Quantize/dequantize ops a partitioner leaves out of its delegate (SigLIP's towers under
    # XNNPACK int8) run on the runtime's portable kernels, whose out variants the emitter
    # finds only once upstream's quantized ops library is loaded; without it: "Missing out
    # variants". The import loads that library once per process.
    importlib.import_module("executorch.kernels.quantized")
    try:
        return bytes(manager.to_executorch(config).buffer)
    except InternalError as exc:
        if not isinstance(exc.__context__, AddressSpaceOverflowException):
            raise
        raise ProgramInputError(
            "its memory plan does not fit in 64 bits: a dynamic dimension's maximum "
            "(torch.export.Dim max) is too large for a .pte; export with a smaller one"
        ) from exc


def _constant_methods(
    plan: PlanSpec, programs: Mapping[str, ExportedProgram]
) -> dict[str, Any] | None:
    """The plan's constant methods; a name that is also a program method is refused."""
    constants = plan.constant_methods
    clash = sorted(set(constants or ()) & set(programs))
    if clash:
        raise PlanError(f"constant_methods.{clash[0]}", "the program has a method of this name")
    return dict(constants) if constants else None


def _quantize(
    programs: Mapping[str, ExportedProgram],
    targets: Mapping[str, TargetSpec],
    catalog: BackendCatalog,
    on_stage: StageCallback | None,
) -> dict[str, ExportedProgram]:
    """Programs with each target's quantization recipe applied."""
    out = dict(programs)
    todo = {m: t for m, t in targets.items() if t.quantize}
    if todo and on_stage is not None:
        on_stage("quantize")
    for method, target in todo.items():
        where = f"methods.{method}.quantize"
        entry = _entry(catalog.get_quantizer, str(target.quantize), where)
        calibration = calibration_tensors(f"methods.{method}", target) or _example_inputs(
            method, programs[method]
        )
        try:
            out[method] = entry.quantize(programs[method], calibration, target.partitioner_specs())
        except BackendCatalogError as exc:
            raise PlanError(where, str(exc)) from exc
    return out


def _example_inputs(method: str, program: ExportedProgram) -> Calibration:
    """The program's example inputs as one calibration sample, in its input order: keyword
    inputs too (``transformers`` models are exported with ``input_ids=...``)."""
    flat, source = method_inputs(program)
    if source != "example":
        raise PlanError(
            f"methods.{method}.calibration",
            "the program keeps no example inputs; give calibration tensors",
        )
    return (tuple(flat),)


def _lowering_target(method: str, target: TargetSpec, catalog: BackendCatalog) -> MethodTarget:
    """The Partitioner list or DelegationSpec a plan target names."""
    if target.delegate is not None:
        where = f"methods.{method}.delegate"
        delegate = _entry(catalog.get_delegate, "delegate", where)
        try:
            return delegate.delegation_spec(target.delegate.model_dump(mode="json"))
        except UnknownBackendError as exc:
            raise UnknownBackendIdError(exc.name, exc.known, method=method) from exc
        except BackendCatalogError as exc:
            raise PlanError(where, str(exc)) from exc
    partitioners: list[Partitioner] = []
    for index, spec in enumerate(target.partitioner_specs()):
        where = f"methods.{method}.partitioners[{index}]"
        entry = _entry(catalog.get_partitioner, spec.name, where)
        try:
            partitioners.append(entry.partitioner(spec.options or {}))
        except BackendCatalogError as exc:
            raise PlanError(where, str(exc)) from exc
    return partitioners


def _entry(get: Callable[[str], _E], name: str, where: str) -> _E:
    """The catalog entry ``name`` of the kind ``get`` returns; ``check_plan`` has refused
    unknown names and wrong kinds already, this keeps the catalog's word if it ever changes."""
    try:
        return get(name)
    except BackendCatalogError as exc:
        raise PlanError(where, str(exc)) from exc
