"""The command line's tables, from the API's JSON alone (no server)."""

from __future__ import annotations

import pytest

from pteforge.client import Artifact, Program
from pteforge.client.render import Output, terminal_safe
from pteforge.client.views import (
    artifact_summary,
    listing,
    numerics_cell,
    plan_text,
    program_summary,
    stage_plan,
)


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


def test_stage_plans() -> None:
    portable = ["queued", "loading", "to_edge", "emit", "verify", "store"]
    assert stage_plan({}, ["encode", "decode"]) == portable
    mixed = {"all": {"partitioners": ["xnnpack"]}, "methods": {"decode": {}}}
    assert "partition" in stage_plan(mixed, ["encode", "decode"])
    assert stage_plan(mixed, ["decode"]) == portable  # the only method overrides "all"
    assert "quantize" in stage_plan({"all": {"quantize": "r"}}, ["forward"])


def test_plan_texts_say_each_methods_target_as_the_dashboard_does() -> None:
    """``pteforge ls artifacts`` showed no plan, so an XNNPACK artifact and a portable one
    looked alike; the texts are the dashboard's (``summaries.js``)."""
    assert plan_text({}) == "all: portable"
    quantized = {"all": {"partitioners": ["xnnpack"], "quantize": "int8"}}
    assert plan_text(quantized, ["forward"]) == "forward: xnnpack, quantize int8"
    mixed = {"methods": {"encode": {"partitioners": [{"name": "xnnpack"}, "vulkan"]}}}
    assert plan_text(mixed, ["decode"]) == "decode: portable; encode: xnnpack+vulkan"
    delegated = {"all": {"delegate": {"backend_id": "XnnpackBackend"}}}
    assert plan_text(delegated, ["f"]) == "f: delegate XnnpackBackend"


def test_shapes_show_dynamic_dimensions_as_their_ranges(capsys: pytest.CaptureFixture[str]) -> None:
    """``show`` and ``push`` printed a dynamic batch as ``-1`` (``x: float32[-1, 3, 64,
    64]``); it is the range the program was exported with, or the planned bound."""
    batch = {"axis": 0, "symbol": "s0", "min": 1, "max": 8}
    inputs = [
        {"name": "x", "dtype": "float32", "shape": [-1, 3], "dynamic_dims": [batch]},
        {"name": "y", "dtype": "int64", "shape": [-1, -1], "max_shape": [4, 16]},
    ]
    method = {"name": "forward", "inputs": inputs, "outputs": []}
    program = Program.from_json(
        {"id": "prog_1", "name": "p", "sha256": "0", "size_bytes": 1, "methods": [method]}
    )
    program_summary(Output(as_json=False), program)
    assert "x: float32[1..8, 3], y: int64[<=4, <=16]" in capsys.readouterr().out


def test_an_artifact_shows_its_ptd(capsys: pytest.CaptureFixture[str]) -> None:
    """``pteforge show ART`` names the .ptd a .pte was uploaded with (the dashboard shows it):
    without it nothing said the .pte alone would not load."""
    stored = {"id": "art_1", "sha256": "a" * 64, "size_bytes": 4096, "methods": []}
    data = {"sha256": "d" * 64, "size_bytes": 3 << 20}
    artifact_summary(Output(as_json=False), Artifact.from_json({**stored, "data": data}))
    artifact_summary(Output(as_json=False), Artifact.from_json(stored))
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("data")] == [
        f"data (.ptd) 3.0 MiB, sha256 {'d' * 64}"
    ]


def test_an_empty_listing_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    listing(Output(as_json=False), "jobs", [], "failed")  # was a table of headers alone
    listing(Output(as_json=False), "models", [])
    assert capsys.readouterr().out.splitlines() == ["no failed jobs", "no models"]


def test_what_the_server_sends_cannot_drive_the_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Names are read as rich markup no more (attack pass, item 4): a program named
    ``[link=URL]safe[/link]`` was listed as ``safe``, a hyperlink to URL on a terminal, and
    ``[/b]`` stopped ``pteforge ls`` with a MarkupError; control characters from the server
    (an error message, a job's error, a model's generated text) are written as escapes."""
    name = "[link=https://evil.example/]safe[/link][/b]"
    program = Program.from_json(
        {"id": "prog_1", "name": name, "sha256": "0", "size_bytes": 1, "methods": []}
    )
    out = Output(as_json=False)
    listing(out, "programs", [program])
    program_summary(out, program)
    out.line("error x: \x1b]52;c;cm0gLXJmIH4=\x07 and \x9b2J")
    out.error("pteforge run: error: \x1b[2J\x1b[Hmodel\r\nok\t.")
    captured = capsys.readouterr()
    assert captured.out.count(name) == 2 and "\x1b" not in captured.out
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07 and \\x9b2J" in captured.out
    assert captured.err == "pteforge run: error: \\x1b[2J\\x1b[Hmodel\\x0d\nok\t.\n"
    assert terminal_safe("text\n\ttoken\x1b[1A") == "text\n\ttoken\\x1b[1A"
