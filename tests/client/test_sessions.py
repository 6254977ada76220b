"""Sessions over the sequence extension, where the server announces it (``GET /v2`` lists
``sequence``); until then the client refuses to open one, and the session test is skipped."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from pteforge.client import Artifact, Client, PteforgeError, SessionsUnavailableError
from tests.manager.stateful import cached_programs, eager_prefill_then_decode
from tests.models import MultiMethod
from tests.server.service import ServiceProcess


@pytest.fixture(scope="module")
def extensions(service: ServiceProcess, token: str) -> set[str]:
    """The protocol extensions the server under test announces."""
    with service.client(token) as raw:
        return set(raw.get("/v2").raise_for_status().json().get("extensions", []))


@pytest.fixture(scope="module")
def stateful(service: ServiceProcess, token: str) -> Iterator[tuple[Artifact, MultiMethod]]:
    model = cached_programs()
    with Client(service.url, token) as client:
        program = client.upload_program(model.programs, name="cached-projection")
        yield client.compile(program, {"share_mutable_buffers": True}), model


def test_a_session_shares_state_across_methods(
    client: Client, extensions: set[str], request: pytest.FixtureRequest
) -> None:
    if "sequence" not in extensions:
        pytest.skip(f"the server announces no sessions yet (GET /v2 extensions: {extensions})")
    artifact, model = request.getfixturevalue("stateful")
    prefill_in, decode_in = model.inputs["prefill"][0], model.inputs["decode"][0]
    expected = eager_prefill_then_decode(model).numpy()
    with client.session(artifact) as session:
        session.infer("prefill", [prefill_in])
        (after_prefill,) = session.infer("decode", [decode_in], end=True)
    np.testing.assert_allclose(after_prefill, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(PteforgeError, match="has ended"):
        session.infer("decode", [decode_in])  # refused here; nothing is sent
    (stateless,) = client.infer(artifact, "decode", [decode_in])  # initial state: no prefill
    assert not np.allclose(stateless, expected)
    with client.session(artifact) as again:  # a new sequence starts from the initial state
        (fresh,) = again.infer("decode", [decode_in], end=True)
    np.testing.assert_allclose(fresh, stateless, rtol=1e-6, atol=1e-6)


def test_no_session_where_the_server_has_none(
    client: Client, artifact: Artifact, extensions: set[str]
) -> None:
    if "sequence" in extensions:
        pytest.skip("the server has sessions")
    with pytest.raises(SessionsUnavailableError, match="sequence"), client.session(artifact):
        pass
