"""Payloads in the strings and names of an upload, through the real service (issue 18).

Each hostile program is uploaded to a real server; one that is accepted is compiled with
every kind of plan (portable, a partitioner, a whole-graph delegate; each compile runs the
numerics check), and each artifact is run and profiled over ``/v2``. Every payload must be
refused with a 4xx naming what is wrong, or stay inert: its marker file never appears, and
no answer or log line ever names it (a payload run inside a confined child would fail to
touch the marker, and that refusal would be reported with the marker's path).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.security.payloads import EDITS, STRING_INPUT_CASES, benign, hostile
from tests.server.helpers import submit, wait_job
from tests.server.service import ServiceProcess

PLANS = {
    "portable": {"all": {}},
    "xnnpack": {"all": {"partitioners": ["xnnpack"]}},
    "delegate": {"all": {"delegate": {"backend_id": "XnnpackBackend"}}},
}
X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def _upload(client: httpx.Client, archive: Path) -> httpx.Response:
    return client.post("/v1/programs", files={"forward": (archive.name, archive.read_bytes())})


def _infer(client: httpx.Client, artifact_id: str, profile: bool) -> httpx.Response:
    tensor = {"name": "x", "shape": [2, 3], "datatype": "FP32", "data": X.ravel().tolist()}
    body = {"inputs": [tensor], "parameters": {"profile": profile}}
    return client.post(f"/v2/models/{artifact_id}.forward/infer", json=body)


def _exercise(
    client: httpx.Client, program: dict[str, Any], runnable: bool = True
) -> tuple[list[str], dict[str, Any]]:
    """Compile ``program`` with every plan kind and run each artifact (if ``runnable``: a
    string input cannot be fed over ``/v2``), plain and profiled; every answer's text, and
    the outputs by plan. A compile may fail, but clearly (never a crash)."""
    texts: list[str] = []
    outputs: dict[str, Any] = {}
    for name, plan in PLANS.items():
        job = wait_job(client, submit(client, program["id"], plan)["id"])
        texts.append(json.dumps(job))
        if job["status"] != "succeeded":
            assert job["error"]["code"] in {"lowering_failed", "compile_failed"}, job["error"]
            continue
        artifact = client.get(f"/v1/artifacts/{job['artifact_id']}").raise_for_status()
        texts.append(artifact.text)
        for profile in (False, True) if runnable else ():
            answer = _infer(client, job["artifact_id"], profile)
            texts.append(answer.text)
            assert answer.status_code == 200, answer.text
            outputs[name] = answer.json()["outputs"][0]["data"]
    return texts, outputs


@pytest.mark.parametrize("case", sorted(EDITS))
def test_a_payload_is_refused_or_stays_inert(
    case: str, secure_service: ServiceProcess, secure_admin: httpx.Client, tmp_path: Path
) -> None:
    marker = tmp_path / f"PWNED-{case}"
    answer = _upload(secure_admin, hostile(tmp_path / "archives", case, marker))
    texts = [answer.text]
    if answer.status_code == 201:
        texts += _exercise(secure_admin, answer.json(), case not in STRING_INPUT_CASES)[0]
    else:
        assert 400 <= answer.status_code < 500, answer.text
        error = answer.json()["error"]
        assert error["code"] and error["message"], error
    assert not marker.exists(), f"{case}: the payload ran"
    seen = "\n".join(texts) + secure_service.log_path.read_text()
    refused = f"Permission denied: '{marker}'"  # the touch, run in a confined child
    assert refused not in seen, f"{case}: the payload ran (and confinement refused it)"


def test_a_benign_program_with_strings_compiles_and_runs(
    secure_admin: httpx.Client, tmp_path: Path
) -> None:
    """A string argument of a real operator is accepted, lowers with every plan kind (or is
    refused clearly) and runs like eager PyTorch; a string-typed input is accepted and
    compiles."""
    answer = _upload(secure_admin, benign(tmp_path, string_input=True))
    assert answer.status_code == 201, answer.text
    _exercise(secure_admin, answer.json(), runnable=False)
    answer = _upload(secure_admin, benign(tmp_path))
    assert answer.status_code == 201, answer.text
    _, outputs = _exercise(secure_admin, answer.json())
    assert {"portable", "xnnpack"} <= set(outputs), outputs
    expected = (np.floor(X / 2.0) + 1).ravel()
    for plan, data in outputs.items():
        np.testing.assert_allclose(np.asarray(data, dtype=np.float32), expected, err_msg=plan)


LIVE = ("constant_input_name", "constant_input_value", "tensor_input_name")


@pytest.mark.parametrize("case", LIVE)
def test_the_name_payloads_are_live_exploits_without_the_validator(
    case: str, tmp_path: Path
) -> None:
    """The corpus has teeth: plain ``torch.export.load``, ``ep.module()`` and a call on the
    archive's example inputs, in a child with no validator and no confinement, run these
    payloads (and the marker appears)."""
    marker = tmp_path / f"PWNED-{case}"
    archive = hostile(tmp_path / "archives", case, marker)
    code = (
        f"import torch; ep = torch.export.load({str(archive)!r}); "
        "ep.module()(*ep.example_inputs[0])"
    )
    subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)
    assert marker.exists(), f"{case} no longer runs in plain torch: is the corpus stale?"
