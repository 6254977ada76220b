"""A profile measured in process (``runtime.profile_run``, what a profile job's child runs):
per-operator rows by backend, from ETDump, on the session's XNNPACK-lowered seq2seq; and the
ETDump read back as upstream's own reader reads it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pteforge.runtime.instances import run_method
from pteforge.runtime.profile_run import latency_summary, operator_runs, profile_program
from pteforge.runtime.profiling import PORTABLE, etdump_runs, is_operator_row_event
from tests.runtime.helpers import Compiled


def test_profile_rows_name_the_backend_each_operator_ran_on(
    artifacts: dict[str, Compiled],
) -> None:
    compiled = artifacts["seq2seq"]
    inputs = [t.numpy() for t in compiled.model.inputs["encode"]]
    profile = profile_program(compiled.path, "encode", inputs, iterations=80)
    assert profile.iterations == len(profile.latency_us.samples) == 80
    assert all(round(s, 3) == s for s in profile.latency_us.samples)  # whole nanoseconds
    assert profile.load_ms.cold > 0 and profile.load_ms.warm > 0
    backends = {row.backend for row in profile.operators}
    assert backends == {"XnnpackBackend", PORTABLE}, profile.operators
    assert sum(row.share for row in profile.operators) == pytest.approx(1.0)
    totals = [row.total_us for row in profile.operators]
    assert totals == sorted(totals, reverse=True)
    assert operator_runs(80) == 2  # traced, after a traced warm-up
    runs = profile.operator_runs  # those whose events fit the read budget: at least one
    assert 1 <= runs <= 2
    assert all(row.calls % runs == 0 for row in profile.operators)  # the warm-up left out


def test_etdump_events_read_as_upstreams_reader_reads_them(
    artifacts: dict[str, Compiled], tmp_path: Path
) -> None:
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc
    from executorch.runtime import Runtime

    compiled = artifacts["seq2seq"]
    inputs = [t.numpy() for t in compiled.model.inputs["encode"]]
    program = Runtime.get().load_program(compiled.path, enable_etdump=True, debug_buffer_size=0)
    method = program.load_method("encode")
    for _ in range(2):
        run_method(method, inputs)
    program.write_etdump_result_to_file(str(tmp_path / "run.etdp"), str(tmp_path / "run.bin"))
    data = (tmp_path / "run.etdp").read_bytes()
    upstream = [
        [vars(e.profile_event) for e in run.events or [] if e.profile_event is not None]
        for run in deserialize_from_etdump_flatcc(data).run_data
        if run.name == "Execute"
    ]
    ours = etdump_runs(data)
    assert len(ours) == 2 and sum(map(len, ours)) > 10
    fields = ("name", "instruction_id", "start_time", "end_time", "delegate_debug_id_str")
    assert [[{f: e.get(f) for f in fields} for e in run] for run in ours] == [
        [{f: e[f] for f in fields} for e in run] for run in upstream
    ]
    rows = [[e for e in run if is_operator_row_event(e["name"])] for run in ours]
    assert etdump_runs(data, keep=is_operator_row_event) == rows and rows[0] != ours[0]
    assert etdump_runs(data, max_events=0) == ours[:1]  # whole runs, at least one
    assert etdump_runs(data, max_events=10**6) == ours


@pytest.mark.parametrize("size", [1, 2, 3, 10, 999, 1000])
def test_latency_summary_is_numpys_linear_percentiles(size: int) -> None:
    samples = np.random.default_rng(size).lognormal(3.0, 1.0, size).tolist()
    summary = latency_summary(samples)
    assert (summary.p50, summary.p90) == tuple(np.percentile(samples, [50, 90]))
    assert (summary.min, summary.max) == (min(samples), max(samples))
    assert summary.samples == samples
