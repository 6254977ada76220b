"""``pteforge compile`` in a subprocess: success, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.manager.helpers import run_method
from tests.models import small_mlp_programs

REPO = Path(__file__).resolve().parents[2]


def _pteforge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pteforge", "compile", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli")
    model = small_mlp_programs()
    torch.export.save(model.programs["forward"], path / "mlp.pt2")
    (path / "not-a-zip.pt2").write_text("definitely not a program")
    torch.save(torch.nn.Linear(4, 2), path / "pickled.pt2")  # not torch.export.save
    (path / "model.pte").write_bytes(b"<\x00\x00\x00ET12" + b"\x00" * 64)  # a .pte's head
    plans = {
        "xnnpack.json": {"all": {"partitioners": ["xnnpack"]}},
        "unknown-method.json": {"methods": {"encode": {}}},
        "unknown-backend.json": {"all": {"delegate": {"backend_id": "NoSuchBackend"}}},
        "strict.json": {"all": {}, "verify": {"rtol": 1e-15}},
        "bad-verify.json": {"verify": {"rtol": "tight"}},
    }
    for name, plan in plans.items():
        (path / name).write_text(json.dumps(plan))
    return path


def test_compile_writes_a_pte_that_runs(workdir: Path) -> None:
    out = workdir / "mlp.pte"
    done = _pteforge(
        "--method", f"forward={workdir / 'mlp.pt2'}", "--plan", str(workdir / "xnnpack.json"),
        "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["report"]["methods"]["forward"]["backends"]["XnnpackBackend"]
    for stage in ("to_edge", "partition", "preprocess", "emit", "verify"):
        assert stage in done.stderr
    numerics = summary["numerics"]
    assert numerics["status"] == "passed" and not numerics["flagged"]
    (output,) = numerics["methods"]["forward"]["outputs"]
    assert output["max_rel_error"] is not None and output["max_rel_error"] <= 1e-4
    assert "warning" not in done.stderr
    model = small_mlp_programs()
    (inputs,) = model.inputs.values()
    torch.testing.assert_close(
        run_method(out.read_bytes(), "forward", inputs)[0], model.eager["forward"](*inputs)
    )


@pytest.mark.parametrize(
    ("program", "plan", "expected"),
    [
        ("not-a-zip.pt2", None, "not a zip file"),
        ("pickled.pt2", None, "the file is a torch.save pickle (a module or a state_dict)"),
        ("model.pte", None, "not a torch.export archive (an ExecuTorch .pte, already compiled)"),
        ("mlp.pt2", "unknown-method.json", "unknown method 'encode'"),
        ("mlp.pt2", "unknown-backend.json", "unknown backend id 'NoSuchBackend'"),
        ("mlp.pt2", "bad-verify.json", "plan field 'verify.rtol': must be a number"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    workdir: Path, program: str, plan: str | None, expected: str
) -> None:
    args = ["--method", f"forward={workdir / program}", "-o", str(workdir / "x.pte")]
    if plan is not None:
        args += ["--plan", str(workdir / plan)]
    done = _pteforge(*args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert expected in lines[0]


def test_numerics_over_tolerance_is_a_warning(workdir: Path) -> None:
    """A plan tolerance no float32 kernel meets: the artifact is written and flagged."""
    out = workdir / "strict.pte"
    plan = str(workdir / "strict.json")
    done = _pteforge("--method", f"forward={workdir / 'mlp.pt2'}", "--plan", plan, "-o", str(out))
    assert done.returncode == 0, done.stderr
    numerics = json.loads(done.stdout)["numerics"]
    assert numerics["flagged"] and numerics["status"] == "over_tolerance"
    assert numerics["tolerance"]["rtol"] == 1e-15
    assert "warning: method 'forward' is over tolerance (limit 1e-15)" in done.stderr
    assert out.stat().st_size > 0


def test_a_check_that_passed_with_a_message_is_a_warning() -> None:
    """The client warns on a method that passed against all-zero outputs, or whose dynamic
    dimension lowering fixed; ``pteforge compile`` said nothing of either."""
    import io

    from pteforge.manager.cli import _warn_numerics

    stream = io.StringIO()
    record = {"status": "passed", "message": "input 'x' dimension 0, exported dynamic, ..."}
    _warn_numerics({"methods": {"forward": record, "quiet": {"status": "passed"}}}, stream)
    assert stream.getvalue() == (
        "warning: method 'forward' passed, but input 'x' dimension 0, exported dynamic, ...\n"
    )


def test_inline_plan_and_stages_numbered_among_those_it_runs(workdir: Path) -> None:
    """A portable plan runs three stages: they count 1/3, 2/3, 3/3 (none skipped)."""
    out = workdir / "portable.pte"
    done = _pteforge("--method", f"forward={workdir / 'mlp.pt2'}", "--plan", "{}", "-o", str(out))
    assert done.returncode == 0, done.stderr
    steps = [m.group(0) for m in re.finditer(r"^\[\d+/\d+\] \w+", done.stderr, re.MULTILINE)]
    assert steps == ["[1/3] to_edge", "[2/3] emit", "[3/3] verify"]


@pytest.mark.parametrize("output", ["no-such-dir/x.pte", "."])
def test_an_unwritable_output_fails_before_compiling(workdir: Path, output: str) -> None:
    done = _pteforge("--method", f"forward={workdir / 'mlp.pt2'}", "-o", str(workdir / output))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pteforge compile: error: -o "), done.stderr
