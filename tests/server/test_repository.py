"""Triton's model repository extension over real HTTP and gRPC, read by unmodified
tritonclients: the index lists the caller's model names by version and method (another
project's never), and load answers once a model can run, as ready does."""

from __future__ import annotations

import httpx
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from pteforge.server.inference.repository import IndexEntry, _entry
from pteforge.server.inference.resolver import IndexedVersion, ResolvedArtifact
from tests.server.model_names import deploy, upload_scales
from tests.server.service import ServiceProcess

NAME = "repo-scale"


@pytest.fixture(scope="module")
def deployed(admin: httpx.Client) -> str:
    """``NAME`` at versions 1 and 2 in the admin's project."""
    scales = upload_scales(admin, [2.0, 3.0])
    deploy(admin, NAME, scales[2.0])
    deploy(admin, NAME, scales[3.0])
    return f"{NAME}.forward"


@pytest.fixture(scope="module")
def outsider(service: ServiceProcess) -> dict[str, str]:
    token = service.create_token("repo-outsider", "repo-other-project")
    return {"Authorization": f"Bearer {token}"}


def _auth(admin: httpx.Client) -> dict[str, str]:
    return {"Authorization": str(admin.headers["Authorization"])}


def _grpc(headers: dict[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in headers.items()}  # gRPC metadata keys


def _ours(index: list[dict[str, str]]) -> list[tuple[str, str, str, str]]:
    rows = [(m["name"], m["version"], m["state"], m.get("reason", "")) for m in index]
    return sorted(row for row in rows if row[0].startswith(NAME))


def test_the_index_lists_every_version_and_only_the_callers(
    service: ServiceProcess, admin: httpx.Client, deployed: str, outsider: dict[str, str]
) -> None:
    expected = [(deployed, "1", "READY", ""), (deployed, "2", "READY", "")]
    client = triton_http.InferenceServerClient(service.url.removeprefix("http://"))
    assert _ours(client.get_model_repository_index(headers=_auth(admin))) == expected
    assert _ours(client.get_model_repository_index(headers=outsider)) == []
    ready_only = admin.post("/v2/repository/index", json={"ready": True})
    assert _ours(ready_only.json()) == expected
    bad = admin.post("/v2/repository/index", json={"ready": "maybe"})
    assert bad.status_code == 400 and "ready" in bad.json()["error"]
    assert "model_repository" in admin.get("/v2").json()["extensions"]
    with triton_grpc.InferenceServerClient(f"127.0.0.1:{service.grpc_port}") as grpc:
        index = grpc.get_model_repository_index(headers=_grpc(_auth(admin)), as_json=True)
        assert _ours(index["models"]) == expected
        theirs = grpc.get_model_repository_index(headers=_grpc(outsider), as_json=True)
        assert _ours(theirs.get("models", [])) == []


def test_load_answers_once_the_model_can_run(
    service: ServiceProcess, admin: httpx.Client, deployed: str, outsider: dict[str, str]
) -> None:
    client = triton_http.InferenceServerClient(service.url.removeprefix("http://"))
    client.load_model(deployed, headers=_auth(admin))
    for model, headers in ((deployed, outsider), ("repo-absent.forward", _auth(admin))):
        with pytest.raises(InferenceServerException, match="no artifact or model"):
            client.load_model(model, headers=headers)
    with triton_grpc.InferenceServerClient(f"127.0.0.1:{service.grpc_port}") as grpc:
        grpc.load_model(deployed, headers=_grpc(_auth(admin)))
        with pytest.raises(InferenceServerException, match="NOT_FOUND"):
            grpc.load_model(deployed, headers=_grpc(outsider))


def test_load_refuses_config_and_file_overrides(
    service: ServiceProcess, admin: httpx.Client, deployed: str
) -> None:
    """Triton's load can replace a model's configuration or files; pteforge serves each
    version as stored, so it says so rather than answer 200 and ignore them."""
    client = triton_http.InferenceServerClient(service.url.removeprefix("http://"))
    with pytest.raises(InferenceServerException, match="load takes no overrides \\(config\\)"):
        client.load_model(deployed, headers=_auth(admin), config='{"max_batch_size": 8}')
    with pytest.raises(InferenceServerException, match=r"file:1/model\.pte"):
        client.load_model(
            deployed, headers=_auth(admin), config="{}", files={"file:1/model.pte": b"x"}
        )
    bad = admin.post(f"/v2/repository/models/{deployed}/load", json={"parameters": [1]})
    assert bad.status_code == 400 and "parameters" in bad.json()["error"]
    grpc = triton_grpc.InferenceServerClient(f"127.0.0.1:{service.grpc_port}")
    with grpc, pytest.raises(InferenceServerException, match=r"INVALID_ARGUMENT.*no overrides"):
        grpc.load_model(deployed, headers=_grpc(_auth(admin)), config="{}")


def test_a_method_this_host_cannot_run_is_unavailable_with_its_reason() -> None:
    artifact = ResolvedArtifact("0" * 64, lambda path: None, ("forward", "draw"),
                                unrunnable={"draw": ("VulkanBackend",)})  # fmt: skip
    indexed = IndexedVersion("painter", 3, artifact)
    assert _entry(indexed, "forward") == IndexEntry("painter.forward", "3", "READY", "")
    unavailable = _entry(indexed, "draw")
    assert (unavailable.state, unavailable.version) == ("UNAVAILABLE", "3")
    assert "VulkanBackend" in unavailable.reason and "cannot execute" in unavailable.reason
