"""Per-model infer statistics: the protocol's statistics extension (``/v2/models/{model}/stats``,
Triton's shape), kept in memory per (project, model as addressed, version).

Each infer request that got as far as a resolved model counts once, in ``success`` or
``fail``, with the whole request's duration (from the start of decoding to the end of
encoding). A successful request also adds to each of the four phases:

- ``queue``: waiting in the runtime pool for a free worker (the pool's ``queue_ms``);
- ``compute_input``: decoding the request body into tensors, plus the pool's own work
  around the run that is neither waiting nor executing: sending the input tensors to the
  worker, the worker finding the loaded program (loading it on a cache miss) and checking
  the inputs, and the output tensors coming back (the pool times that round trip as one);
- ``compute_infer``: the worker executing the method (the runtime's ``execute_ms``);
- ``compute_output``: encoding the outputs into the response body.

The same phases go to Prometheus as histograms labelled by model and version, summed over
projects (``metrics``, read from here at scrape time); every frontend (HTTP, gRPC)
records through ``work.run_decoded``.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

PHASES = ("queue", "compute_input", "compute_infer", "compute_output")
LATEST = "latest"
"""The version recorded for an artifact id addressed without ``/versions/{v}`` (a model name
counts under the version it resolved to)."""
MAX_VERSIONS = 64
OTHER = "other"
"""The version a model's requests count under once ``MAX_VERSIONS`` versions of it have
counted (an artifact id ignores the version a caller names, so without a bound a caller
could grow the statistics and the Prometheus series without end)."""
MAX_SERIES = 1024
"""The (model, version) series one project keeps: past it, the one counted longest ago is
forgotten. Series outlived their models: uploading an artifact, running it once and deleting
it, over and over, grew the server's memory and ``/metrics`` without end (300 rounds: 2.8 MB
of ``/metrics``, 9.5 KB a series), while the project stored nothing."""


class StatsKey(NamedTuple):
    """Whose statistics: the caller's project, the model as addressed, the version."""

    project_id: str
    model: str
    version: str


def version_label(version: str | None) -> str:
    """The version a request counts under: a pinned number, else ``LATEST`` (a version
    that is not a number only ever reaches an artifact id, which ignores it)."""
    return version if version is not None and version.isdigit() else LATEST


def counted_version(version: str | None, resolved: int | None) -> str:
    """The version a request counts under: the model version the model name ``resolved`` to
    (the one named, however written: ``01`` is version 1, or its latest when the request
    came), else ``version`` as named (``version_label``: an artifact id ignores it)."""
    if resolved is not None:
        return str(resolved)
    return version_label(version)


class PhaseTimes(NamedTuple):
    """Seconds one successful request spent in each phase (see the module docstring)."""

    queue: float
    compute_input: float
    compute_infer: float
    compute_output: float


def phase_times(
    timings: dict[str, float], decode_s: float, pool_s: float, encode_s: float
) -> PhaseTimes:
    """The phases of a request from the pool's ``timings`` (milliseconds) and what the
    frontend measured: decoding, the whole pool call, encoding (seconds)."""
    # The pool's timings come from its own clock: clamped to the round trip measured
    # here, so that the phases never add up to more than the request took.
    queue = min(timings.get("queue_ms", 0.0) / 1e3, pool_s)
    execute = min(timings.get("execute_ms", 0.0) / 1e3, pool_s - queue)
    around = max(0.0, pool_s - queue - execute)
    return PhaseTimes(queue, decode_s + around, execute, encode_s)


@dataclass
class Duration:
    """A count and the nanoseconds it took, as the extension answers each phase."""

    count: int = 0
    ns: int = 0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.ns += int(seconds * 1e9)


@dataclass
class PhaseSeries:
    """A model version's requests summed over projects, for Prometheus: the success and
    fail counts, and per phase its total ns and its count in each bucket (not cumulative;
    the last one past the last bound)."""

    success: int = 0
    fail: int = 0
    ns: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    buckets: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class _Model:
    bucket_count: int
    success: Duration = field(default_factory=Duration)
    fail: Duration = field(default_factory=Duration)
    phases: dict[str, Duration] = field(default_factory=lambda: {p: Duration() for p in PHASES})
    buckets: dict[str, list[int]] = field(init=False)
    last_inference_ms: int = 0

    def __post_init__(self) -> None:
        self.buckets = {p: [0] * self.bucket_count for p in PHASES}

    def answer(self, key: StatsKey) -> dict[str, Any]:
        stats = {"success": self.success, "fail": self.fail, **self.phases}
        return {
            "name": key.model,
            "version": key.version,
            "last_inference": self.last_inference_ms,
            "inference_count": self.success.count,
            "execution_count": self.success.count,
            "inference_stats": {k: {"count": d.count, "ns": d.ns} for k, d in stats.items()},
            "batch_stats": [],
        }

    def add_to(self, series: PhaseSeries) -> None:
        series.success += self.success.count
        series.fail += self.fail.count
        for phase in PHASES:
            series.ns[phase] += self.phases[phase].ns
            mine = self.buckets[phase]
            summed = series.buckets.get(phase, [0] * len(mine))
            series.buckets[phase] = [a + b for a, b in zip(summed, mine, strict=True)]


class ModelStatistics:
    """The statistics of one running server, by ``StatsKey``; safe from any thread.

    Each phase is also counted in the histogram buckets ``bounds`` (seconds, ascending),
    read by the ``/metrics`` collector at scrape time (``series``), so that a request is
    recorded once, under one lock, for both."""

    def __init__(self, bounds: Sequence[float] = ()) -> None:
        self.bounds = tuple(bounds)
        self._models: dict[StatsKey, _Model] = {}
        self._versions: dict[tuple[str, str], int] = {}
        self._recent: dict[str, OrderedDict[StatsKey, None]] = {}  # least recently counted first
        self._lock = threading.Lock()

    def _model(self, key: StatsKey) -> _Model:
        model = self._models.get(key)
        if model is None:
            pair = (key.project_id, key.model)
            if self._versions.get(pair, 0) >= MAX_VERSIONS:
                key = key._replace(version=OTHER)
                model = self._models.get(key)
            if model is None:
                self._versions[pair] = self._versions.get(pair, 0) + 1
                model = self._models[key] = _Model(len(self.bounds) + 1)
        recent = self._recent.setdefault(key.project_id, OrderedDict())
        recent[key] = None
        recent.move_to_end(key)
        if len(recent) > MAX_SERIES:
            self._forget(recent.popitem(last=False)[0])
        return model

    def _forget(self, key: StatsKey) -> None:
        del self._models[key]
        pair = (key.project_id, key.model)
        self._versions[pair] -= 1
        if not self._versions[pair]:
            del self._versions[pair]

    def count(self, key: StatsKey, total_s: float, phases: PhaseTimes | None) -> None:
        """Count a request of ``total_s`` seconds: a success with its ``phases``, or a
        failure (``None``)."""
        with self._lock:
            model = self._model(key)
            if phases is None:
                model.fail.add(total_s)
                return
            model.success.add(total_s)
            for name, seconds in zip(PHASES, phases, strict=True):
                model.phases[name].add(seconds)
                model.buckets[name][bisect_left(self.bounds, seconds)] += 1
            model.last_inference_ms = int(time.time() * 1e3)

    def series(self) -> dict[tuple[str, str], PhaseSeries]:
        """Every model version's requests by (model, version), summed over projects."""
        merged: dict[tuple[str, str], PhaseSeries] = {}
        with self._lock:
            for key, model in self._models.items():
                model.add_to(merged.setdefault((key.model, key.version), PhaseSeries()))
        return merged

    def answer(
        self,
        project_id: str,
        model: str | None = None,
        version: str | None = None,
        resolved: int | None = None,
    ) -> dict[str, Any]:
        """``{"model_stats": [...]}`` of the project's models (or of ``model``, at
        ``version`` if given); a named model nothing has run yet answers zeros, under the
        version it would count under (``resolved``: see ``counted_version``)."""
        wanted = None if version is None else version_label(version)
        with self._lock:
            stats = [
                m.answer(k)
                for k, m in sorted(self._models.items())
                if k.project_id == project_id
                and (model is None or k.model == model)
                and (wanted is None or k.version == wanted)
            ]
        if model is not None and not stats:
            key = StatsKey(project_id, model, counted_version(version, resolved))
            stats = [_Model(0).answer(key)]
        return {"model_stats": stats}
