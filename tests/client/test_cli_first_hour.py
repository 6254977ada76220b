"""The first hour with the CLI, as a user types it (``python -m pteforge`` in a subprocess,
against the real server): a URL without a scheme, one-line errors for a bad or unreachable
server, ``show`` and ``rm``, ``ls --json`` in the API's shape, help for every command."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pteforge.cli import build_parser, command_name
from pteforge.client import Artifact, Client, Program
from pteforge.server.startup.bootstrap import Bootstrap, usage_text
from tests.models import MultiMethod
from tests.server.service import ServiceProcess, free_port

COMMANDS = [
    *("compile", "serve", "worker", "migrate", "tokens", "login", "push", "build", "pull"),
    *("deploy", "run", "ls", "show", "rm", "cancel", "chat", "profile"),
]


def _cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pteforge", *argv],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code and len(lines) == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    return lines[0]


@pytest.fixture
def env(service: ServiceProcess, token: str, tmp_path: Path) -> dict[str, str]:
    """The server given as a bare ``HOST:PORT`` in ``PTEFORGE_URL``, no saved login."""
    bare = service.url.removeprefix("http://")
    return {
        "PTEFORGE_CONFIG": str(tmp_path / "client.json"),
        "PTEFORGE_URL": bare,
        "PTEFORGE_TOKEN": token,
    }


def _api(service: ServiceProcess, token: str, path: str) -> Any:
    with service.client(token) as http:
        answer = http.get(path)
        answer.raise_for_status()
        return answer.json()


def _json(env: dict[str, str], *argv: str) -> Any:
    done = _cli(*argv, "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_login_with_a_bare_host_and_port(
    service: ServiceProcess, token: str, tmp_path: Path
) -> None:
    config = tmp_path / "client.json"
    bare = service.url.removeprefix("http://")  # 127.0.0.1:PORT
    done = _cli("login", bare, "--token", token, env={"PTEFORGE_CONFIG": str(config)})
    assert done.returncode == 0, done.stderr
    assert json.loads(config.read_text())["url"] == service.url
    listed = _cli("ls", "programs", env={"PTEFORGE_CONFIG": str(config)})
    assert listed.returncode == 0, listed.stderr


def test_the_python_client_takes_a_bare_host_and_port(service: ServiceProcess, token: str) -> None:
    with Client(service.url.removeprefix("http://"), token) as client:
        assert client.url == service.url
        client.list_programs(limit=1)


def test_ls_json_is_the_api_shape(
    env: dict[str, str], service: ServiceProcess, token: str, program: Program
) -> None:
    for what in ("programs", "artifacts", "jobs"):
        listed = _json(env, "ls", what, "--limit", "5")
        assert list(listed) == [what] and isinstance(listed[what], list)
        assert listed == _api(service, token, f"/v1/{what}?limit=5")


def test_run_json_is_the_api_answer(
    env: dict[str, str],
    service: ServiceProcess,
    token: str,
    artifact: Artifact,
    seq2seq: MultiMethod,
    tmp_path: Path,
) -> None:
    """``run --json`` prints what ``/v2`` answers a JSON infer request: the same outputs, as
    Open Inference Protocol tensors, and the version that answered."""
    tokens = seq2seq.inputs["encode"][0].numpy()
    np.save(tmp_path / "tokens.npy", tokens)
    model = f"{artifact.id}.encode"
    ran = _json(env, "run", model, "--input", str(tmp_path / "tokens.npy"))
    with service.client(token) as http:
        (spec,) = http.get(f"/v2/models/{model}").raise_for_status().json()["inputs"]
        data = tokens.reshape(-1).tolist()
        tensor = {"name": spec["name"], "datatype": spec["datatype"], "shape": list(tokens.shape)}
        body = {"inputs": [{**tensor, "data": data}]}
        api = http.post(f"/v2/models/{model}/infer", json=body).raise_for_status().json()
    assert list(ran) == list(api)
    assert [ran[key] for key in ("model_name", "model_version", "outputs")] == [
        api[key] for key in ("model_name", "model_version", "outputs")
    ]


@pytest.mark.parametrize("value", ["not a url", "ftp://127.0.0.1:8000", "localhost:port"])
def test_a_bad_url_is_one_line(value: str, tmp_path: Path) -> None:
    config = {"PTEFORGE_CONFIG": str(tmp_path / "client.json")}
    line = _one_line(_cli("login", value, "--token", "ptf_x", env=config), 2)
    assert repr(value) in line and "not a server URL" in line
    remote = _cli("ls", "jobs", env={**config, "PTEFORGE_URL": value, "PTEFORGE_TOKEN": "t"})
    assert "PTEFORGE_URL" in _one_line(remote, 2)
    with pytest.raises(ValueError, match="not a server URL"):  # InvalidURLError
        Client(value, "ptf_x")


def test_an_unreachable_server_is_one_line(tmp_path: Path) -> None:
    url = f"127.0.0.1:{free_port()}"  # nothing listens there
    env = {"PTEFORGE_CONFIG": str(tmp_path / "c.json"), "PTEFORGE_URL": url}
    line = _one_line(_cli("ls", "jobs", env={**env, "PTEFORGE_TOKEN": "t"}), 1)
    assert f"http://{url}/v1/jobs" in line and "ConnectError" in line


def test_show_is_the_api_object(
    env: dict[str, str], service: ServiceProcess, token: str, program: Program, artifact: Artifact
) -> None:
    (job,) = _json(env, "ls", "jobs", "--limit", "1")["jobs"]
    for ident, kind in ((program.id, "programs"), (artifact.id, "artifacts"), (job["id"], "jobs")):
        assert _json(env, "show", ident) == _api(service, token, f"/v1/{kind}/{ident}")
        shown = _cli("show", ident, env=env)
        assert shown.returncode == 0 and ident in shown.stdout, shown.stderr
    assert "404 not_found" in _one_line(_cli("show", "art_missing", env=env), 1)
    assert "model 'nope' not found" in _one_line(_cli("show", "nope", env=env), 1)  # a name
    assert "prog_, art_ or job_" in _one_line(_cli("show", "no/pe", env=env), 2)


def test_models_are_listed_shown_and_their_versions_removed(
    env: dict[str, str], service: ServiceProcess, token: str, artifact: Artifact
) -> None:
    """``ls models``, ``show NAME`` and ``rm NAME:VERSION``, with ``--json`` in the API's
    shapes (``GET /v1/models`` is OpenAI's list)."""
    first = _json(env, "deploy", artifact.id, "listed")["version"]
    second = _json(env, "deploy", artifact.id, "listed")["version"]
    assert _json(env, "ls", "models", "--limit", "5") == _api(service, token, "/v1/models?limit=5")
    assert _json(env, "show", "listed") == _api(service, token, "/v1/models/listed")
    shown = _cli("show", "listed", env=env)
    assert shown.returncode == 0 and f"latest version {second}" in shown.stdout, shown.stderr
    listed = _api(service, token, "/v1/models/listed")["versions"]
    assert _json(env, "show", f"listed:{first}") == listed[0]  # that version, not the model
    shown = _cli("show", f"listed:{first}", env=env)
    assert shown.stdout.strip() == f"model listed version {first}: artifact {artifact.id}"
    missing = _one_line(_cli("show", "listed:99", env=env), 1)
    assert f"model 'listed' has no version 99 (versions: {first}, {second})" in missing
    removed = _cli("rm", f"listed:{second}", env=env)
    assert removed.stdout.strip() == f"Deleted model version listed:{second}.", removed.stderr
    assert _json(env, "show", "listed")["latest_version"] == first
    assert "NAME:VERSION" in _one_line(_cli("rm", "listed", env=env), 2)


def test_rm_deletes_a_program_and_an_artifact(
    env: dict[str, str],
    service: ServiceProcess,
    token: str,
    seq2seq: MultiMethod,
    artifact: Artifact,
    tmp_path: Path,
) -> None:
    with Client(service.url, token) as client:
        program = client.upload_program(seq2seq.programs, name="rm-me")
        pte = client.download(artifact, tmp_path / "copy.pte")
        uploaded = client.upload_artifact(pte)
    assert uploaded.id != artifact.id  # a row of its own: the shared artifact stays
    for item, noun in ((program, "program"), (uploaded, "artifact")):
        done = _cli("rm", item.id, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"Deleted {noun} {item.id}."
        assert "404 not_found" in _one_line(_cli("show", item.id, env=env), 1)
    assert _json(env, "show", artifact.id)["id"] == artifact.id
    assert "pteforge cancel" in _one_line(_cli("rm", "job_x", env=env), 2)


def test_every_command_has_help_and_a_description() -> None:
    parser = build_parser()
    (actions,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {choice.dest: choice.help for choice in actions._choices_actions}
    assert sorted(helps) == sorted(COMMANDS) and all(helps.values()), helps
    for name, sub in actions.choices.items():
        assert sub.description and len(sub.description) > len(helps[name]), name
    usage = _cli("rm", "--help", env={})
    assert usage.returncode == 0 and "example:" in usage.stdout and "pteforge rm" in usage.stdout
    assert _arguments_without_help(parser) == []


def _arguments_without_help(parser: argparse.ArgumentParser, path: str = "pteforge") -> list[str]:
    """Every argument of ``parser`` and of its subcommands, at any depth, that has no help."""
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _arguments_without_help(sub, f"{path} {name}")
        elif not action.help and not isinstance(action, argparse._HelpAction):
            missing.append(f"{path} {action.dest}")
    return missing


def test_the_banner_commands_run_as_printed(service: ServiceProcess) -> None:
    """The first-start banner's ``login`` line names a command this shell finds."""
    banner = service.log_path.read_text()
    match = re.search(r"^\s+(\S+) login http://\S+ --token ptf_\S+$", banner, re.MULTILINE)
    assert match, banner[:2000]
    command = match.group(1)
    assert shutil.which(command, path=service.env.get("PATH")) or Path(command).is_file()


def test_the_command_name_is_a_path_when_the_venv_is_not_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "pteforge").write_text("#!/bin/sh\n")
    (venv / "bin" / "pteforge").chmod(0o755)
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert command_name() == ".venv/bin/pteforge"  # a fresh clone after `make serve`
    boot = Bootstrap("default", "ptf_secret")
    assert "  .venv/bin/pteforge login http://h:1 --token ptf_secret\n" in usage_text(
        boot, "http://h:1"
    )
    monkeypatch.chdir("/")
    assert command_name() == str(venv / "bin" / "pteforge")
    monkeypatch.setenv("PATH", f"{venv / 'bin'}:/usr/bin")
    assert command_name() == "pteforge"  # an activated venv
    monkeypatch.setattr(sys, "base_prefix", str(venv))
    assert command_name() == "pteforge"  # no venv: installed where PATH looks
