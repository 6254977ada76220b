"""``GET /v1/artifacts/{id}/bpte`` (issue 19): the shared server's seq2seq artifact as an
ExecuTorch BundledProgram, verified by ExecuTorch's own bundled-program loader."""

from __future__ import annotations

from typing import Any

import httpx

from tests.server.helpers import assert_error


def test_bundled_program_verifies_with_executorch(
    admin: httpx.Client, compiled: dict[str, Any]
) -> None:
    from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer

    artifact = compiled["artifact"]
    response = admin.get(f"/v1/artifacts/{artifact['id']}/bpte")
    assert response.status_code == 200, response.text
    bundle = _load_bundled_program_from_buffer(response.content)
    for method in ("encode", "decode"):  # fp32: within the numerics check's tolerance of eager
        bundle.verify_result_with_bundled_expected_output(method, 0, 1e-3, 1e-4)


def test_an_uploaded_pte_has_no_test_suite(admin: httpx.Client, compiled: dict[str, Any]) -> None:
    pte = admin.get(f"/v1/artifacts/{compiled['artifact']['id']}/pte").content
    uploaded = admin.post("/v1/artifacts", files={"pte": ("model.pte", pte)}).json()
    answer = admin.get(f"/v1/artifacts/{uploaded['id']}/bpte")
    assert_error(answer, 409, "conflict")
    assert "no test suite" in answer.json()["error"]["message"]
    assert_error(admin.get("/v1/artifacts/art_nope/bpte"), 404, "not_found")
