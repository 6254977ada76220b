"""A pool of runtime worker processes that run methods of ``.pte`` artifacts by sha256."""

from __future__ import annotations

import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.runtime.errors import (
    ERROR_KINDS,
    PoolClosedError,
    RuntimeLayerError,
    UnknownMethodError,
    WorkerCrashedError,
    WorkerTimeoutError,
)
from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.processes import WorkerProcess, process_context
from pteforge.runtime.worker import WorkerConfig

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
    ``.pte`` files). Artifacts are materialised once into ``artifact_dir`` and loaded by
    path, so ExecuTorch maps the file instead of copying it; a worker checks the file's
    sha256 before loading it. A worker that crashes or hangs is replaced; only the
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
    ) -> None:
        self.size = size or os.cpu_count() or 1
        self.artifact_dir = artifact_dir
        self.request_timeout_s = request_timeout_s
        self.start_timeout_s = start_timeout_s
        self.stats = PoolStats()
        self._config = WorkerConfig(
            cache_bytes,
            threads_per_worker,
            str(weight_cache_library) if weight_cache_library else None,
        )
        self._ctx = process_context(start_method)
        self._idle: queue.Queue[WorkerProcess] = queue.Queue()
        self._signatures: dict[str, dict[str, MethodSignature]] = {}
        self._files_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._live: set[WorkerProcess] = set()
        self._closed = False
        artifact_dir.mkdir(parents=True, exist_ok=True)
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

    def _acquire(self) -> WorkerProcess:
        if self._closed:
            raise PoolClosedError("the runtime pool is shut down")
        try:
            return self._idle.get(timeout=self.request_timeout_s)
        except queue.Empty:
            raise WorkerTimeoutError(
                f"no runtime worker became free within {self.request_timeout_s:.0f}s"
            ) from None

    def _call(
        self, header: dict[str, Any], arrays: Sequence[np.ndarray], what: str
    ) -> tuple[dict[str, Any], list[np.ndarray], float]:
        queued = time.perf_counter()
        worker = self._acquire()
        queue_ms = (time.perf_counter() - queued) * 1e3
        try:
            reply, outputs = worker.call(header, arrays, self.request_timeout_s)
        except TimeoutError:
            self._count(worker_timeouts=1)
            self._replace_later(worker)
            raise WorkerTimeoutError(
                f"{what} did not finish within {self.request_timeout_s:.0f}s; "
                "the runtime worker was stopped and replaced"
            ) from None
        except (EOFError, OSError) as exc:
            if self._closed:
                raise PoolClosedError("the runtime pool was shut down mid-request") from exc
            self._count(worker_crashes=1)
            worker.process.join(timeout=5)
            code = worker.process.exitcode
            self._replace_later(worker)
            raise WorkerCrashedError(
                f"the runtime worker crashed (exit code {code}) during {what}; "
                "it has been replaced, other requests are unaffected"
            ) from exc
        except BaseException:
            self._replace_later(worker)  # the conversation may be out of step: start afresh
            raise
        self._idle.put(worker)
        return reply, outputs, queue_ms

    # -- artifacts -------------------------------------------------------------------------

    def local_path(self, sha256: str, source: ArtifactSource) -> Path:
        """The local file for ``sha256``, materialising it from ``source`` if needed."""
        if isinstance(source, Path):
            return source
        target = self.artifact_dir / f"{sha256}.pte"
        with self._files_lock:
            if not target.exists():
                fd, tmp = tempfile.mkstemp(suffix=".part", dir=self.artifact_dir)
                os.close(fd)
                try:
                    source(Path(tmp))
                    os.replace(tmp, target)
                finally:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
        return target

    def _request(
        self, header: dict[str, Any], arrays: Sequence[np.ndarray], source: ArtifactSource
    ) -> tuple[dict[str, Any], list[np.ndarray], float]:
        path = self.local_path(header["sha256"], source)
        header = dict(header, path=str(path))
        what = f"{header['op']} of artifact {header['sha256'][:12]}"
        reply, outputs, queue_ms = self._call(header, arrays, what)
        if reply.get("ok"):
            return reply, outputs, queue_ms
        kind = str(reply.get("kind"))
        if kind == "integrity" and not isinstance(source, Path):
            path.unlink(missing_ok=True)  # a corrupt cached copy is fetched again next time
        raise ERROR_KINDS.get(kind, RuntimeLayerError)(str(reply.get("message")))

    # -- public API ------------------------------------------------------------------------

    def describe(self, sha256: str, source: ArtifactSource) -> dict[str, MethodSignature]:
        """Signatures of every method of the artifact, read in a worker (safe for uploads)."""
        cached = self._signatures.get(sha256)
        if cached is not None:
            return cached
        reply, _, _ = self._request({"op": "describe", "sha256": sha256}, [], source)
        signatures = {
            name: MethodSignature.from_json(data) for name, data in reply["methods"].items()
        }
        self._signatures[sha256] = signatures
        return signatures

    def method_metadata(self, sha256: str, method: str, source: ArtifactSource) -> MethodSignature:
        """The signature of one method; raises ``UnknownMethodError`` if there is none."""
        signatures = self.describe(sha256, source)
        if method not in signatures:
            known = ", ".join(sorted(signatures))
            raise UnknownMethodError(f"the artifact has no method {method!r} (methods: {known})")
        return signatures[method]

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
        hit = bool(reply.get("hit"))
        self._count(requests=1, cache_hits=int(hit), cache_misses=int(not hit))
        timings = {"queue_ms": queue_ms, **reply["timings"]}
        timings["total_ms"] = (time.perf_counter() - start) * 1e3
        return InferResult(outputs, signature, timings, hit, reply.get("profile"))

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
