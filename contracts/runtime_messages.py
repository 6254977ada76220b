"""The messages between the runtime pool and a runtime worker process.

A message travels in one frame (``pteforge.runtime.wire``): a JSON header holding the
message and the dtype and shape of each tensor, then the tensors' raw bytes. Requests are
discriminated on ``op``, replies on ``kind``. Both ends parse with :data:`WORKER_REQUEST`
or :data:`WORKER_REPLY`, so nothing untyped crosses the boundary and an unexpected key is
refused rather than ignored (never pickles: a worker reads untrusted programs).

The pool sends :class:`DescribeRequest`, :class:`InferRequest` or :class:`DropRequest`; the
worker answers each with its reply (:class:`DescribeReply`, :class:`InferReply`,
:class:`DropReply`) or an :class:`ErrorReply`. A worker's first message, unasked, is a
:class:`ReadyReply` (or the :class:`ErrorReply` of why it cannot start).

A :class:`GenerateRequest` is answered by a stream of :class:`GeneratedReply` s, the last
one carrying a finish reason (or an :class:`ErrorReply`). The pool may interrupt it with a
:class:`CancelRequest`; the worker stops and answers :class:`CancelledReply` (also when
the cancel arrives after the stream ended: the pool reads up to that reply).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter
from pydantic.dataclasses import dataclass

from pteforge.contracts.generation import GenerationEvent, GenerationRequest
from pteforge.contracts.json_types import Contract
from pteforge.contracts.specs import MethodSignature

_STATE_CONFIG = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_STATE_CONFIG)
class MethodState:
    """The mutable buffers of one method: those it can name, and how many it cannot; and
    the bytes its memory plan needs (activations and mutable buffers)."""

    buffers: tuple[str, ...] = ()
    unnamed: int = 0
    planned_bytes: int = 0

    @property
    def stateful(self) -> bool:
        """Whether the method keeps state between calls."""
        return bool(self.buffers) or self.unnamed > 0

    @property
    def resettable(self) -> bool:
        """Every buffer is named, so the method can be reset in place (``get_attribute``)."""
        return self.unnamed == 0


STATELESS = MethodState()
"""The state of a method that keeps none."""


def planned_bytes(plan: Any) -> int:
    """The bytes one ``executorch.exir.schema.ExecutionPlan`` plans when its method is
    loaded: its memory arenas (``non_const_buffer_sizes``; id 0 is reserved), which hold
    activations and mutable buffers. ExecuTorch plans a dynamic dimension for its max."""
    return sum(int(size) for size in plan.non_const_buffer_sizes[1:])


@dataclass(frozen=True, config=_STATE_CONFIG)
class ProgramState:
    """Per method, what state it keeps; and the bytes one loaded copy of the program plans."""

    methods: dict[str, MethodState]
    planned_bytes: int = 0

    @property
    def stateful(self) -> bool:
        """Whether any method keeps state between calls."""
        return any(m.stateful for m in self.methods.values())

    def method(self, name: str) -> MethodState:
        """The state of method ``name`` (``STATELESS`` if unknown)."""
        return self.methods.get(name, STATELESS)

    def largest_plan(self) -> str:
        """Which method plans the most memory and how much, for a message about
        ``planned_bytes``; empty when no method plans any."""
        if not self.methods:
            return ""
        name, state = max(self.methods.items(), key=lambda item: item[1].planned_bytes)
        if state.planned_bytes <= 0:
            return ""
        return (
            f"method {name!r} plans {state.planned_bytes / 2**20:.1f} MiB (ExecuTorch plans "
            "a dynamic dimension for its max: export with a smaller Dim max to need less)"
        )


# -- pool to worker ----------------------------------------------------------------------


class DescribeRequest(Contract):
    """Load (verifying its sha256) the program at ``path`` and describe its methods."""

    op: Literal["describe"] = "describe"
    sha256: str
    path: str


class InferRequest(Contract):
    """Run ``method`` of the program on the frame's tensors.

    Without ``session`` the method starts from the program's initial state. With it, the
    method runs on the instance that session owns in this worker: opened by the request
    that says ``open``, dropped after the one that says ``close``.
    """

    op: Literal["infer"] = "infer"
    sha256: str
    path: str
    method: str
    profile: bool = False
    session: int | None = None
    open: bool = False
    close: bool = False


class DropRequest(Contract):
    """Free the instances of the sessions ``drop`` (ended or expired in the pool)."""

    op: Literal["drop"] = "drop"
    drop: tuple[int, ...]


class BlobFile(Contract):
    """A file the worker reads besides the program (a tokenizer): verified by sha256."""

    sha256: str
    path: str


class GenerateRequest(Contract):
    """Generate text with ``method`` (``forward(tokens, input_pos)``) of the program, the
    tokenizer and its optional config; ``session``, ``open``, ``close`` as for infer."""

    op: Literal["generate"] = "generate"
    sha256: str
    path: str
    method: str = "forward"
    tokenizer: BlobFile
    tokenizer_config: BlobFile | None = None
    request: GenerationRequest
    session: int | None = None
    open: bool = False
    close: bool = False
    seconds: float | None = None  # the longest the generation may hold the worker


class CancelRequest(Contract):
    """Stop the generation under way (if any) and answer :class:`CancelledReply`."""

    op: Literal["cancel"] = "cancel"


WorkerRequest = Annotated[
    DescribeRequest | InferRequest | DropRequest | GenerateRequest | CancelRequest,
    Field(discriminator="op"),
]
"""Any message the pool sends a worker."""


# -- worker to pool ----------------------------------------------------------------------


class ReadyReply(Contract):
    """A worker's first message: it has loaded ExecuTorch and serves requests."""

    kind: Literal["ready"] = "ready"
    weight_cache: bool


class DescribeReply(Contract):
    """The methods' signatures and state; ``hit``: the program was already loaded."""

    kind: Literal["described"] = "described"
    methods: dict[str, MethodSignature]
    state: ProgramState
    hit: bool


class ProfileEvent(Contract):
    """One timed event of a profiled run: an operator, a delegate call or a delegate's event."""

    name: str | None = None
    instruction: int | None = None
    us: float


class Profile(Contract):
    """Per-operator, per-delegate-call and per-delegate-event times (µs) of a profiled run."""

    operators: tuple[ProfileEvent, ...] = ()
    delegate_calls: tuple[ProfileEvent, ...] = ()
    delegates: tuple[ProfileEvent, ...] = ()


class InferReply(Contract):
    """The method ran: its outputs are the frame's tensors. ``load_ms``: getting the
    program and method ready (``hit``: the program was already loaded); ``execute_ms``:
    running it; ``threads``: the XNNPACK threads it ran with."""

    kind: Literal["inferred"] = "inferred"
    load_ms: float
    execute_ms: float
    hit: bool
    profile: Profile | None = None
    threads: int = 1


class DropReply(Contract):
    """The sessions were freed."""

    kind: Literal["dropped"] = "dropped"


class GeneratedReply(Contract):
    """One event of a generation; the last one has ``event.finish_reason``."""

    kind: Literal["generated"] = "generated"
    event: GenerationEvent


class CancelledReply(Contract):
    """The generation was stopped (or had already ended) on a :class:`CancelRequest`."""

    kind: Literal["cancelled"] = "cancelled"


WorkerErrorKind = Literal[
    "integrity",
    "load",
    "unknown_method",
    "invalid_input",
    "execution",
    "session",
    "protocol",
    "context_length",
    "tokenizer",
    "not_a_language_model",
]
"""What failed, as the worker names it; the pool raises the matching runtime-layer error."""


class ErrorReply(Contract):
    """The request (or the worker's start) failed; ``error`` says how."""

    kind: Literal["error"] = "error"
    error: WorkerErrorKind
    message: str


WorkerReply = Annotated[
    ReadyReply
    | DescribeReply
    | InferReply
    | DropReply
    | GeneratedReply
    | CancelledReply
    | ErrorReply,
    Field(discriminator="kind"),
]
"""Any message a worker sends the pool."""


WORKER_REQUEST: TypeAdapter[WorkerRequest] = TypeAdapter(WorkerRequest)
"""Parses (``validate_python``) :data:`WorkerRequest`, in a worker."""

WORKER_REPLY: TypeAdapter[WorkerReply] = TypeAdapter(WorkerReply)
"""Parses (``validate_python``) :data:`WorkerReply`, in the pool."""
