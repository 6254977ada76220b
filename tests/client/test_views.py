"""The command line's tables, from the API's JSON alone (no server)."""

from __future__ import annotations

from pteforge.client.views import numerics_cell


def _check(metric: str, values: list[float | None]) -> dict[str, object]:
    outputs = [{"max_rel_error": 0.03, metric: value} for value in values]
    return {"status": "passed", "check": {"metric": metric}, "outputs": outputs}


def test_a_method_shows_the_metric_it_is_judged_on() -> None:
    """An int8 method is judged on its SQNR: the table showed its relative error."""
    assert numerics_cell(_check("sqnr_db", [31.2, 24.04])) == "passed (SQNR 24 dB)"
    assert numerics_cell(_check("max_rel_error", [2e-7, 3e-7])) == "passed (max rel error 3e-07)"
    assert numerics_cell(_check("sqnr_db", [None])) == "passed"  # exact: no SQNR
    assert numerics_cell({"status": "error", "message": "..."}) == "error"
    assert numerics_cell(None) == "-"
