"""Model names over real HTTP: versions created, listed, read and deleted within a project;
/v2 serving a name's latest version or a pinned one, also while the latest changes."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.server.helpers import assert_error
from tests.server.model_names import (
    INPUT_NAME,
    deploy,
    infer_body,
    served_scale,
    upload_scales,
)
from tests.server.service import ServiceProcess


@pytest.fixture(scope="module")
def scales(admin: httpx.Client) -> dict[float, str]:
    """Artifacts ``x * 1`` ... ``x * 4`` in the admin's project."""
    return upload_scales(admin, [1.0, 2.0, 3.0, 4.0])


def _deploy(client: httpx.Client, name: str, artifact_id: str) -> int:
    created = deploy(client, name, artifact_id)
    assert set(created) == {"name", "version", "artifact_id", "created_at"}
    assert (created["name"], created["artifact_id"]) == (name, artifact_id)
    return int(created["version"])


def test_versions_are_created_listed_read_and_deleted(
    admin: httpx.Client, scales: dict[float, str]
) -> None:
    assert [_deploy(admin, "crud", scales[s]) for s in (1.0, 2.0)] == [1, 2]
    listed = admin.get("/v1/models").json()
    assert listed["object"] == "list"
    (entry,) = [m for m in listed["data"] if m["id"] == "crud"]
    assert entry["object"] == "model" and entry["latest_version"] == 2
    assert entry["owned_by"] == "default" and isinstance(entry["created"], int)
    detail = admin.get("/v1/models/crud").json()
    assert [(v["version"], v["artifact_id"]) for v in detail["versions"]] == [
        (1, scales[1.0]),
        (2, scales[2.0]),
    ]
    assert admin.delete("/v1/models/crud/versions/2").status_code == 204
    assert_error(admin.delete("/v1/models/crud/versions/2"), 404, "not_found")
    assert admin.get("/v1/models/crud").json()["latest_version"] == 1
    assert _deploy(admin, "crud", scales[3.0]) == 3  # 2 is never handed out again
    assert_error(admin.get("/v1/models/no-such-model"), 404, "not_found")


@pytest.mark.parametrize("name", ["has.dot", "-leading-hyphen", "x" * 65, "sp%20ace"])
def test_names_follow_the_rule(admin: httpx.Client, scales: dict[float, str], name: str) -> None:
    answer = admin.post(f"/v1/models/{name}/versions", json={"artifact_id": scales[1.0]})
    assert_error(answer, 422, "invalid_request")
    assert "[A-Za-z0-9][A-Za-z0-9_-]{0,63}" in answer.json()["error"]["message"]


def test_unknown_artifact_is_404(admin: httpx.Client) -> None:
    answer = admin.post("/v1/models/ghost/versions", json={"artifact_id": "art_missing"})
    assert_error(answer, 404, "not_found")


def test_models_are_project_scoped(
    service: ServiceProcess, admin: httpx.Client, scales: dict[float, str]
) -> None:
    _deploy(admin, "scoped", scales[1.0])
    token = service.create_token("models-outsider", "models-other-project")
    with service.client(token) as outsider:
        assert_error(outsider.get("/v1/models/scoped"), 404, "not_found")
        assert "scoped" not in [m["id"] for m in outsider.get("/v1/models").json()["data"]]
        assert_error(outsider.delete("/v1/models/scoped/versions/1"), 404, "not_found")
        stolen = outsider.post("/v1/models/mine/versions", json={"artifact_id": scales[1.0]})
        assert_error(stolen, 404, "not_found")
        answer = outsider.post("/v2/models/scoped.forward/infer", json=infer_body())
        assert answer.status_code == 404, answer.text


def test_an_artifact_a_version_serves_is_kept(
    admin: httpx.Client, scales: dict[float, str]
) -> None:
    version = _deploy(admin, "keeper", scales[4.0])
    refused = admin.delete(f"/v1/artifacts/{scales[4.0]}")
    assert_error(refused, 409, "conflict")
    assert "'keeper'" in refused.json()["error"]["message"]
    assert admin.get(f"/v1/artifacts/{scales[4.0]}").status_code == 200
    assert admin.delete(f"/v1/models/keeper/versions/{version}").status_code == 204


def test_v2_serves_the_latest_version_or_a_pinned_one(
    admin: httpx.Client, scales: dict[float, str]
) -> None:
    first = _deploy(admin, "pinned", scales[1.0])
    assert served_scale(admin.post("/v2/models/pinned.forward/infer", json=infer_body())) == 1.0
    second = _deploy(admin, "pinned", scales[2.0])
    latest = admin.post("/v2/models/pinned.forward/infer", json=infer_body())
    assert served_scale(latest) == 2.0  # at once: this server forgot the name's resolution
    old = admin.post(f"/v2/models/pinned.forward/versions/{first}/infer", json=infer_body())
    assert served_scale(old) == 1.0
    # each answer names the version that answered (it was "1" for every model and version)
    assert [latest.json()["model_version"], old.json()["model_version"]] == [
        f"{second}",
        f"{first}",
    ]
    for path, version in (
        ("", second),
        (f"/versions/{second}", second),
        (f"/versions/{first}", first),
    ):
        assert admin.get(f"/v2/models/pinned.forward{path}/ready").json()["ready"] is True
        metadata = admin.get(f"/v2/models/pinned.forward{path}").json()
        assert [t["name"] for t in metadata["inputs"]] == [INPUT_NAME]
        assert metadata["versions"] == [str(version)]  # the version that answers
    assert admin.get("/v2/models/pinned.forward/versions/9").status_code == 404
    not_numbers = [
        admin.get("/v2/models/pinned.forward/versions/latest"),
        admin.post("/v2/models/pinned.forward/versions/latest/infer", json=infer_body()),
    ]
    for answer in not_numbers:  # 400 naming the version, as /v2 generate answers
        assert answer.status_code == 400 and "'latest'" in answer.json()["error"], answer.text
    negative = admin.post("/v2/models/pinned.forward/versions/-1/infer", json=infer_body())
    assert negative.json()["error"] == (
        "model version '-1' must be a number (1, 2, ...: digits only)"
    )
    nomethod = admin.get("/v2/models/pinned.nomethod")
    assert nomethod.status_code == 404  # names the version it looked in
    assert nomethod.json()["error"] == (
        f"model 'pinned.nomethod': 'pinned' version {second} has no method 'nomethod' (forward)"
    )
    by_id = admin.post(f"/v2/models/{scales[1.0]}.forward/infer", json=infer_body())
    assert served_scale(by_id) == 1.0  # artifact ids keep working
    assert by_id.json()["model_version"] == "1"  # an artifact has no versions
    assert admin.delete(f"/v1/models/pinned/versions/{second}").status_code == 204
    after = admin.post("/v2/models/pinned.forward/infer", json=infer_body())
    assert served_scale(after) == 1.0  # at once too: the one before is the latest again


def test_switching_the_latest_version_fails_no_request(
    service: ServiceProcess, admin: httpx.Client, scales: dict[float, str]
) -> None:
    _deploy(admin, "rolling", scales[1.0])
    stop, failures, served = threading.Event(), [], set()
    answers = threading.Semaphore(0)  # one release per answer, so switches interleave with them

    def keep_inferring() -> None:
        with service.client(admin.headers["Authorization"].removeprefix("Bearer ")) as client:
            while not stop.is_set():
                answer = client.post("/v2/models/rolling.forward/infer", json=infer_body())
                if answer.status_code != 200:
                    failures.append(answer.text)
                else:
                    served.add(served_scale(answer))
                answers.release()

    inferring = [threading.Thread(target=keep_inferring) for _ in range(8)]  # 8 clients
    for thread in inferring:
        thread.start()
    try:
        for switch in range(20):  # issue 20: 20 switches of the latest version under 8 clients
            # each switch waits for an answer since the last one: requests are in flight
            assert answers.acquire(timeout=120), "no infer answer within 120 s"
            _deploy(admin, "rolling", scales[(2.0, 3.0, 1.0)[switch % 3]])
        assert answers.acquire(timeout=120), "no infer answer after the last switch"
    finally:
        stop.set()
        for thread in inferring:
            thread.join()
    assert failures == []
    assert served <= {1.0, 2.0, 3.0} and served


@pytest.mark.parametrize("version", ["99999999999999999999", "9" * 5000, "%C2%B2", "2147483648"])
def test_a_version_no_version_can_have_is_4xx_on_every_route(
    admin: httpx.Client, scales: dict[float, str], version: str
) -> None:
    """Past 64 bits SQLite refuses to bind the number (``OverflowError``), past 4300 digits
    ``int()`` refuses it, and ``int('²')`` too though ``'²'.isdigit()``: each was a 500 (a
    reset connection on /v2 infer). Now the version does not exist (404) or, in a ``/v2``
    path, cannot (400), and the server answers on."""
    _deploy(admin, "bounded", scales[1.0])
    pinned = f"/v2/models/bounded.forward/versions/{version}"
    tokenizer = {"tokenizer": ("t.json", b'{"model": {"vocab": {"a": 0}}}')}
    answers = [
        admin.get(pinned),
        admin.post(f"{pinned}/infer", json=infer_body()),
        admin.post(f"/v2/models/bounded/versions/{version}/generate", json={"text_input": "a"}),
        admin.get(f"/v1/models/bounded/versions/{version}/tokenizer"),
        admin.put(f"/v1/models/bounded/versions/{version}/tokenizer", files=tokenizer),
        admin.delete(f"/v1/models/bounded/versions/{version}"),
    ]
    if len(version) < 100:  # a model field holds at most 200 characters
        model = f"bounded:{version.replace('%C2%B2', '²')}"
        answers.append(admin.post("/v1/completions", json={"model": model, "prompt": "a"}))
    assert [(a.request.url.path[:60], a.status_code) for a in answers if a.status_code >= 500] == []
    assert all(400 <= a.status_code < 500 for a in answers), [a.text for a in answers]
    assert admin.get("/v1/models/bounded").status_code == 200
