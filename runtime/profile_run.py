"""A profile of one method of a ``.pte``: load times, latency samples, peak memory and
per-operator time, measured in the process that calls :func:`profile_program`.

Call it in a fresh, confined process (a compile worker's lowering child): the program is
untrusted, and the cold load is only cold in a process that never loaded it.

- ``load_ms.cold``: the first ``load_program`` plus ``load_method`` of the process;
  ``load_ms.warm``: both again, in the same process.
- ``latency_us``: wall time of each of ``iterations`` executions after one warm-up run, on
  the program loaded warm (no ETDump).
- ``peak_memory_bytes``: the growth of this process's resident set over the loads and runs,
  from its resident set just before them: the peak (``VmHWM``, reset first through
  ``/proc/self/clear_refs``) where the process may reset it; in a confined process, which
  may not write ``/proc``, the larger of the resident sets after the loads and after the
  runs (what stays allocated: weights, planned memory, delegate state; a transient peak
  inside one execution is not seen).
- ``operators``: the ETDump events of the program loaded cold, run after its own warm-up
  :func:`operator_runs` times (one run per 40 timed ones, 1 to ``OPERATOR_RUNS``), by
  :func:`pteforge.runtime.profiling.operator_times`: of those runs, the first whose events
  fit :func:`event_budget` (at least one; ``operator_runs`` says how many). Tracing adds
  about 2.5% to the timed runs, and reading the events back about as much: reading an
  event costs more than running it in a small method.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.children.limits import memory_figure, reset_memory_peak
from pteforge.contracts.jobs import LatencySummary, LoadTimes, ProfileReport
from pteforge.contracts.specs import MethodSignature
from pteforge.runtime.artifact_files import data_beside
from pteforge.runtime.errors import ExecutionError
from pteforge.runtime.instances import run_method
from pteforge.runtime.profiling import (
    delegate_backends,
    etdump_bytes,
    etdump_runs,
    is_operator_row_event,
    operator_times,
    summarize_runs,
)

OPERATOR_RUNS = 10
"""The most runs traced with ETDump for the operator rows."""
TRACED_EVERY = 40
"""One run traced with ETDump per this many timed runs (a traced run costs about a timed one)."""
READ_SHARE = 0.025
"""What reading the traced runs' events back may add to the timed runs' total time."""
READ_US_PER_EVENT = 12.0
"""About what reading one ETDump event back costs, in µs (measured for docs/benchmarks.md,
"Profile jobs": 10-12 µs of CPU an event, the events the rows do not use included)."""


def operator_runs(iterations: int) -> int:
    """How many runs a profile of ``iterations`` traces with ETDump, after a traced warm-up."""
    return max(1, min(OPERATOR_RUNS, iterations // TRACED_EVERY))


def event_budget(samples: list[float]) -> int:
    """How many ETDump events a profile reads back after its timed runs' ``samples`` (µs):
    as many as :data:`READ_SHARE` of their total time reads, at :data:`READ_US_PER_EVENT`."""
    return int(sum(samples) * READ_SHARE / READ_US_PER_EVENT)


def percentile(ordered: list[float], q: float) -> float:
    """The ``q``-quantile (0 to 1) of the sorted, non-empty ``ordered``, as NumPy's
    ``percentile`` (``method="linear"``) computes it, to the last bit."""
    at = (len(ordered) - 1) * q
    low = int(at)
    high, fraction = min(low + 1, len(ordered) - 1), at - low
    step = ordered[high] - ordered[low]
    return (
        ordered[high] - step * (1 - fraction) if fraction >= 0.5 else ordered[low] + step * fraction
    )


def latency_summary(samples: list[float]) -> LatencySummary:
    """Min, p50, p90 and max of ``samples`` (µs, in run order, kept as they are: the timed
    runs take them in whole nanoseconds). Sorting 1000 takes about 50 us, where rounding each
    sample and a first ``np.percentile`` in a fresh process took 0.8 ms."""
    ordered = sorted(samples)
    return LatencySummary(
        min=ordered[0], p50=percentile(ordered, 0.5), p90=percentile(ordered, 0.9),
        max=ordered[-1], samples=samples,
    )  # fmt: skip


def _load(runtime: Any, path: Path, method: str, etdump: bool) -> tuple[Any, Any, float]:
    start = time.perf_counter()
    program = runtime.load_program(
        path, enable_etdump=etdump, debug_buffer_size=0, data_path=data_beside(path)
    )
    try:
        loaded = program.load_method(method)
    except Exception as exc:
        raise ExecutionError(f"cannot load method {method!r}: {exc}") from exc
    return program, loaded, (time.perf_counter() - start) * 1e3


def _timed_runs(
    method: Any, inputs: list[np.ndarray], iterations: int, signature: MethodSignature | None
) -> list[float]:
    """Each run's wall time in µs, from integer nanoseconds (so at most 3 decimals)."""
    run_method(method, inputs, signature=signature)  # the warm-up
    samples = []
    for _ in range(iterations):
        start = time.perf_counter_ns()
        run_method(method, inputs, signature=signature)
        samples.append((time.perf_counter_ns() - start) / 1e3)
    return samples


def profile_program(
    path: Path,
    method: str,
    inputs: list[np.ndarray],
    iterations: int,
    signature: MethodSignature | None = None,
) -> ProfileReport:
    """Profile ``method`` of the ``.pte`` at ``path`` on ``inputs`` (see the module
    docstring), with ``signature``'s constants, if it has any, in their places;
    ``artifact_id`` is left empty for the caller to fill in."""
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    exact_peak = reset_memory_peak()
    before = memory_figure("VmRSS")
    program, instrumented, cold = _load(runtime, path, method, etdump=True)
    plain, loaded, warm = _load(runtime, path, method, etdump=False)
    loaded_rss = 0 if exact_peak else memory_figure("VmRSS")
    samples = _timed_runs(loaded, inputs, iterations, signature)
    _timed_runs(instrumented, inputs, operator_runs(iterations), signature)
    peak = memory_figure("VmHWM") if exact_peak else max(loaded_rss, memory_figure("VmRSS"))
    peak = max(peak - before, 0)
    runs = etdump_runs(
        etdump_bytes(program), skip_runs=1, keep=is_operator_row_event,
        max_events=event_budget(samples),
    )  # fmt: skip
    del plain  # held until here: it owns the memory of the method the samples timed
    rows = operator_times(summarize_runs(runs), delegate_backends(path).get(method, {}))
    return ProfileReport(
        artifact_id="", method=method, iterations=iterations,
        latency_us=latency_summary(samples), load_ms=LoadTimes(cold=cold, warm=warm),
        peak_memory_bytes=peak, operators=rows, operator_runs=len(runs),
    )  # fmt: skip
