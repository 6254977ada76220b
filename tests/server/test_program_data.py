"""A ``.pte`` whose constants are in a ``.ptd`` (ExecuTorch's program-data separation),
uploaded as a pair, stored, downloaded and served over a real socket: the same ``.pte`` with
another ``.ptd`` (a LoRA adapter over one foundation) is another program everywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch

from pteforge.cli import main
from pteforge.client import Client
from tests.program_data import SeparatedProgram, separated_program
from tests.server.helpers import assert_error, wait_job
from tests.server.model_names import deploy, scale_pte
from tests.server.service import ServiceProcess

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> tuple[SeparatedProgram, SeparatedProgram]:
    """One architecture exported twice with other random weights: one ``.pte``, two ``.ptd``."""
    root = tmp_path_factory.mktemp("ptd")
    first, second = separated_program(root / "a", seed=0), separated_program(root / "b", seed=1)
    assert first.pte.read_bytes() == second.pte.read_bytes()
    assert first.ptd.read_bytes() != second.ptd.read_bytes()
    return first, second


def _upload(client: httpx.Client, program: SeparatedProgram, **extra: Path) -> httpx.Response:
    files = {"pte": ("model.pte", program.pte.read_bytes())}
    files |= {part: (path.name, path.read_bytes()) for part, path in extra.items()}
    return client.post("/v1/artifacts", files=files)


@pytest.fixture(scope="module")
def uploaded(
    admin: httpx.Client, pairs: tuple[SeparatedProgram, SeparatedProgram]
) -> list[dict[str, Any]]:
    answers = [_upload(admin, program, ptd=program.ptd) for program in pairs]
    for answer in answers:
        assert answer.status_code == 201, answer.text
    return [answer.json() for answer in answers]


def _infer(client: httpx.Client, model: str, x: torch.Tensor) -> np.ndarray:
    tensor = {"name": "input_0", "shape": list(x.shape), "datatype": "FP32"}
    body = {"inputs": [{**tensor, "data": x.reshape(-1).tolist()}]}
    answer = client.post(f"/v2/models/{model}/infer", json=body)
    assert answer.status_code == 200, answer.text
    output = answer.json()["outputs"][0]
    return np.asarray(output["data"], dtype=np.float32).reshape(output["shape"])


def _eager(program: SeparatedProgram, method: str, x: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return program.model.eager[method](x).numpy()  # type: ignore[no-any-return]


def test_the_pair_is_one_artifact_with_its_ptd(
    admin: httpx.Client,
    pairs: tuple[SeparatedProgram, SeparatedProgram],
    uploaded: list[dict[str, Any]],
) -> None:
    first, second = uploaded
    assert first["sha256"] == second["sha256"]  # one .pte ...
    for artifact, program in zip(uploaded, pairs, strict=True):
        data = program.ptd.read_bytes()
        assert artifact["data"]["size_bytes"] == len(data)
        assert sorted(m["name"] for m in artifact["methods"]) == ["decode", "encode"]
        got = admin.get(f"/v1/artifacts/{artifact['id']}/ptd")
        assert got.status_code == 200 and got.content == data
        assert got.headers["etag"] == f'"{artifact["data"]["sha256"]}"'
        head = admin.head(f"/v1/artifacts/{artifact['id']}/ptd")
        assert head.headers["content-length"] == str(len(data))
        part = admin.get(f"/v1/artifacts/{artifact['id']}/ptd", headers={"Range": "bytes=4-7"})
        assert part.status_code == 206 and part.content == data[4:8] == b"FT01"
    assert first["data"]["sha256"] != second["data"]["sha256"]  # ... two .ptd files


def test_each_pair_serves_its_own_weights_side_by_side(
    admin: httpx.Client,
    pairs: tuple[SeparatedProgram, SeparatedProgram],
    uploaded: list[dict[str, Any]],
) -> None:
    """Both artifacts share the .pte's sha256, not a cached program: each answers its own
    eager model, in turns, from the same workers; so do model versions of them."""
    x = torch.randn(2, 8)
    for _ in range(2):
        for artifact, program in zip(uploaded, pairs, strict=True):
            for method in ("encode", "decode"):
                got = _infer(admin, f"{artifact['id']}.{method}", x)
                np.testing.assert_allclose(got, _eager(program, method, x), rtol=1e-5, atol=1e-6)
    for artifact in uploaded:
        deploy(admin, "ptd-pair", artifact["id"])
    for version, program in ((1, pairs[0]), (2, pairs[1])):
        got = _infer(admin, f"ptd-pair.decode/versions/{version}", x)
        np.testing.assert_allclose(got, _eager(program, "decode", x), rtol=1e-5, atol=1e-6)


def test_a_pte_without_its_ptd_and_a_wrong_ptd_are_refused(
    admin: httpx.Client, pairs: tuple[SeparatedProgram, SeparatedProgram], tmp_path: Path
) -> None:
    program = pairs[0]
    alone = _upload(admin, program)
    assert_error(alone, 422)
    assert "send that file with it, as the upload's 'ptd' part" in alone.text
    cut = tmp_path / "cut.ptd"
    cut.write_bytes(program.ptd.read_bytes()[:-40])
    wrong = _upload(admin, program, ptd=cut)
    assert_error(wrong, 422)
    assert "the .pte does not load with the .ptd (part 'ptd') sent with it" in wrong.text
    other = _upload(admin, program, ptd=program.ptd, other=program.ptd)
    assert_error(other, 422)  # as any unexpected part
    assert "at most one named 'ptd'" in other.text


def test_an_artifact_without_a_ptd_has_none_to_download(
    admin: httpx.Client, pairs: tuple[SeparatedProgram, SeparatedProgram]
) -> None:
    created = admin.post("/v1/artifacts", files={"pte": ("scale.pte", scale_pte(3.0))})
    assert created.status_code == 201 and created.json()["data"] is None, created.text
    artifact_id = created.json()["id"]
    for answer in (
        admin.get(f"/v1/artifacts/{artifact_id}/ptd"),
        admin.head(f"/v1/artifacts/{artifact_id}/ptd"),
    ):
        assert answer.status_code == 409
    answer = admin.get(f"/v1/artifacts/{artifact_id}/ptd")
    assert_error(answer, 409)
    assert artifact_id in answer.text and "has no .ptd" in answer.text
    extra = {"ptd": ("model.ptd", pairs[0].ptd.read_bytes())}
    taken = admin.post("/v1/artifacts", files={"pte": ("s.pte", scale_pte(3.0))} | extra)
    assert taken.status_code == 201, taken.text  # documented: loads with it, so taken
    assert taken.json()["data"]["size_bytes"] == len(extra["ptd"][1])


def test_the_client_and_the_command_line_take_and_give_the_ptd(
    service: ServiceProcess,
    pairs: tuple[SeparatedProgram, SeparatedProgram],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    program = pairs[1]
    with Client(service.url, service.admin_token) as client:
        artifact = client.upload_artifact(program.pte, ptd=program.ptd)
        assert artifact.data is not None
        assert artifact.data["size_bytes"] == program.ptd.stat().st_size
        got = client.download(artifact, tmp_path / "got.ptd", data=True)
        assert got.read_bytes() == program.ptd.read_bytes()
        x = torch.randn(2, 8)
        (out,) = client.infer(artifact, "encode", [x.numpy()])
        np.testing.assert_allclose(out, _eager(program, "encode", x), rtol=1e-5, atol=1e-6)
    monkeypatch.setenv("PTEFORGE_URL", service.url)
    monkeypatch.setenv("PTEFORGE_TOKEN", str(service.admin_token))
    argv = ["deploy", str(program.pte), "ptd-cli", "--ptd", str(program.ptd), "--json"]
    assert main(argv) == 0
    deployed = json.loads(capsys.readouterr().out)
    pulled = tmp_path / "pulled.ptd"
    assert main(["pull", deployed["artifact_id"], "--ptd", "-o", str(pulled)]) == 0
    assert pulled.read_bytes() == program.ptd.read_bytes()
    assert main(["deploy", deployed["artifact_id"], "ptd-cli", "--ptd", str(program.ptd)]) == 2
    assert "--ptd goes with a .pte file" in capsys.readouterr().err


def test_grpc_sessions_and_profile_jobs_run_the_pair(
    admin: httpx.Client,
    service: ServiceProcess,
    pairs: tuple[SeparatedProgram, SeparatedProgram],
    uploaded: list[dict[str, Any]],
) -> None:
    import tritonclient.grpc as triton

    x = torch.randn(2, 8)
    with triton.InferenceServerClient(f"127.0.0.1:{service.grpc_port}") as client:
        headers = {"authorization": str(admin.headers["Authorization"])}
        for artifact, program in zip(uploaded, pairs, strict=True):
            entry = triton.InferInput("input_0", [2, 8], "FP32")
            entry.set_data_from_numpy(x.numpy())
            result = client.infer(f"{artifact['id']}.decode", [entry], headers=headers)
            got = result.as_numpy(result.get_response().outputs[0].name)
            np.testing.assert_allclose(got, _eager(program, "decode", x), rtol=1e-5, atol=1e-6)
    for sequence, (artifact, program) in enumerate(zip(uploaded, pairs, strict=True), 70):
        tensor = {"name": "input_0", "shape": [2, 8], "datatype": "FP32"}
        body = {
            "inputs": [{**tensor, "data": x.reshape(-1).tolist()}],
            "parameters": {"sequence_id": sequence, "sequence_start": True, "sequence_end": True},
        }
        answer = admin.post(f"/v2/models/{artifact['id']}.encode/infer", json=body)
        assert answer.status_code == 200, answer.text
        got = np.asarray(answer.json()["outputs"][0]["data"], dtype=np.float32).reshape(2, 8)
        np.testing.assert_allclose(got, _eager(program, "encode", x), rtol=1e-5, atol=1e-6)
    inputs = [{"name": "input_0", "datatype": "FP32", "shape": [2, 8], "data": [0.5] * 16}]
    body = {"artifact_id": uploaded[1]["id"], "method": "decode", "iterations": 2}
    job = admin.post("/v1/profile-jobs", json={**body, "inputs": inputs})
    assert job.status_code == 202, job.text
    done = wait_job(admin, job.json()["id"])
    assert done["status"] == "succeeded", done
    profile = admin.get(f"/v1/jobs/{done['id']}/profile").raise_for_status().json()
    assert profile["artifact_id"] == uploaded[1]["id"] and profile["operators"]


def test_xnnpack_external_weights_are_served_with_their_ptd(
    admin: httpx.Client, tmp_path: Path
) -> None:
    program = separated_program(tmp_path, seed=2, xnnpack=True)
    created = _upload(admin, program, ptd=program.ptd)
    assert created.status_code == 201, created.text
    x = torch.randn(2, 8)
    for method in ("encode", "decode"):
        got = _infer(admin, f"{created.json()['id']}.{method}", x)
        np.testing.assert_allclose(got, _eager(program, method, x), rtol=1e-5, atol=1e-5)
