"""A /v1 JSON body sent as something else (``curl -d`` without a content-type header sends
``application/x-www-form-urlencoded``) is a 415 naming the header and the fix; FastAPI left
it undecoded and answered 422 'body: Input should be a valid dictionary'."""

from __future__ import annotations

import httpx
import pytest

from tests.server.helpers import assert_error

BODIES = {
    "/v1/compile-jobs": b'{"program_id": "prog_none", "plan": {}}',
    "/v1/models/classifier/versions": b'{"artifact_id": "art_none"}',
}


@pytest.mark.parametrize("route", list(BODIES))
@pytest.mark.parametrize("sent", ["application/x-www-form-urlencoded", "text/plain", None])
def test_a_json_body_sent_as_another_type_is_415(
    admin: httpx.Client, route: str, sent: str | None
) -> None:
    request = admin.build_request("POST", route, content=BODIES[route])
    if sent is not None:  # httpx sends raw content without one
        request.headers["content-type"] = sent
    answer = admin.send(request)
    assert_error(answer, 415, "unsupported_media_type")
    got = f"Content-Type {sent!r}" if sent else "no Content-Type"
    assert answer.json()["error"]["message"] == (
        f"expected a JSON body with Content-Type: application/json, got {got} "
        "(with curl: -H 'content-type: application/json')"
    )


@pytest.mark.parametrize("sent", ["application/json; charset=utf-8", "application/merge+json"])
def test_json_content_types_with_parameters_or_suffixes_are_taken(
    admin: httpx.Client, sent: str
) -> None:
    answer = admin.post(
        "/v1/compile-jobs", content=BODIES["/v1/compile-jobs"], headers={"content-type": sent}
    )
    assert_error(answer, 404, "not_found")  # decoded: the program is what is missing
