"""``to_edge`` and ``ProgramManager``: multi-method lowering on top of upstream EXIR."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

from executorch import exir
from executorch.exir import EdgeCompileConfig, EdgeProgramManager, ExecutorchBackendConfig
from executorch.exir.lowered_backend_module import LoweredBackendModule
from executorch.exir.program import ExecutorchProgramManager
from torch.export import ExportedProgram

from pteforge.manager.constant_sharing import fill_empty_constant_segment, store_shared_once
from pteforge.manager.errors import ProgramInputError
from pteforge.manager.lowering import BackendRequest, LoweringJob, MethodTarget, lower
from pteforge.manager.partitioners import StageCallback
from pteforge.manager.report import lowered_modules, program_report

Programs: TypeAlias = ExportedProgram | Mapping[str, ExportedProgram]


def _named(programs: Programs) -> dict[str, ExportedProgram]:
    """Method -> program, each a :func:`_detached` copy: upstream's ``to_backend`` pops the
    constants a delegate takes from its program's ``constants`` dict, which ``to_edge``
    shares with the caller's ``ExportedProgram``, so lowering the caller's own object would
    leave it unable to run (``program.module()``: KeyError on a lifted constant)."""
    named = {"forward": programs} if isinstance(programs, ExportedProgram) else dict(programs)
    if not named:
        raise ProgramInputError("no programs given")
    for method, program in named.items():
        if not isinstance(program, ExportedProgram):
            raise ProgramInputError(
                f"method {method!r} is a {type(program).__name__}, not an ExportedProgram",
                source=method,
            )
    return {method: _detached(program) for method, program in named.items()}


def _detached(program: ExportedProgram) -> ExportedProgram:
    """A copy whose graph can be rewritten freely; constant tensors are shared, not copied."""
    module = copy.deepcopy(program.graph_module)
    # deepcopy renames a node whose name shadows a builtin (a user input ``input`` becomes
    # ``input_1``), which the signature does not: the copy keeps the original names.
    for original, copied in zip(program.graph.nodes, module.graph.nodes, strict=True):
        copied.name = original.name
    return ExportedProgram(
        root=module,
        graph=module.graph,
        graph_signature=copy.deepcopy(program.graph_signature),
        state_dict=dict(program.state_dict),
        range_constraints=copy.deepcopy(program.range_constraints),
        module_call_graph=copy.deepcopy(program.module_call_graph),
        constants=dict(program.constants),
        verifiers=[program.verifier],
        example_inputs=program.example_inputs,
    )


class ProgramManager:
    """Edge-dialect programs of a multi-method model; every lowering returns a new manager."""

    def __init__(
        self, edge: EdgeProgramManager, constant_methods: dict[str, Any] | None = None
    ) -> None:
        self._edge = edge
        self._constant_methods = constant_methods

    @property
    def edge_manager(self) -> EdgeProgramManager:
        """The upstream ``EdgeProgramManager`` this wraps (treat it as read-only)."""
        return self._edge

    @property
    def methods(self) -> list[str]:
        return sorted(self._edge.methods)

    def exported_program(self, method: str = "forward") -> ExportedProgram:
        """The edge-dialect program of ``method``."""
        program: ExportedProgram = self._edge.exported_program(method)
        return program

    def to_backend(
        self, request: BackendRequest, *, on_stage: StageCallback | None = None
    ) -> ProgramManager:
        """Lower methods to backends; the receiver is left unchanged.

        ``request`` is a Partitioner or a DelegationSpec (every method), or a mapping of
        method name to a Partitioner, a DelegationSpec or a list of partitioners tried in
        order. Methods absent from a mapping are kept as they are. Each backend id gets one
        ``preprocess_multimethod`` call covering every method that targets it.
        """
        return ProgramManager(lower(self._edge, request, on_stage), self._constant_methods)

    def to_executorch(
        self, config: ExecutorchBackendConfig | None = None, *, share_constants: bool = True
    ) -> ExecutorchProgramManager:
        """Emit the ExecuTorch program (``.buffer`` holds the ``.pte`` bytes).

        Upstream rewrites edge graphs in place while emitting, and managers share the
        programs of methods a ``to_backend`` left alone, so this emits from copies. With
        ``share_constants`` a weight that a delegate and a portable kernel both read is
        stored once (see :mod:`pteforge.manager.constant_sharing`). A constant segment of zero
        bytes gets one block of zeros, so the ``.pte`` loads from a file too.
        """
        copies = {m: _detached(self.exported_program(m)) for m in self.methods}
        edge = EdgeProgramManager(
            copies,
            copy.deepcopy(self._constant_methods),
            EdgeCompileConfig(_check_ir_validity=False),
        )
        emitted = edge.to_executorch(config)
        fill_empty_constant_segment(emitted, config)
        if share_constants:
            store_shared_once(emitted, config)
        return emitted

    def lowered_modules(self, method: str = "forward") -> list[LoweredBackendModule]:
        """The delegate modules of ``method`` (each has ``.buffer()``, and composes)."""
        return list(lowered_modules(self.exported_program(method)))

    def report(self) -> dict[str, Any]:
        """Per method operator delegation per backend; program constant bytes and sharing."""
        return program_report({m: self.exported_program(m) for m in self.methods})


def to_edge(
    programs: Programs,
    *,
    constant_methods: dict[str, Any] | None = None,
    compile_config: EdgeCompileConfig | None = None,
) -> ProgramManager:
    """Convert ``torch.export`` programs (one, as ``forward``, or method -> program) to edge."""
    named = _named(programs)
    try:
        edge = exir.to_edge(named, constant_methods, compile_config)
    except Exception as exc:
        raise ProgramInputError(f"to_edge failed: {type(exc).__name__}: {exc}") from exc
    return ProgramManager(edge, constant_methods)


def to_edge_transform_and_lower(
    programs: Programs,
    targets: Mapping[str, MethodTarget],
    *,
    on_stage: StageCallback | None = None,
    compile_config: EdgeCompileConfig | None = None,
    constant_methods: dict[str, Any] | None = None,
) -> ProgramManager:
    """``to_edge`` then ``to_backend(targets)``, keeping the ops partitioners ask to preserve;
    ``constant_methods`` are emitted with the program (as upstream's ``to_edge`` takes them).

    This is upstream ``to_edge_transform_and_lower`` with our per-method partitioners, so
    XNNPACK sees e.g. ``linear`` undecomposed, with the same one-call-per-backend guarantee.
    """
    named = _named(programs)
    job = LoweringJob(targets, sorted(named), on_stage)
    if on_stage is not None:
        on_stage("to_edge")
    edge = job.run(
        lambda partitioners: exir.to_edge_transform_and_lower(
            named,
            partitioner={m: [p] for m, p in partitioners.items()},
            compile_config=compile_config,
        ),
        lambda: _edge_programs_of(named, job.whole_graph, compile_config),
    )
    return ProgramManager(edge, constant_methods)


def _edge_programs_of(
    named: Mapping[str, ExportedProgram],
    methods: Iterable[str],
    compile_config: EdgeCompileConfig | None,
) -> dict[str, ExportedProgram]:
    """Edge programs of ``methods`` (whole-graph targets decompose like plain ``to_edge``)."""
    edge = exir.to_edge({m: named[m] for m in methods}, compile_config=compile_config)
    return {m: edge.exported_program(m) for m in edge.methods}
