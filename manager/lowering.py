"""Turn a ``to_backend`` request into one partitioner per method and run upstream once.

Also translates what upstream raises into manager errors that name the method, the backend
id and the first offending node.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias, TypeVar

from executorch.exir import EdgeProgramManager
from executorch.exir.backend.canonical_partitioners.all_node_partitioner import (
    AllNodePartitioner,
)
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner
from torch.export import ExportedProgram

from pteforge.backends import (
    register_lowering_backends,
    registered_backend_ids,
)
from pteforge.backends.errors import UnsupportedNodeError
from pteforge.backends.support import first_unsupported_node
from pteforge.contracts.et_errors import described
from pteforge.manager.errors import (
    LoweringError,
    ManagerError,
    UnknownBackendIdError,
    UnknownMethodError,
)
from pteforge.manager.partitioners import (
    MethodPartitioner,
    StageCallback,
    StageTracker,
    operator_name,
)

MethodTarget: TypeAlias = Partitioner | DelegationSpec | Sequence[Partitioner]
BackendRequest: TypeAlias = Partitioner | DelegationSpec | Mapping[str, MethodTarget]

# What XNNPACK-style preprocess errors say: "For <node>, call_function:<op> is not supported"
_NODE_IN_MESSAGE = re.compile(r"For (?P<node>[\w.]+), \w+:(?P<op>[\w.]+)")
_OPENVINO_NODE = re.compile(r"(?:operation |friendly_name ')(?P<node>\w+)/(?P<op>\w+\.\w+\.\w+)")
"""OpenVINO's frontend names a node it cannot convert by the FX node's name and target:
``conversion of operation aten_avg_pool2d_default/aten.avg_pool2d.default`` or
``friendly_name 'aten_avg_pool2d_default/aten.avg_pool2d.default/AvgPool'``."""
_BACKEND_NOT_FOUND = re.compile(r"Backend (?P<backend>\S+) was not found")
T = TypeVar("T")


def normalize_request(request: BackendRequest, methods: Sequence[str]) -> dict[str, MethodTarget]:
    """Map every targeted method to its target; unknown method names raise."""
    if isinstance(request, Partitioner | DelegationSpec):
        return dict.fromkeys(methods, request)
    if not isinstance(request, Mapping):
        raise TypeError(
            "to_backend takes a Partitioner, a DelegationSpec or a mapping of method to those, "
            f"not {type(request).__name__}"
        )
    for method in request:
        if method not in methods:
            raise UnknownMethodError(method, methods, field="to_backend")
    return dict(request)


def whole_graph_backends(targets: Mapping[str, MethodTarget]) -> dict[str, str]:
    """Method -> backend id, for the methods delegated whole-graph."""
    return {m: t.backend_id for m, t in targets.items() if isinstance(t, DelegationSpec)}


def check_backend_ids(whole_graph: Mapping[str, str]) -> None:
    """Raise ``UnknownBackendIdError`` for a DelegationSpec naming an unregistered backend."""
    if not whole_graph:
        return
    register_lowering_backends()
    known = registered_backend_ids()
    for method, backend_id in whole_graph.items():
        if backend_id not in known:
            raise UnknownBackendIdError(backend_id, known, method=method)


def method_partitioners(
    targets: Mapping[str, MethodTarget], tracker: StageTracker | None
) -> dict[str, MethodPartitioner]:
    """One partitioner per method, as upstream ``MethodProgramsPartitionerSpec`` needs."""
    built: dict[str, MethodPartitioner] = {}
    for method, target in targets.items():
        inner: list[Partitioner]
        if isinstance(target, DelegationSpec):
            inner = [AllNodePartitioner(target.backend_id, list(target.compile_specs))]
        elif isinstance(target, Partitioner):
            inner = [target]
        else:
            inner = list(target)
            if not all(isinstance(p, Partitioner) for p in inner):
                raise TypeError(f"method {method!r}: a list target must hold only Partitioners")
        built[method] = MethodPartitioner(method, inner, tracker)
    return built


class LoweringJob:
    """A validated ``to_backend`` request: per-method partitioners and error translation."""

    def __init__(
        self,
        request: BackendRequest,
        methods: Sequence[str],
        on_stage: StageCallback | None = None,
    ) -> None:
        self.methods = list(methods)
        self.targets = normalize_request(request, methods)
        self.whole_graph = whole_graph_backends(self.targets)
        check_backend_ids(self.whole_graph)
        self.tracker = StageTracker(on_stage, self.targets)
        self.partitioners = method_partitioners(self.targets, self.tracker)

    def run(
        self,
        upstream: Callable[[dict[str, Partitioner]], T],
        edge_programs: Callable[[], Mapping[str, ExportedProgram]],
    ) -> T:
        """Call ``upstream`` with the partitioners, translating what it raises.

        ``edge_programs`` gives the (unlowered) edge programs, needed only on failure to
        find the first node a whole-graph backend cannot take.
        """
        try:
            return upstream(dict(self.partitioners))
        except ManagerError:
            raise
        except Exception as exc:
            raise self.translate(exc, edge_programs) from exc

    def translate(
        self, exc: Exception, edge_programs: Callable[[], Mapping[str, ExportedProgram]]
    ) -> ManagerError:
        """Name the method, backend id, node and operator an upstream failure is about."""
        message = str(exc)
        missing = _BACKEND_NOT_FOUND.search(message)
        if isinstance(exc, NotImplementedError) and missing:
            return UnknownBackendIdError(missing["backend"], registered_backend_ids())
        if isinstance(exc, UnsupportedNodeError):  # a catalog partitioner named the node
            return self._at_node(exc.node, exc.operator, exc.reason)
        detail = described(exc)
        checked = self._first_unsupported(edge_programs, detail)
        if checked is not None:
            return checked
        return self._from_message(detail)

    def _first_unsupported(
        self, edge_programs: Callable[[], Mapping[str, ExportedProgram]], detail: str
    ) -> LoweringError | None:
        """Ask the backends layer which whole-graph method holds an unsupported node."""
        if not self.whole_graph:
            return None
        try:
            programs = edge_programs()
        except Exception:  # the program fails before any backend sees it (an operator torch
            return None  # refuses): _from_message reports the upstream error it raised
        for method, backend_id in self.whole_graph.items():
            node = first_unsupported_node(backend_id, programs[method])
            if node is not None:
                return LoweringError(
                    method=method,
                    backend_id=backend_id,
                    node=node.name,
                    operator=operator_name(node),
                    detail=detail,
                )
        return None

    def _from_message(self, detail: str) -> LoweringError:
        """Fallback when no support check applies: read the node from upstream's message."""
        found = _NODE_IN_MESSAGE.search(detail) or _OPENVINO_NODE.search(detail)
        if found is None:
            return self._at_node(None, None, detail)
        return self._at_node(found["node"], found["op"], detail)

    def _at_node(self, node: str | None, operator: str | None, detail: str) -> LoweringError:
        """The failure at ``node``, in the method that holds it (else the last partitioned);
        with no node and no method partitioned yet, no backend's (upstream's ``to_edge``)."""
        if node is None and not self.tracker.programs:
            only = self.methods[0] if len(self.methods) == 1 else None
            return LoweringError(
                method=only, backend_id=None, node=None, operator=None, detail=detail
            )
        method = self._method_with_node(node) if node else None
        if method is None and len(self.whole_graph) == 1:
            method = next(iter(self.whole_graph))
        if method is None and self.tracker.programs:
            method = next(reversed(self.tracker.programs))  # upstream lowers method by method
        return LoweringError(
            method=method,
            backend_id=self._backend_of(method),
            node=node,
            operator=operator,
            detail=detail,
        )

    def _backend_of(self, method: str | None) -> str:
        """The backend id(s) ``method`` was partitioned for, as its partitioners declare."""
        if method is None:
            whole = set(self.whole_graph.values())
            return whole.pop() if len(whole) == 1 else "(partitioner backend)"
        if method in self.whole_graph:
            return self.whole_graph[method]
        ids = [
            spec.backend_id
            for p in self.partitioners[method].partitioners
            if (spec := getattr(p, "delegation_spec", None)) is not None
        ]
        return ", ".join(dict.fromkeys(ids)) or "(partitioner backend)"

    def _method_with_node(self, node_name: str) -> str | None:
        """The partitioned method holding ``node_name``, whole-graph methods first."""
        seen = self.tracker.programs
        ordered = [*self.whole_graph, *(m for m in seen if m not in self.whole_graph)]
        for method in ordered:
            program = seen.get(method)
            if program and any(n.name == node_name for n in program.graph_module.graph.nodes):
                return method
        return None


def lower(
    edge: EdgeProgramManager,
    request: BackendRequest,
    on_stage: StageCallback | None = None,
) -> EdgeProgramManager:
    """Lower ``edge`` per ``request`` in exactly one upstream ``to_backend`` call."""
    job = LoweringJob(request, sorted(edge.methods), on_stage)
    if not job.targets:
        return edge
    return job.run(edge.to_backend, lambda: {m: edge.exported_program(m) for m in job.whole_graph})
