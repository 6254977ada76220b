"""A pool of runtime worker processes that run methods of ``.pte`` artifacts by sha256."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from pteforge.contracts.generation import GenerationEvent, GenerationRequest
from pteforge.contracts.runtime_messages import (
    DescribeReply,
    DescribeRequest,
    ErrorReply,
    InferReply,
    InferRequest,
    WorkerReply,
)
from pteforge.runtime.artifact_files import ArtifactFiles, ArtifactSource
from pteforge.runtime.checkout import DEFAULT_SCOPE
from pteforge.runtime.crash_budget import CrashBudget, CrashLimits
from pteforge.runtime.descriptions import Described, Descriptions
from pteforge.runtime.errors import ERROR_KINDS, RuntimeLayerError, UnknownMethodError
from pteforge.runtime.generation_calls import Blob, GenerationCalls, generate
from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.processes import WorkerProcess, process_context
from pteforge.runtime.session_calls import SessionCalls
from pteforge.runtime.sessions import Sequence as SequenceRef
from pteforge.runtime.sessions import SessionLimits, Sessions
from pteforge.runtime.stats import PoolStats
from pteforge.runtime.supervisor import RestartPolicy, Workers
from pteforge.runtime.threads import routes
from pteforge.runtime.worker import WorkerConfig
from pteforge.runtime.worker_calls import ASYNC_INLINE_FRAME_BYTES, Calls, Request

_WHOLE = float("inf")  # a blocking caller writes the whole frame in the hand-over, however big

_Expected = TypeVar("_Expected", DescribeReply, InferReply)


@dataclass
class InferResult:
    """Outputs of one method call, with where the time went (milliseconds)."""

    outputs: list[np.ndarray]
    signature: MethodSignature
    timings: dict[str, float]
    cache_hit: bool
    profile: dict[str, Any] | None = None
    threads: int = 1  # the XNNPACK threads the worker ran it with


class RuntimePool:
    """Runs artifact methods in ``size`` isolated worker processes.

    Each worker caches loaded programs by sha256 (LRU bounded by ``cache_bytes`` of
    ``.pte`` files). Artifacts are materialised once into ``artifact_dir`` (at most
    ``disk_cache_bytes`` of them, least recently used deleted first; None: unbounded) and
    loaded by path, so ExecuTorch maps the file instead of copying it; a worker checks the
    file's sha256 before loading it. A stateless request starts from the program's initial
    state; requests naming a ``Sequence`` share one program instance (``SessionCalls``).
    A worker that dies while idle is replaced before a request reaches it; a stateless
    request whose worker crashes is retried once on another, one holding no other project's
    sessions (``dispatch``, written once for
    blocking and asyncio callers); replacements back off and give up after
    ``restart_policy.attempts`` failures (``Workers``); waiters take turns by scope, and a
    scope whose requests crashed or hung ``crash_limits`` workers is refused a while
    (``CrashBudget``; None: no budget).
    ``weight_cache_library`` (see ``native``) turns on XNNPACK's packed-weight cache so
    methods sharing weights share packed copies. Workers never fork from the caller: a
    fork server started with a clean environment forks them, and each confines itself
    (:mod:`pteforge.children.confine`) before it loads anything.
    """

    def __init__(
        self,
        size: int | None,
        cache_bytes: int,
        artifact_dir: Path,
        *,
        threads_per_worker: int = 1,
        request_threads: int | None = 1,  # a lone request's; None: every core (threads)
        weight_cache_library: Path | None = None,
        request_timeout_s: float = 60.0,
        start_timeout_s: float = 120.0,
        disk_cache_bytes: int | None = None,
        restart_policy: RestartPolicy | None = None,
        session_limits: SessionLimits | None = None,
        crash_limits: CrashLimits | None = None,
    ) -> None:
        self.size = size or os.cpu_count() or 1
        self.stats = PoolStats()
        library = str(weight_cache_library) if weight_cache_library else None
        config = WorkerConfig(cache_bytes, threads_per_worker, library, (str(artifact_dir),))
        self.sessions = Sessions(session_limits or SessionLimits())
        self.files = ArtifactFiles(artifact_dir, disk_cache_bytes)  # before workers confine
        self.workers = Workers(
            self.size,
            process_context(),
            config,
            start_timeout_s=start_timeout_s,
            policy=restart_policy or RestartPolicy(),
            on_start=self._started,
            on_lost=self._lost,
        )
        budget = CrashBudget(crash_limits)
        self.calls = Calls(
            self.workers, self.stats.count, request_timeout_s, budget=budget, sessions=self.sessions
        )
        self.routes = routes(self.calls, config, request_threads, start_timeout_s, self._lost)
        self.session_calls = SessionCalls(self.calls, self.sessions)
        self.generation = GenerationCalls(self.calls, self.session_calls)
        self._described = Descriptions()

    @property
    def request_timeout_s(self) -> float:
        return self.calls.timeout_s

    @request_timeout_s.setter
    def request_timeout_s(self, value: float) -> None:
        self.routes.set_timeout(value)

    def _started(self, worker: WorkerProcess) -> None:
        self.stats.weight_cache_enabled = worker.info is not None and worker.info.weight_cache

    def _lost(self, worker: WorkerProcess, reason: str) -> None:
        self.stats.count(worker_restarts=1)
        self.sessions.end_on_worker(worker, reason)

    # -- artifacts -------------------------------------------------------------------------

    def _checked(self, reply: WorkerReply, expected: type[_Expected], path: Path) -> _Expected:
        """``reply`` if the worker succeeded, else its error raised as a runtime-layer error."""
        if isinstance(reply, expected):
            return reply
        if not isinstance(reply, ErrorReply):
            raise RuntimeLayerError(f"a runtime worker answered {reply.kind!r} to a request")
        if reply.error == "integrity":
            self.files.drop(path.stem)  # a corrupt cached copy is fetched again next time
        raise ERROR_KINDS.get(reply.error, RuntimeLayerError)(reply.message)

    # -- public API ------------------------------------------------------------------------

    def described(
        self, sha256: str, source: ArtifactSource, scope: str = DEFAULT_SCOPE
    ) -> Described:
        """Signatures and state of the artifact, read in a worker (safe for uploads) in
        ``scope``'s turn (charged with the worker if reading it crashes one)."""
        cached = self._described.get(sha256)
        if cached is not None:
            return cached
        path = self.files.local(sha256, source)
        request = Request(DescribeRequest(sha256=sha256, path=str(path)), [], _WHOLE, scope)
        (reply, _), _ = self.calls.call(request)
        described = Described.from_reply(self._checked(reply, DescribeReply, path))
        self._described.put(sha256, described)
        return described

    def describe(
        self, sha256: str, source: ArtifactSource, scope: str = DEFAULT_SCOPE
    ) -> dict[str, MethodSignature]:
        """Signatures of every method of the artifact, read in a worker (safe for uploads)."""
        return self.described(sha256, source, scope).signatures

    def method_metadata(
        self, sha256: str, method: str, source: ArtifactSource, scope: str = DEFAULT_SCOPE
    ) -> MethodSignature:
        """The signature of one method; raises ``UnknownMethodError`` if there is none."""
        signatures = self.describe(sha256, source, scope)
        if method not in signatures:
            known = ", ".join(sorted(signatures))
            raise UnknownMethodError(f"the artifact has no method {method!r} (methods: {known})")
        return signatures[method]

    async def method_metadata_async(
        self, sha256: str, method: str, source: ArtifactSource, scope: str = DEFAULT_SCOPE
    ) -> MethodSignature:
        """``method_metadata`` for an asyncio caller: answered from memory once the artifact
        has been described, otherwise described in a thread."""
        if sha256 not in self._described:
            await asyncio.to_thread(self.describe, sha256, source, scope)
        return self.method_metadata(sha256, method, source)

    def infer(
        self,
        sha256: str,
        method: str,
        inputs: Sequence[np.ndarray],
        source: ArtifactSource,
        *,
        profile: bool = False,
    ) -> InferResult:
        """Run ``method`` of artifact ``sha256`` on positional numpy ``inputs`` (stateless)."""
        start = time.perf_counter()
        signature = self.method_metadata(sha256, method, source)
        path = self.files.local(sha256, source)
        request = Request(_infer_request(sha256, method, profile, path), inputs, _WHOLE)
        (reply, outputs), queue_ms = self.routes.stateless().call(request)
        checked = self._checked(reply, InferReply, path)
        return self._result(checked, outputs, signature, queue_ms, start)

    async def infer_async(
        self,
        sha256: str,
        method: str,
        inputs: Sequence[np.ndarray],
        source: ArtifactSource,
        *,
        profile: bool = False,
        sequence: SequenceRef | None = None,
        scope: str = "",
    ) -> InferResult:
        """``infer`` for an asyncio caller, waiting for a worker in ``scope``'s turn (its
        project: ``Checkout``); no thread is blocked while the worker runs. With ``sequence``
        it runs in that sequence's session (in its scope; started by ``sequence.start``,
        ended after answering by ``sequence.end``). Once the artifact is described and its
        file is local (after its first request), everything happens on the event loop;
        before that, the blocking preparation runs in a thread."""
        start = time.perf_counter()
        signature = await self.method_metadata_async(sha256, method, source, scope)
        path = await self.files.local_async(sha256, source)
        message = _infer_request(sha256, method, profile, path)
        if sequence is None:
            request = Request(message, inputs, ASYNC_INLINE_FRAME_BYTES, scope)
            (reply, outputs), queue_ms = await self.routes.stateless().call_async(request)
        else:
            state = self.described(sha256, source).state
            call = self.session_calls.call(message, inputs, sequence, state)
            (reply, outputs), queue_ms = await call
        checked = self._checked(reply, InferReply, path)
        return self._result(checked, outputs, signature, queue_ms, start)

    def _result(
        self,
        reply: InferReply,
        outputs: list[np.ndarray],
        signature: MethodSignature,
        queue_ms: float,
        start: float,
    ) -> InferResult:
        hit = reply.hit
        self.stats.count(requests=1, cache_hits=int(hit), cache_misses=int(not hit))
        timings = {
            "queue_ms": queue_ms,
            "load_ms": reply.load_ms,
            "execute_ms": reply.execute_ms,
            "total_ms": (time.perf_counter() - start) * 1e3,
        }
        profile = None if reply.profile is None else reply.profile.model_dump(exclude_none=True)
        return InferResult(outputs, signature, timings, hit, profile, reply.threads)

    def generate_async(
        self,
        sha256: str,
        source: ArtifactSource,
        request: GenerationRequest,
        *,
        tokenizer: Blob,
        tokenizer_config: Blob | None = None,
        method: str = "forward",
        scope: str = "",
    ) -> AsyncGenerator[GenerationEvent, None]:
        """Text from LM ``sha256`` and a tokenizer (``(sha256, source)``, with an optional
        ``tokenizer_config.json``), streamed (:mod:`pteforge.contracts.generation`; sessions
        among ``scope``'s). Closing the iterator early stops and frees the worker at once."""
        return generate(self, (sha256, source), request, tokenizer, tokenizer_config, method, scope)

    def sweep(self) -> None:
        """Periodic upkeep: replace dead idle workers, end expired sessions and free them."""
        self.routes.sweep()
        self.session_calls.sweep()

    @property
    def ready(self) -> bool:
        """True while the pool is open and at least one worker is running."""
        return self.workers.ready

    def close(self) -> None:
        """Stop every worker; later calls raise ``PoolClosedError``."""
        self.session_calls.close()
        self.routes.close()

    def __enter__(self) -> RuntimePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@functools.lru_cache(maxsize=256)
def _infer_request(sha256: str, method: str, profile: bool, path: Path) -> InferRequest:
    """The (frozen) message of a stateless call, built and validated once per method."""
    return InferRequest(sha256=sha256, method=method, profile=profile, path=str(path))
