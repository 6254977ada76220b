"""A profile measured in process (``runtime.profile_run``, what a profile job's child runs):
per-operator rows by backend, from ETDump, on the session's XNNPACK-lowered seq2seq."""

from __future__ import annotations

import pytest

from pteforge.runtime.profile_run import profile_program
from pteforge.runtime.profiling import PORTABLE
from tests.runtime.helpers import Compiled


def test_profile_rows_name_the_backend_each_operator_ran_on(
    artifacts: dict[str, Compiled],
) -> None:
    compiled = artifacts["seq2seq"]
    inputs = [t.numpy() for t in compiled.model.inputs["encode"]]
    profile = profile_program(compiled.path, "encode", inputs, iterations=3)
    assert profile.iterations == len(profile.latency_us.samples) == 3
    assert profile.load_ms.cold > 0 and profile.load_ms.warm > 0
    backends = {row.backend for row in profile.operators}
    assert backends == {"XnnpackBackend", PORTABLE}, profile.operators
    assert sum(row.share for row in profile.operators) == pytest.approx(1.0)
    totals = [row.total_us for row in profile.operators]
    assert totals == sorted(totals, reverse=True)
    assert all(row.calls % 3 == 0 for row in profile.operators)  # the warm-up left out
