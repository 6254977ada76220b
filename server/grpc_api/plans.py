"""``ModelInferRequest`` layouts seen before: a request with one is cut by what its first
check found instead of checking its tensors again (gRPC's twin of ``/v2``'s
``runtime.oip_headers.HeaderPlans``).

A client calling one method in a loop (``tritonclient.grpc`` with raw contents) sends the
same tensor descriptions every time: names, datatypes, shapes, the outputs it asks for.
Checking them (``codec.decode_request``) cost about 11 us of the server's CPU for a
one-input method. ``RequestPlans`` keeps, per method signature and exact descriptions (each
input's serialized ``InferInputTensor``, the outputs' names), each input's place, dtype and
shape, and cuts a later request's raw contents by them; each must still have exactly the
bytes its shape needs (or the full decode answers, with its error). Only requests whose
every input is raw and that carry no parameters are kept (sequence steps name their own),
whose descriptions take at most ``MAX_KEY_BYTES`` (a description may carry typed contents
the decode ignores, or an output named again and again: never kept), ``MAX_PLANS`` of
them (then it starts afresh).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.oip_codec import InferRequest, RequestedOutput
from pteforge.server.grpc_api.codec import decode_request

# One input: its position among the signature's inputs, dtype and shape, in the order of
# the request's inputs (and of its raw contents).
_Slot = tuple[int, np.dtype, tuple[int, ...]]
_Key = tuple[int, tuple[bytes, ...], tuple[str, ...]]


@dataclass(frozen=True)
class _Plan:
    signature: MethodSignature  # the very object it was checked against
    slots: tuple[_Slot, ...]
    sizes: tuple[int, ...]  # the bytes of each raw content
    outputs: tuple[RequestedOutput, ...]

    def cut(self, raw: list[bytes], request_id: str) -> InferRequest:
        """The decoded request whose raw contents are ``raw`` (of this plan's ``sizes``)."""
        inputs: list[Any] = [None] * len(self.slots)
        for (position, dtype, shape), data in zip(self.slots, raw, strict=True):
            inputs[position] = np.frombuffer(data, dtype).reshape(shape)
        return InferRequest(request_id or None, inputs, list(self.outputs), {})


def _key(request: Any, signature: MethodSignature) -> _Key:
    inputs = tuple([tensor.SerializeToString() for tensor in request.inputs])
    outputs = tuple([wanted.name for wanted in request.outputs]) if request.outputs else ()
    return id(signature), inputs, outputs


def _plan(request: Any, decoded: InferRequest, signature: MethodSignature) -> _Plan:
    positions = {spec.name: i for i, spec in enumerate(signature.inputs)}
    slots = []
    for tensor in request.inputs:
        position = positions[tensor.name]
        array = decoded.inputs[position]
        slots.append((position, array.dtype, array.shape))
    sizes = tuple(map(len, request.raw_input_contents))
    return _Plan(signature, tuple(slots), sizes, tuple(decoded.outputs))


class RequestPlans:
    """``decode_request`` for raw-content requests, remembering the layouts it has checked."""

    MAX_KEY_BYTES, MAX_PLANS = 4096, 256

    def __init__(self) -> None:
        self._plans: dict[_Key, _Plan] = {}

    def decode(self, request: Any, signature: MethodSignature) -> InferRequest:
        """``decode_request(request, signature)``, from a plan if its layout was seen with
        this ``signature`` and each raw content has the size it had."""
        raw = list(request.raw_input_contents)
        if not raw or request.parameters or len(raw) != len(request.inputs):
            return decode_request(request, signature)
        key = _key(request, signature)
        plan = self._plans.get(key)
        sizes = tuple(map(len, raw))
        if plan is not None and plan.signature is signature and plan.sizes == sizes:
            return plan.cut(raw, request.id)
        decoded = decode_request(request, signature)
        if sum(map(len, key[1])) + sum(map(len, key[2])) <= self.MAX_KEY_BYTES:
            if len(self._plans) >= self.MAX_PLANS:
                self._plans.clear()
            self._plans[key] = _plan(request, decoded, signature)
        return decoded
