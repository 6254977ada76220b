"""Prometheus metrics of the /v2 routes and the runtime pool, on a caller-owned registry."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pteforge.runtime import RuntimePool
from pteforge.server.inference.statistics import PHASES, PhaseTimes, StatsKey

_PHASES = ("queue", "load", "execute")
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)


class _PoolCollector(Collector):
    """Reads the pool's counters at scrape time."""

    def __init__(self, pool: RuntimePool) -> None:
        self.pool = pool

    def collect(self) -> Iterator[Metric]:
        stats = self.pool.stats
        counters = (
            ("cache_hits", "Infers served by an already loaded program", stats.cache_hits),
            ("cache_misses", "Infers that loaded the program first", stats.cache_misses),
            ("worker_restarts", "Runtime workers replaced", stats.worker_restarts),
            ("worker_crashes", "Runtime workers that died mid-request", stats.worker_crashes),
            ("worker_timeouts", "Runtime workers killed for hanging", stats.worker_timeouts),
        )
        for name, doc, value in counters:
            yield CounterMetricFamily(f"pteforge_runtime_{name}", doc, value=value)
        yield GaugeMetricFamily("pteforge_runtime_workers", "Pool size", value=self.pool.size)
        sessions = self.pool.sessions
        yield GaugeMetricFamily(
            "pteforge_runtime_sessions", "Open /v2 sessions (sequences)", value=len(sessions)
        )
        yield GaugeMetricFamily(
            "pteforge_runtime_session_bytes",
            "Planned memory the open sessions hold",
            value=sessions.total_bytes,
        )
        yield GaugeMetricFamily(
            "pteforge_runtime_xnnpack_weight_cache",
            "1 when XNNPACK's packed-weight cache is on in the workers",
            value=int(stats.weight_cache_enabled),
        )


class InferenceMetrics:
    """Request counters and latency histograms of the /v2 routes."""

    def __init__(self, registry: CollectorRegistry, pool: RuntimePool) -> None:
        self.registry = registry
        self.requests = Counter(
            "pteforge_v2_requests",
            "Requests to /v2 routes by route and status code",
            ["route", "code"],
            registry=registry,
        )
        self.latency = Histogram(
            "pteforge_v2_infer_seconds",
            "Infer latency by phase (total = HTTP handler, others from the pool)",
            ["phase"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.phases = Histogram(
            "pteforge_inference_phase_seconds",
            "Successful infer requests' time per phase (queue, compute_input, compute_infer,"
            " compute_output; see docs/usage.md), by model as addressed and version",
            ["model", "version", "phase"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.outcomes = Counter(
            "pteforge_inference_requests",
            "Infer requests of a resolved model by model, version and outcome (success, fail)",
            ["model", "version", "outcome"],
            registry=registry,
        )
        registry.register(_PoolCollector(pool))
        # Label lookups take a lock and hash the labels: bind the hot ones once.
        self._total = self.latency.labels(phase="total")
        self._phases = [(f"{p}_ms", self.latency.labels(phase=p)) for p in _PHASES]
        self._counters: dict[tuple[str, int], Counter] = {}

    def observe_request(self, route: str, code: int) -> None:
        counter = self._counters.get((route, code))
        if counter is None:
            counter = self.requests.labels(route=route, code=str(code))
            self._counters[(route, code)] = counter
        counter.inc()

    def observe_timings(self, total_s: float, timings: dict[str, float]) -> None:
        self._total.observe(total_s)
        for key, histogram in self._phases:
            value = timings.get(key)
            if value is not None:
                histogram.observe(value / 1e3)

    def observe_phases(self, key: StatsKey, phases: PhaseTimes | None) -> None:
        """Count one infer request of ``key``'s model: a success with its ``phases``, or a
        failure (``None``). Labelled by model and version only, never by project."""
        outcome = "fail" if phases is None else "success"
        self.outcomes.labels(key.model, key.version, outcome).inc()
        if phases is not None:
            for name, seconds in zip(PHASES, phases, strict=True):
                self.phases.labels(key.model, key.version, name).observe(seconds)
