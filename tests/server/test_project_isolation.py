"""Another project's things are as absent as missing ones, on every route (red-team pass).

Project B (the admin's) owns a program, a compile job, a profile job, two artifacts (one
compiled, with a bundle; one uploaded) and a model with a tokenizer. Project A's token asks
every HTTP route and every gRPC method about each of them: the answer must be a 404 and
read exactly as the answer about a missing thing of the same kind (the id substituted), so A
can neither use nor learn of B's things; B, asking the same (where asking changes nothing),
is answered. The routes come from the app's route table and the gRPC methods from the
service class: a new one without a case here fails ``test_every_route_has_a_case``.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
import tritonclient.grpc as triton
from fastapi.routing import APIRoute
from starlette.routing import Route
from tritonclient.utils import InferenceServerException

from pteforge.server.app import create_app
from pteforge.server.grpc_api.service import InferenceService
from pteforge.server.settings import Settings
from tests.models import small_mlp_programs
from tests.program_data import separated_program
from tests.server.helpers import app_routes, submit, upload_methods, wait_job
from tests.server.isolation_routes import (
    CHANGES,
    LISTINGS,
    MISSING,
    MODEL,
    READS,
    TOKENIZER_FILES,
    UNSCOPED,
    Call,
    Ids,
)
from tests.server.model_names import INPUT, INPUT_NAME, deploy, infer_body, scale_pte
from tests.server.service import ServiceProcess

_PREFIXES = ("/v1", "/v2", "/metrics", "/health")


def _api_routes(home: Path) -> set[tuple[str, str]]:
    """(method, path) of every /v1, /v2, /metrics and /health route (a plain Starlette route's
    automatic HEAD left out)."""
    found = set()
    for route in app_routes(create_app(Settings(home=home)).routes):
        if isinstance(route, Route) and route.path.startswith(_PREFIXES):
            methods = set(route.methods or ())
            if not isinstance(route, APIRoute) and "GET" in methods:
                methods.discard("HEAD")
            found |= {(m, route.path) for m in methods}
    return found


def test_every_route_has_a_case(tmp_path: Path) -> None:
    cased = set(READS) | set(CHANGES) | set(UNSCOPED) | {("GET", p) for p in LISTINGS}
    assert _api_routes(tmp_path) == cased


@pytest.fixture(scope="module")
def owned(admin: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """B's things (the admin's project), by key of :data:`MISSING`."""
    path = tmp_path_factory.mktemp("isolation") / "forward.pt2"
    torch.export.save(small_mlp_programs().programs["forward"], path)
    program = upload_methods(admin, {"forward": path}, name="iso-program")
    job = wait_job(admin, submit(admin, program["id"], {})["id"])
    assert job["status"] == "succeeded", job
    body = {"artifact_id": job["artifact_id"], "method": "forward", "iterations": 2}
    profile = admin.post("/v1/profile-jobs", json=body)
    assert profile.status_code == 202, profile.text
    assert wait_job(admin, profile.json()["id"])["status"] == "succeeded"
    uploaded = admin.post("/v1/artifacts", files={"pte": ("s.pte", scale_pte(2.0))})
    assert uploaded.status_code == 201, uploaded.text
    deploy(admin, MODEL, uploaded.json()["id"])
    put = admin.put(f"/v1/models/{MODEL}/versions/1/tokenizer", files=TOKENIZER_FILES)
    assert put.status_code == 201, put.text
    pair = separated_program(path.parent / "ptd", seed=0)
    files = {"pte": ("m.pte", pair.pte.read_bytes()), "ptd": ("m.ptd", pair.ptd.read_bytes())}
    separated = admin.post("/v1/artifacts", files=files)
    assert separated.status_code == 201, separated.text
    jobs = {"prog": program["id"], "job": job["id"], "pjob": profile.json()["id"]}
    artifacts = {"art": job["artifact_id"], "up": uploaded.json()["id"]}
    return jobs | artifacts | {"sep": separated.json()["id"], "model": MODEL}


@pytest.fixture(scope="module")
def intruder(service: ServiceProcess) -> Iterator[httpx.Client]:
    with service.client(service.create_token("iso-intruder", "iso-other-project")) as client:
        yield client


def _read(client: httpx.Client, request: dict[str, Any]) -> tuple[int, str]:
    answer = client.request(**request)
    return answer.status_code, answer.text


def _as_missing(text: str, owned: Ids) -> str:
    for key, value in owned.items():
        text = text.replace(value, MISSING[key])
    return text


def _assert_absent(client: httpx.Client, call: Call, owned: Ids) -> None:
    """A's answer about B's thing is a 404, the same as about a missing one."""
    status, text = _read(client, call(owned))
    assert status == 404, (call(owned), text)
    assert (status, _as_missing(text, owned)) == _read(client, call(MISSING)), call(owned)


def test_another_projects_things_are_as_absent_as_missing_ones(
    admin: httpx.Client, intruder: httpx.Client, owned: dict[str, str]
) -> None:
    for calls in READS.values():
        for call in calls:
            _assert_absent(intruder, call, owned)
            assert _read(admin, call(owned))[0] != 404, call(owned)  # B's are there
    for calls in CHANGES.values():
        for call in calls:
            _assert_absent(intruder, call, owned)
    for call in [c for calls in READS.values() for c in calls if c(owned)["method"] == "GET"]:
        if "/v1/" in call(owned)["url"]:
            assert _read(admin, call(owned))[0] in (200, 206), call(owned)  # unchanged by A
    for listing in LISTINGS:
        mine, theirs = admin.get(listing).text, intruder.get(listing).text
        assert [v for v in owned.values() if v in theirs] == [], (listing, theirs)
        assert any(v in mine for v in owned.values()), listing


def test_names_are_per_project(intruder: httpx.Client, owned: dict[str, str]) -> None:
    """A model name of B's is free in A: A's first version of it is version 1."""
    mine = intruder.post("/v1/artifacts", files={"pte": ("s.pte", scale_pte(3.0))})
    assert mine.status_code == 201, mine.text
    deployed = deploy(intruder, MODEL, mine.json()["id"])
    assert deployed["version"] == 1
    assert intruder.delete(f"/v1/models/{MODEL}/versions/1").status_code == 204


def _grpc_rpcs() -> set[str]:
    """The RPCs the service implements (the others answer UNIMPLEMENTED)."""
    return {
        name
        for name, value in vars(InferenceService).items()
        if name[0].isupper() and getattr(value, "__qualname__", "").startswith("InferenceService.")
    }


def _stream_infer(client: triton.InferenceServerClient, model: str, **kwargs: Any) -> Any:
    """One ``ModelStreamInfer`` request's result or error."""
    answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(lambda result, error: answers.put((result, error)), **kwargs)
    try:
        client.async_stream_infer(model, _grpc_inputs())
        result, error = answers.get(timeout=120)
    finally:
        client.stop_stream()
    if error is not None:
        raise error
    return result


def _grpc_inputs() -> list[triton.InferInput]:
    entry = triton.InferInput(INPUT_NAME, list(INPUT.shape), "FP32")
    entry.set_data_from_numpy(np.ascontiguousarray(INPUT))
    return [entry]


GrpcCall = Callable[[triton.InferenceServerClient, str, dict[str, str]], Any]
GRPC_SCOPED: dict[str, GrpcCall] = {
    "ModelReady": lambda c, m, h: c.is_model_ready(m, headers=h),
    "ModelMetadata": lambda c, m, h: c.get_model_metadata(m, headers=h, as_json=True),
    "ModelConfig": lambda c, m, h: c.get_model_config(m, headers=h, as_json=True),
    "ModelStatistics": lambda c, m, h: c.get_inference_statistics(m, headers=h, as_json=True),
    "ModelInfer": lambda c, m, h: c.infer(m, _grpc_inputs(), headers=h).as_numpy("output_0"),
    "RepositoryModelLoad": lambda c, m, h: c.load_model(m, headers=h),
    "ModelStreamInfer": lambda c, m, h: _stream_infer(c, m, headers=h).as_numpy("output_0"),
}
# RepositoryIndex names no model: it lists the caller's only (tests/server/test_repository.py)
GRPC_UNSCOPED = {"ServerLive", "ServerReady", "ServerMetadata", "RepositoryIndex"}


def _grpc_outcome(call: GrpcCall, client: Any, model: str, headers: dict[str, str]) -> str:
    try:
        return f"ok {call(client, model, headers)!r}"
    except InferenceServerException as exc:
        return f"{exc.status()} {exc.message()}"


def test_grpc_answers_about_another_projects_models_as_about_missing_ones(
    service: ServiceProcess, admin: httpx.Client, intruder: httpx.Client, owned: dict[str, str]
) -> None:
    assert _grpc_rpcs() == set(GRPC_SCOPED) | GRPC_UNSCOPED
    theirs = {"authorization": str(intruder.headers["Authorization"])}
    mine = {"authorization": str(admin.headers["Authorization"])}
    with triton.InferenceServerClient(f"127.0.0.1:{service.grpc_port}") as client:
        for rpc, call in GRPC_SCOPED.items():
            for key in ("up", "model"):
                model, missing = f"{owned[key]}.forward", f"{MISSING[key]}.forward"
                seen = _grpc_outcome(call, client, model, theirs)
                # a stream's error is a message of its response, without a status
                assert seen.startswith(("StatusCode.NOT_FOUND", "ok False", "None model")), seen
                assert seen.replace(owned[key], MISSING[key]) == _grpc_outcome(
                    call, client, missing, theirs
                ), rpc
                assert _grpc_outcome(call, client, model, mine).startswith("ok"), rpc


def _step(client: httpx.Client, artifact: str, sequence: str, **flags: bool) -> tuple[int, str]:
    body = infer_body()
    body["parameters"] = {"sequence_id": sequence, **flags}
    return _read(client, {"method": "POST", "url": f"/v2/models/{artifact}.forward/infer",
                          "json": body})  # fmt: skip


def test_sessions_are_per_project(
    admin: httpx.Client, intruder: httpx.Client, owned: dict[str, str]
) -> None:
    """A session is named within its project (the /v2 sequence id, and the generation
    session key ``X-Pteforge-Session``, both keyed by project in the pool): A, naming B's
    active sequence on a model of A's own, is answered as about an id never started, and
    ending it there leaves B's to go on."""
    mine = intruder.post("/v1/artifacts", files={"pte": ("s.pte", scale_pte(5.0))})
    assert mine.status_code == 201, mine.text
    artifact = mine.json()["id"]
    assert _step(admin, owned["up"], "iso-seq", sequence_start=True)[0] == 200
    for flags in ({}, {"sequence_end": True}):
        status, text = _step(intruder, artifact, "iso-seq", **flags)
        assert status == 400, text
        assert (status, text.replace("iso-seq", "iso-never")) == _step(
            intruder, artifact, "iso-never", **flags
        )
    assert _step(admin, owned["up"], "iso-seq")[0] == 200  # B's goes on
    assert _step(admin, owned["up"], "iso-seq", sequence_end=True)[0] == 200
    assert intruder.delete(f"/v1/artifacts/{artifact}").status_code == 204
