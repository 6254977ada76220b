"""Prometheus metrics of the /v2 routes and the runtime pool, on a caller-owned registry."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from pteforge.runtime import RuntimePool
from pteforge.server.inference.statistics import PHASES, ModelStatistics

_PHASES = ("queue", "load", "execute")
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)


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


class _StatisticsCollector(Collector):
    """``pteforge_inference_phase_seconds{model,version,phase}`` and
    ``pteforge_inference_requests_total{model,version,outcome}`` from the model statistics,
    summed over projects (the labels never name a project)."""

    def __init__(self, statistics: ModelStatistics) -> None:
        self.statistics = statistics
        self.bounds = [floatToGoString(b) for b in statistics.bounds] + ["+Inf"]

    def collect(self) -> Iterator[Metric]:
        phases = HistogramMetricFamily(
            "pteforge_inference_phase_seconds",
            "Successful infer requests' time per phase (queue, compute_input, compute_infer,"
            " compute_output; see docs/usage.md), by model as addressed and version",
            labels=["model", "version", "phase"],
        )
        requests = CounterMetricFamily(
            "pteforge_inference_requests",
            "Infer requests of a resolved model by model, version and outcome (success, fail)",
            labels=["model", "version", "outcome"],
        )
        for (model, version), series in sorted(self.statistics.series().items()):
            requests.add_metric([model, version, "success"], series.success)
            requests.add_metric([model, version, "fail"], series.fail)
            for phase in PHASES:
                cumulative = accumulate(series.buckets[phase])
                buckets = list(zip(self.bounds, cumulative, strict=True))
                sum_s = series.ns[phase] / 1e9
                phases.add_metric([model, version, phase], buckets, sum_s)
        yield phases
        yield requests


class InferenceMetrics:
    """Request counters and latency histograms of the /v2 routes; the per-model phase
    histograms are read from ``statistics`` at scrape time."""

    def __init__(
        self, registry: CollectorRegistry, pool: RuntimePool, statistics: ModelStatistics
    ) -> None:
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
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        registry.register(_PoolCollector(pool))
        registry.register(_StatisticsCollector(statistics))
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
