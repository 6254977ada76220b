"""A pool of runtime worker processes that run methods of ``.pte`` artifacts by sha256."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from pteforge.runtime.artifact_files import ArtifactFiles
from pteforge.runtime.checkout import Checkout
from pteforge.runtime.errors import (
    ERROR_KINDS,
    PoolClosedError,
    RuntimeLayerError,
    UnknownMethodError,
    WorkerCrashedError,
    WorkerTimeoutError,
)
from pteforge.runtime.lru import ByteLRU
from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.processes import WorkerProcess, process_context
from pteforge.runtime.wire import encode_message
from pteforge.runtime.worker import WorkerConfig

_SIGNATURES_KEPT = 4096
# Frames up to this size go into the pipe without waiting on the worker to read them.
_ASYNC_INLINE_FRAME_BYTES = 64 * 1024


class _Request:
    """One encoded request and the outcome of writing it to a worker.

    The frame is encoded up front: bad inputs fail before a worker is held. ``start`` is
    the hand-over callback (``Checkout``): it writes the frame the moment a worker is
    given, unless the frame is over ``inline_limit`` bytes, which the caller writes itself
    once it holds the worker (off the event loop, for asyncio callers).
    """

    def __init__(
        self, header: dict[str, Any], arrays: Sequence[np.ndarray], inline_limit: float
    ) -> None:
        self.frame = encode_message(header, arrays)
        self.inline = len(self.frame) <= inline_limit
        self.error: OSError | None = None

    def start(self, worker: WorkerProcess) -> None:
        if self.inline:
            self.error = worker.send(self.frame)


def _what(header: dict[str, Any]) -> str:
    return f"{header['op']} of artifact {header['sha256'][:12]}"


# Where an artifact comes from: a local file, or a callable that writes it to the given path.
ArtifactSource = Path | Callable[[Path], None]


@dataclass
class InferResult:
    """Outputs of one method call, with where the time went (milliseconds)."""

    outputs: list[np.ndarray]
    signature: MethodSignature
    timings: dict[str, float]
    cache_hit: bool
    profile: dict[str, Any] | None = None


@dataclass
class PoolStats:
    """Counters the pool keeps for metrics."""

    requests: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    worker_restarts: int = 0
    worker_crashes: int = 0
    worker_timeouts: int = 0
    weight_cache_enabled: bool = False


class RuntimePool:
    """Runs artifact methods in ``size`` isolated worker processes.

    Each worker caches loaded programs by sha256 (LRU bounded by ``cache_bytes`` of
    ``.pte`` files). Artifacts are materialised once into ``artifact_dir`` (at most
    ``disk_cache_bytes`` of them, least recently used deleted first; None: unbounded) and
    loaded by path, so ExecuTorch maps the file instead of copying it; a worker checks the
    file's sha256 before loading it. A worker that crashes or hangs is replaced; only the
    request it was serving fails. ``weight_cache_library`` (see ``native``) turns on
    XNNPACK's packed-weight cache so methods sharing weights share packed copies.
    Workers never fork from the caller: ``start_method`` is ``forkserver`` (a clean
    server process forks them) or ``spawn``.
    """

    def __init__(
        self,
        size: int | None,
        cache_bytes: int,
        artifact_dir: Path,
        *,
        threads_per_worker: int = 1,
        weight_cache_library: Path | None = None,
        request_timeout_s: float = 60.0,
        start_timeout_s: float = 120.0,
        start_method: str = "forkserver",
        disk_cache_bytes: int | None = None,
    ) -> None:
        self.size = size or os.cpu_count() or 1
        self.request_timeout_s = request_timeout_s
        self.start_timeout_s = start_timeout_s
        self.stats = PoolStats()
        self._config = WorkerConfig(
            cache_bytes,
            threads_per_worker,
            str(weight_cache_library) if weight_cache_library else None,
        )
        self._ctx = process_context(start_method)
        self._idle: Checkout[WorkerProcess] = Checkout()
        # One small entry per artifact run; bounded so a long-lived server doesn't grow.
        self._signatures: ByteLRU[str, dict[str, MethodSignature]] = ByteLRU(_SIGNATURES_KEPT)
        self._signatures_lock = threading.Lock()
        self.files = ArtifactFiles(artifact_dir, disk_cache_bytes)
        self._stats_lock = threading.Lock()
        self._live: set[WorkerProcess] = set()
        self._closed = False
        for worker in self._start_workers(self.size):
            self._idle.put(worker)

    # -- workers ---------------------------------------------------------------------------

    def _start_workers(self, count: int) -> list[WorkerProcess]:
        spawned = [WorkerProcess.spawn(self._ctx, self._config) for _ in range(count)]
        ready = [w.await_ready(self.start_timeout_s) for w in spawned]
        for worker in ready:
            self._live.add(worker)
            self.stats.weight_cache_enabled = bool(worker.info.get("weight_cache"))
        return ready

    def _count(self, **increments: int) -> None:
        with self._stats_lock:
            for name, amount in increments.items():
                setattr(self.stats, name, getattr(self.stats, name) + amount)

    def _replace_later(self, worker: WorkerProcess) -> None:
        self._live.discard(worker)
        worker.kill()
        self._count(worker_restarts=1)
        threading.Thread(target=self._replace, daemon=True, name="pteforge-respawn").start()

    def _replace(self) -> None:
        while not self._closed:
            try:
                worker = self._start_workers(1)[0]
            except RuntimeLayerError:
                time.sleep(1.0)  # back off before retrying a failed start
                continue
            if self._closed:
                worker.kill()
            self._idle.put(worker)
            return

    def _check_open(self) -> None:
        if self._closed:
            raise PoolClosedError("the runtime pool is shut down")

    def _acquired(self, worker: WorkerProcess | None) -> WorkerProcess:
        if worker is None:
            raise WorkerTimeoutError(
                f"no runtime worker became free within {self.request_timeout_s:.0f}s"
            )
        return worker

    def _call(
        self, header: dict[str, Any], arrays: Sequence[np.ndarray], what: str
    ) -> tuple[dict[str, Any], list[np.ndarray], float]:
        self._check_open()
        queued = time.perf_counter()
        request = _Request(header, arrays, inline_limit=float("inf"))
        worker = self._acquired(self._idle.get(self.request_timeout_s, request.start))
        queue_ms = (time.perf_counter() - queued) * 1e3
        try:
            if request.error is not None:
                raise request.error
            reply, outputs = worker.reply(self.request_timeout_s)
        except BaseException as exc:
            self._raise_failed(worker, exc, what)
        self._idle.put(worker)
        return reply, outputs, queue_ms

    async def _call_async(
        self, header: dict[str, Any], arrays: Sequence[np.ndarray], what: str
    ) -> tuple[dict[str, Any], list[np.ndarray], float]:
        self._check_open()
        queued = time.perf_counter()
        request = _Request(header, arrays, inline_limit=_ASYNC_INLINE_FRAME_BYTES)
        worker = self._acquired(await self._idle.get_async(self.request_timeout_s, request.start))
        queue_ms = (time.perf_counter() - queued) * 1e3
        try:
            if not request.inline:  # the worker drains a big frame at its own pace
                request.error = await asyncio.to_thread(worker.send, request.frame)
            if request.error is not None:
                raise request.error
            reply, outputs = await worker.reply_async(self.request_timeout_s)
        except (EOFError, OSError) as exc:
            # Crash handling waits for the process to exit: not on the event loop.
            await asyncio.to_thread(self._raise_failed, worker, exc, what)
        except BaseException as exc:
            self._raise_failed(worker, exc, what)
        self._idle.put(worker)
        return reply, outputs, queue_ms

    def _raise_failed(self, worker: WorkerProcess, exc: BaseException, what: str) -> NoReturn:
        error = self._failed(worker, exc, what)
        if error is exc:
            raise exc
        raise error from (None if isinstance(exc, TimeoutError) else exc)

    def _failed(self, worker: WorkerProcess, exc: BaseException, what: str) -> BaseException:
        """Replace ``worker`` after ``exc`` interrupted its exchange; the error to raise."""
        if isinstance(exc, TimeoutError):
            self._count(worker_timeouts=1)
            self._replace_later(worker)
            return WorkerTimeoutError(
                f"{what} did not finish within {self.request_timeout_s:.0f}s; "
                "the runtime worker was stopped and replaced"
            )
        if isinstance(exc, EOFError | OSError):
            if self._closed:
                return PoolClosedError("the runtime pool was shut down mid-request")
            self._count(worker_crashes=1)
            worker.process.join(timeout=5)
            code = worker.process.exitcode
            self._replace_later(worker)
            return WorkerCrashedError(
                f"the runtime worker crashed (exit code {code}) during {what}; "
                "it has been replaced, other requests are unaffected"
            )
        self._replace_later(worker)  # the conversation may be out of step: start afresh
        return exc

    # -- artifacts -------------------------------------------------------------------------

    def local_path(self, sha256: str, source: ArtifactSource) -> Path:
        """The local file for ``sha256``, materialising it from ``source`` if needed."""
        if isinstance(source, Path):
            return source
        return self.files.ensure(sha256, source)

    def _request(
        self, header: dict[str, Any], arrays: Sequence[np.ndarray], source: ArtifactSource
    ) -> tuple[dict[str, Any], list[np.ndarray], float]:
        path = self.local_path(header["sha256"], source)
        header = dict(header, path=str(path))
        reply, outputs, queue_ms = self._call(header, arrays, _what(header))
        return self._checked(reply, path, source), outputs, queue_ms

    def _checked(self, reply: dict[str, Any], path: Path, source: ArtifactSource) -> dict[str, Any]:
        """``reply`` if the worker succeeded, else its error raised as a runtime-layer error."""
        if reply.get("ok"):
            return reply
        kind = str(reply.get("kind"))
        if kind == "integrity" and not isinstance(source, Path):
            self.files.drop(path.stem)  # a corrupt cached copy is fetched again next time
        raise ERROR_KINDS.get(kind, RuntimeLayerError)(str(reply.get("message")))

    # -- public API ------------------------------------------------------------------------

    def describe(self, sha256: str, source: ArtifactSource) -> dict[str, MethodSignature]:
        """Signatures of every method of the artifact, read in a worker (safe for uploads)."""
        with self._signatures_lock:
            cached = self._signatures.get(sha256)
        if cached is not None:
            return cached
        reply, _, _ = self._request({"op": "describe", "sha256": sha256}, [], source)
        signatures = {
            name: MethodSignature.from_json(data) for name, data in reply["methods"].items()
        }
        with self._signatures_lock:
            self._signatures.put(sha256, signatures, 1)
        return signatures

    def method_metadata(self, sha256: str, method: str, source: ArtifactSource) -> MethodSignature:
        """The signature of one method; raises ``UnknownMethodError`` if there is none."""
        signatures = self.describe(sha256, source)
        if method not in signatures:
            known = ", ".join(sorted(signatures))
            raise UnknownMethodError(f"the artifact has no method {method!r} (methods: {known})")
        return signatures[method]

    async def method_metadata_async(
        self, sha256: str, method: str, source: ArtifactSource
    ) -> MethodSignature:
        """``method_metadata`` for an asyncio caller: answered from memory once the artifact
        has been described, otherwise described in a thread."""
        with self._signatures_lock:
            known = sha256 in self._signatures
        if not known:
            await asyncio.to_thread(self.describe, sha256, source)
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
        """Run ``method`` of artifact ``sha256`` on positional numpy ``inputs``."""
        start = time.perf_counter()
        signature = self.method_metadata(sha256, method, source)
        header = {"op": "infer", "sha256": sha256, "method": method, "profile": profile}
        reply, outputs, queue_ms = self._request(header, inputs, source)
        return self._result(reply, outputs, signature, queue_ms, start)

    def _result(
        self,
        reply: dict[str, Any],
        outputs: list[np.ndarray],
        signature: MethodSignature,
        queue_ms: float,
        start: float,
    ) -> InferResult:
        hit = bool(reply.get("hit"))
        self._count(requests=1, cache_hits=int(hit), cache_misses=int(not hit))
        timings = {"queue_ms": queue_ms, **reply["timings"]}
        timings["total_ms"] = (time.perf_counter() - start) * 1e3
        return InferResult(outputs, signature, timings, hit, reply.get("profile"))

    async def infer_async(
        self,
        sha256: str,
        method: str,
        inputs: Sequence[np.ndarray],
        source: ArtifactSource,
        *,
        profile: bool = False,
    ) -> InferResult:
        """``infer`` for an asyncio caller: no thread is blocked while the worker runs.

        Once the artifact is described and its file is local (after its first request),
        everything happens on the event loop; before that, the blocking preparation (writing
        the file, describing it) runs in a thread.
        """
        start = time.perf_counter()
        signature = await self.method_metadata_async(sha256, method, source)
        if isinstance(source, Path):
            path = source
        elif self.files.touch(sha256):
            path = self.files.path(sha256)
        else:  # evicted, or a corrupt copy was dropped: fetch it again
            path = await asyncio.to_thread(self.local_path, sha256, source)
        header = {"op": "infer", "sha256": sha256, "method": method, "profile": profile}
        header["path"] = str(path)
        reply, outputs, queue_ms = await self._call_async(header, inputs, _what(header))
        return self._result(self._checked(reply, path, source), outputs, signature, queue_ms, start)

    @property
    def ready(self) -> bool:
        """True while the pool is open and at least one worker is running."""
        return not self._closed and any(w.process.is_alive() for w in list(self._live))

    def close(self) -> None:
        """Stop every worker; later calls raise ``PoolClosedError``."""
        self._closed = True
        for worker in list(self._live):
            self._live.discard(worker)
            worker.kill()

    def __enter__(self) -> RuntimePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
