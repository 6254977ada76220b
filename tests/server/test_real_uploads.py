"""Programs exported from real ``transformers`` models upload through the running service.

ALBERT and a Whisper-style decoder called with attention masks hold ``aten.__and__``, which
the service used to refuse (422 unsafe_operator); a denied operator is still refused, and the
answer names the operator and the reason.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.sandbox import archives as A
from tests.sandbox.hf_models import export_model
from tests.server.helpers import assert_error, upload_methods


@pytest.fixture(scope="module")
def albert_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return export_model("albert", tmp_path_factory.mktemp("albert"))


def test_albert_with_attention_mask_uploads(
    admin: httpx.Client, albert_files: dict[str, Path]
) -> None:
    program = upload_methods(admin, albert_files, name="albert")  # asserts 201
    [method] = program["methods"]
    assert method["name"] == "forward"
    assert [(i["dtype"], i["shape"]) for i in method["inputs"]] == [("int64", [1, 8])] * 2
    assert method["outputs"][0]["shape"] == [1, 8, 32]


def test_whisper_encoder_and_decoder_upload(
    admin: httpx.Client, tmp_path_factory: pytest.TempPathFactory
) -> None:
    files = export_model("whisper", tmp_path_factory.mktemp("whisper"))
    program = upload_methods(admin, files, name="whisper")
    assert sorted(m["name"] for m in program["methods"]) == ["decode", "encode"]


def test_denied_operator_is_refused_with_its_reason(
    admin: httpx.Client, albert_files: dict[str, Path], tmp_path: Path
) -> None:
    edit = A.operator_edit("torch.ops.aten.from_file.default")
    hostile = A.edit_archive(albert_files["forward"], tmp_path / "hostile.pt2", edit)
    response = admin.post("/v1/programs", files={"forward": ("h.pt2", hostile.read_bytes())})
    assert_error(response, 422, "unsafe_operator")
    message = response.json()["error"]["message"]
    assert "'torch.ops.aten.from_file.default' is not allowed: denied: reads a file" in message
