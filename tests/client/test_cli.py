"""The remote commands against the real server: login, push, build, pull, run, ls, cancel;
``--json`` for scripts, one-line errors with a non-zero exit."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pteforge.cli import main
from pteforge.client import Artifact, Program
from pteforge.contracts.oip import OIP_TO_NUMPY
from tests.client.conftest import MIXED_PLAN, OVER_TOLERANCE_PLAN
from tests.models import MultiMethod
from tests.server.service import ServiceProcess


@pytest.fixture
def logged_in(
    service: ServiceProcess, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A saved login (the config file in a temporary place, no environment override)."""
    config = tmp_path / "config" / "client.json"
    monkeypatch.setenv("PTEFORGE_CONFIG", str(config))
    monkeypatch.delenv("PTEFORGE_URL", raising=False)
    monkeypatch.delenv("PTEFORGE_TOKEN", raising=False)
    assert main(["login", service.url, "--token", token]) == 0
    return config


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _fails(capsys: pytest.CaptureFixture[str], code: int, *argv: str) -> str:
    assert main(list(argv)) == code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_login_saves_url_and_token_privately(logged_in: Path, service: ServiceProcess) -> None:
    assert stat.S_IMODE(logged_in.stat().st_mode) == 0o600
    assert json.loads(logged_in.read_text())["url"] == service.url


def test_login_refuses_an_unknown_token(
    service: ServiceProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "client.json"
    env = {**os.environ, "PTEFORGE_CONFIG": str(config)}
    done = subprocess.run(
        [sys.executable, "-m", "pteforge", "login", service.url, "--token", "ptf_nope"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "401 unauthorized" in done.stderr and "PTEFORGE_HOME" in done.stderr
    assert not config.exists()


def test_environment_overrides_the_saved_login(
    logged_in: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PTEFORGE_TOKEN", "ptf_from-the-environment")
    assert "401 unauthorized" in _fails(capsys, 1, "ls", "programs")


def test_push_build_pull_run(
    logged_in: Path,
    seq2seq_files: dict[str, Path],
    seq2seq: MultiMethod,
    artifact: Artifact,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    methods = [f"{m}={p}" for m, p in seq2seq_files.items()]
    program = _json(capsys, "push", "cli", *methods)
    assert program["name"] == "cli" and {m["name"] for m in program["methods"]} == set(
        seq2seq_files
    )
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(MIXED_PLAN))
    built_pte = tmp_path / "built.pte"
    built = _json(capsys, "build", "seq2seq", "--plan", str(plan_file), "-o", str(built_pte))
    assert built["id"] == artifact.id  # the program named seq2seq, the same plan: reused
    assert built_pte.stat().st_size == artifact.size_bytes
    out = tmp_path / "model.pte"
    pulled = _json(capsys, "pull", artifact.id, "-o", str(out))
    assert pulled == {"path": str(out), "sha256": artifact.sha256, "size_bytes": out.stat().st_size}
    bundle = _json(capsys, "pull", artifact.id, "--bundled", "-o", str(tmp_path / "m.bpte"))
    assert bundle["sha256"] == hashlib.sha256((tmp_path / "m.bpte").read_bytes()).hexdigest()
    assert bundle["size_bytes"] > out.stat().st_size  # the .pte and its test cases
    tokens = tmp_path / "tokens.npy"
    np.save(tokens, seq2seq.inputs["encode"][0].numpy())
    ran = _json(capsys, "run", f"{artifact.id}.encode", "--input", str(tokens))
    assert ran["model_name"] == f"{artifact.id}.encode"
    (output,) = ran["outputs"]  # /v2's shape: a list of Open Inference Protocol tensors
    expected = seq2seq.eager["encode"](*seq2seq.inputs["encode"]).detach().numpy()
    got = np.asarray(output["data"], dtype=OIP_TO_NUMPY[output["datatype"]])
    got = got.reshape(output["shape"])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_build_shows_every_stage_numbered(
    logged_in: Path, program: Program, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["build", program.id, "--plan", "{}"]) == 0  # inline JSON, a fresh compile
    captured = capsys.readouterr()
    steps = re.findall(r"^\[(\d+)/(\d+)\] (\w+)", captured.err, re.MULTILINE)
    assert [s[2] for s in steps] == ["queued", "loading", "to_edge", "emit", "verify", "store"]
    assert [int(s[0]) for s in steps] == list(range(1, 7)) and {s[1] for s in steps} == {"6"}
    assert "succeeded" in captured.err and "artifact" in captured.out


def test_build_warns_on_one_line_when_over_tolerance(
    logged_in: Path, program: Program, capsys: pytest.CaptureFixture[str]
) -> None:
    """stdout keeps its JSON; stderr has one ``warning:`` line per method over its tolerance."""
    plan = json.dumps(OVER_TOLERANCE_PLAN)
    assert main(["build", program.id, "--plan", plan, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["numerics"]["status"] == "over_tolerance"
    warned = [line for line in captured.err.splitlines() if "tolerance" in line]
    assert warned, captured.err
    assert all(re.fullmatch(r"warning: artifact \S+: method '\w+' is over .*", w) for w in warned)


def test_ls_and_cancel(
    logged_in: Path, program: Program, capsys: pytest.CaptureFixture[str]
) -> None:
    assert program.id in [p["id"] for p in _json(capsys, "ls", "programs")["programs"]]
    assert main(["ls", "programs"]) == 0
    assert program.id in capsys.readouterr().out
    plan = json.dumps({"all": {"partitioners": ["xnnpack"]}})
    job = _json(capsys, "build", program.id, "--plan", plan, "--no-wait")
    canceled = _json(capsys, "cancel", job["id"])
    assert canceled["id"] == job["id"]
    assert job["id"] in [j["id"] for j in _json(capsys, "ls", "jobs")["jobs"]]
    assert isinstance(_json(capsys, "ls", "artifacts")["artifacts"], list)  # the API's shape
    assert main(["build", program.id, "--plan", plan]) == 0
    capsys.readouterr()
    assert main(["ls", "artifacts"]) == 0
    table = capsys.readouterr().out
    assert program.name in table and "xnnpack" in table and "passed" in table, table


def test_errors_are_one_line(
    logged_in: Path, tmp_path: Path, artifact: Artifact, capsys: pytest.CaptureFixture[str]
) -> None:
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 16), dtype=np.float32))
    assert "404 not_found" in _fails(capsys, 1, "run", "art_missing.forward", "--input", str(x))
    line = _fails(capsys, 2, "pull", artifact.id, "-o", str(tmp_path / "no-dir" / "m.pte"))
    assert "no such file" in line
    assert "invalid JSON" in _fails(capsys, 2, "build", "prog_x", "--plan", "{nope")
    typo = _fails(capsys, 2, "build", "nope", "--plan", '{"al": {"partitioners": ["xnnpack"]}}')
    assert "plan field 'al': unknown field" in typo  # refused before any request
    assert "no program with id or name 'nope'" in _fails(capsys, 1, "build", "nope")
    assert "no such file" in _fails(
        capsys, 2, "build", "nope", "-o", str(tmp_path / "no-dir" / "m.pte")
    )  # an unwritable -o is refused before anything is sent
    assert "METHOD=FILE" in _fails(capsys, 2, "push", "x", "encode")
    assert "not a readable .npy" in _fails(
        capsys, 2, "run", f"{artifact.id}.encode", "--input", str(tmp_path / "missing.npy")
    )
    text = tmp_path / "x.txt"
    text.write_text("1 2 3 4")  # numpy's answer was 'pickled data ... use allow_pickle'
    line = _fails(capsys, 2, "run", f"{artifact.id}.encode", "--input", str(text))
    assert line.endswith("not a .npy file (numpy.save writes one)") and "pickle" not in line


def test_no_login_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setenv("PTEFORGE_CONFIG", str(tmp_path / "none.json"))
    monkeypatch.delenv("PTEFORGE_URL", raising=False)
    monkeypatch.delenv("PTEFORGE_TOKEN", raising=False)
    assert "pteforge login" in _fails(capsys, 1, "ls", "jobs")


def test_run_takes_a_models_pinned_version(
    logged_in: Path, artifact: Artifact, seq2seq: MultiMethod, tmp_path: Path, capsys: Any
) -> None:
    """``run NAME:VERSION.METHOD`` calls that version, as ``chat NAME:VERSION`` does."""
    tokens = tmp_path / "tokens.npy"
    np.save(tokens, seq2seq.inputs["encode"][0].numpy())
    version = _json(capsys, "deploy", artifact.id, "pinned")["version"]
    ran = _json(capsys, "run", f"pinned:{version}.encode", "--input", str(tokens))
    assert (ran["model_name"], ran["model_version"]) == ("pinned.encode", f"{version}")
    assert main(["run", "pinned.encode", "--input", str(tokens)]) == 0
    assert f"pinned.encode (version {version})" in capsys.readouterr().out  # the latest
    missing = _fails(capsys, 1, "run", f"pinned:{version + 1}.encode", "--input", str(tokens))
    assert f"no artifact or model 'pinned' version '{version + 1}'" in missing
    assert "NAME:VERSION" in _fails(capsys, 2, "run", "pinned:latest.encode")


def test_deploy_keeps_no_version_whose_tokenizer_was_refused(
    logged_in: Path, artifact: Artifact, tmp_path: Path, capsys: Any
) -> None:
    """``deploy --tokenizer`` is one step: a tokenizer the server refuses leaves no version
    behind (it left one without a tokenizer, and the retry became the next version)."""
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    line = _fails(capsys, 1, "deploy", artifact.id, "rolled-back", "--tokenizer", str(bad))
    assert "not a tokenizer.json" in line
    assert _json(capsys, "show", "rolled-back")["latest_version"] is None


def test_deploy_uploads_a_pte_file_first(
    logged_in: Path, artifact: Artifact, tmp_path: Path, capsys: Any
) -> None:
    """A ``.pte`` built elsewhere (optimum-executorch's, say) is deployed in one command; it
    needed a curl upload to get an artifact id first."""
    pte = tmp_path / "model.pte"
    _json(capsys, "pull", artifact.id, "-o", str(pte))
    assert main(["deploy", str(pte), "from-file"]) == 0
    lines = capsys.readouterr().out.splitlines()
    uploaded = lines[0].removeprefix(f"Uploaded {pte} as ").removesuffix(".")
    assert lines[1] == f"from-file version 1: {uploaded}"
    assert _json(capsys, "show", uploaded)["sha256"] == artifact.sha256
    missing = _fails(capsys, 2, "deploy", str(tmp_path / "none.pte"), "from-file")
    assert missing.endswith(f"no such file: {tmp_path / 'none.pte'}")
