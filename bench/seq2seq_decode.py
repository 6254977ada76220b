"""Greedy decoding of an ``encoder`` + ``text_decoder`` artifact over /v2 sessions.

The loop a device runs: ``encoder`` once (the request that starts the session), then
``text_decoder`` one token per request with ``cache_position`` counting from 0, the last
step ending the session. Two callers, as unmodified clients send them:
``tritonclient.http`` (binary tensors) and ``tritonclient.grpc`` on one
``ModelStreamInfer`` stream. Tensors are addressed by the names ``/v2`` metadata gives.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from bench.seq2seq_models import (
    MAX_CACHE,
    Seq2Seq,
    exported_decode,
    reference_decode,
    with_other_source,
)
from tests.server.service import ServiceProcess

LOGITS_TOLERANCE = 1e-4
"""Largest difference allowed between a step's logits and the exported program's."""
_SESSION_IDS = itertools.count(1)


class Caller(Protocol):
    """One infer request: the model's first output."""

    def __call__(self, model: str, arrays: list[np.ndarray], **sequence: Any) -> np.ndarray: ...


class HttpCaller:
    """``tritonclient.http`` with binary tensors; a fresh headers dict per call."""

    def __init__(self, svc: ServiceProcess) -> None:
        import tritonclient.http as triton

        self.triton, self.token = triton, str(svc.admin_token)
        self.client = triton.InferenceServerClient(url=svc.url.removeprefix("http://"))
        self.names: dict[str, Any] = {}

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def __call__(self, model: str, arrays: list[np.ndarray], **sequence: Any) -> np.ndarray:
        if model not in self.names:
            self.names[model] = self.client.get_model_metadata(model, headers=self._headers())
        meta = self.names[model]
        inputs = []
        for spec, array in zip(meta["inputs"], arrays, strict=True):
            entry = self.triton.InferInput(spec["name"], list(array.shape), spec["datatype"])
            entry.set_data_from_numpy(array, binary_data=True)
            inputs.append(entry)
        out = meta["outputs"][0]["name"]
        wanted = [self.triton.InferRequestedOutput(out, binary_data=True)]
        result = self.client.infer(model, inputs, outputs=wanted, headers=self._headers(),
                                   **sequence)  # fmt: skip
        return np.asarray(result.as_numpy(out))

    def close(self) -> None:
        self.client.close()


class GrpcCaller:
    """``tritonclient.grpc``: every request on one ``ModelStreamInfer`` stream, in order."""

    def __init__(self, svc: ServiceProcess) -> None:
        import tritonclient.grpc as triton

        self.triton = triton
        self.headers = {"authorization": f"Bearer {svc.admin_token}"}
        self.client = triton.InferenceServerClient(f"127.0.0.1:{svc.grpc_port}")
        self.answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self.client.start_stream(self._answer, headers=self.headers)
        self.meta: dict[str, Any] = {}

    def _answer(self, result: Any, error: Any) -> None:
        self.answers.put((result, error))

    def __call__(self, model: str, arrays: list[np.ndarray], **sequence: Any) -> np.ndarray:
        if model not in self.meta:
            self.meta[model] = self.client.get_model_metadata(
                model, headers=self.headers, as_json=True
            )
        inputs = []
        for spec, array in zip(self.meta[model]["inputs"], arrays, strict=True):
            entry = self.triton.InferInput(spec["name"], list(array.shape), spec["datatype"])
            entry.set_data_from_numpy(array)
            inputs.append(entry)
        self.client.async_stream_infer(model, inputs, **sequence)
        result, error = self.answers.get(timeout=300)
        if error is not None:
            raise RuntimeError(str(error))
        return np.asarray(result.as_numpy(self.meta[model]["outputs"][0]["name"]))

    def close(self) -> None:
        self.client.stop_stream()
        self.client.close()


@dataclass
class Decode:
    """One session's greedy decode; ``run`` yields after each request (to interleave)."""

    call: Caller
    artifact: str
    work: Seq2Seq
    steps: int
    sid: int = field(default_factory=lambda: next(_SESSION_IDS))
    tokens: list[int] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)
    open: bool = False

    def _encode(self, **sequence: Any) -> np.ndarray:
        return self.call(f"{self.artifact}.encoder", [self.work.source.numpy()],
                         sequence_id=self.sid, **sequence)  # fmt: skip

    def run(self, end: bool = True) -> Iterator[None]:
        """Encode (starting the session), then up to ``steps`` tokens; with ``end`` the
        last request ends the session (an extra ``encoder`` call when EOS came early)."""
        states = self._encode(sequence_start=True)
        self.open, self.tokens, self.logits = True, [self.work.start], []
        yield
        for i in range(self.steps):
            last = end and i == self.steps - 1
            step = [np.array([[self.tokens[-1]]]), states, np.array([i])]
            self.open = not last  # a failed last step ends the session too
            out = self.call(f"{self.artifact}.text_decoder", step, sequence_id=self.sid,
                            sequence_end=last)  # fmt: skip
            self.logits.append(out[0, -1])
            self.tokens.append(int(out[0, -1].argmax()))
            yield
            if self.tokens[-1] == self.work.eos:
                break
        if end:
            self.close()

    def close(self) -> None:
        """End the session if it is still open (after a failure, or EOS before the end)."""
        if self.open:
            self.open = False
            self._encode(sequence_end=True)


@dataclass
class Check:
    """One column of the table: did the decode match, and the error if it failed."""

    name: str
    differences: list[str] = field(default_factory=list)
    error: str = ""
    tokens: int = 0
    worst: float = 0.0

    def compare(self, decode: Decode) -> None:
        """``decode``'s tokens against the eager model's greedy tokens on the same input,
        and its logits against the exported programs' own (run eagerly)."""
        tokens, _ = reference_decode(decode.work, decode.steps)
        self.tokens = len(tokens) - 1
        if decode.tokens != tokens:
            self.differences.append(f"tokens {decode.tokens} != eager {tokens}")
        _, logits = exported_decode(decode.work, decode.steps)
        for got, want in zip(decode.logits, logits, strict=False):
            self.worst = max(self.worst, float(np.abs(got - want.numpy()).max()))
        if self.worst > LOGITS_TOLERANCE:
            self.differences.append(f"logits {self.worst:.1e} from the exported program's")

    def describe(self) -> str:
        """``equal (16 tokens, logits 3e-07)``, the differences, or the error."""
        if self.error:
            return f"error: {self.error[:300]}"
        if self.differences:
            return "NO: " + "; ".join(self.differences)[:300]
        return f"equal ({self.tokens} tokens, logits {self.worst:.0e})"


def _drain(*decodes: Iterator[None]) -> None:
    """Advance the decodes in turn, one request each, until all are done."""
    live = list(decodes)
    while live:
        live = [d for d in live if next(d, StopIteration) is not StopIteration]


CheckRun = Callable[[list[Decode]], None]
"""A check: it appends each ``Decode`` it starts to the list, then runs them."""


def run_checks(svc: ServiceProcess, artifact: str, work: Seq2Seq, steps: int) -> list[Check]:
    """The four session checks of one artifact: HTTP, gRPC, interleaved, restarted."""
    http, grpc = HttpCaller(svc), GrpcCaller(svc)
    checks: dict[str, CheckRun] = {
        "HTTP tokens": lambda made: _single(made, Decode(http, artifact, work, steps)),
        "gRPC tokens": lambda made: _single(made, Decode(grpc, artifact, work, steps)),
        "interleaved": lambda made: _interleaved(made, http, grpc, artifact, work, steps),
        "restart": lambda made: _restarted(made, grpc, artifact, work, steps),
    }
    try:
        return [_checked(name, run) for name, run in checks.items()]
    finally:
        http.close()
        grpc.close()


def _checked(name: str, run: CheckRun) -> Check:
    check, made = Check(name), list[Decode]()
    try:
        run(made)
        for decode in made:
            check.compare(decode)
    except Exception as exc:  # a failed request is the cell's result, shown as such
        check.error = f"{type(exc).__name__}: {exc}"
        for decode in made:  # free the sessions it left open, for the next checks
            with contextlib.suppress(Exception):
                decode.close()
    return check


def _single(made: list[Decode], decode: Decode) -> None:
    made.append(decode)
    _drain(decode.run())


def _interleaved(made: list[Decode], http: Caller, grpc: Caller, artifact: str,
                 work: Seq2Seq, steps: int) -> None:  # fmt: skip
    """Three sessions on different inputs, one step of each in turn: one over gRPC, two
    over HTTP (two on the same transport, one on the other)."""
    made += [
        Decode(grpc, artifact, work, steps),
        Decode(http, artifact, with_other_source(work, 1), steps),
        Decode(http, artifact, with_other_source(work, 2), steps),
    ]
    _drain(*(decode.run() for decode in made))


def _restarted(made: list[Decode], grpc: Caller, artifact: str, work: Seq2Seq,
               steps: int) -> None:  # fmt: skip
    """Half a decode on another input, left open, then ``sequence_start`` on the same id:
    the full decode must start from the initial cache (only that one is compared)."""
    half = Decode(grpc, artifact, with_other_source(work, 3), steps // 2)
    _drain(half.run(end=False))
    again = Decode(grpc, artifact, work, steps, sid=half.sid)
    made.append(again)
    _drain(again.run())


CLEAR_ERROR_PARTS = ("'text_decoder'", "aten::index_put", "out of bounds")
"""What the answer to a step past the static cache must name: the method, the operator
(a portable kernel: XNNPACK leaves ``index_put`` to them) and why."""


def past_the_cache(svc: ServiceProcess, artifact: str, work: Seq2Seq) -> str:
    """Decode past ``MAX_CACHE`` over HTTP (a device's loop without a length check): whether
    the answer to the first step past it names the method, the operator and the reason."""
    http = HttpCaller(svc)
    decode = Decode(http, artifact, replace(work, eos=-1), MAX_CACHE + 2)
    try:
        _drain(decode.run())
    except Exception as exc:  # the expected failure
        message = str(exc)
        decode.close()
        missing = [part for part in CLEAR_ERROR_PARTS if part not in message]
        first = message.split("\n")[0][:120]
        return f"NO, lacks {missing}: {first}" if missing else f"yes ({first})"
    finally:
        http.close()
    return "NO: no error past the cache"
