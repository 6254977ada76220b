"""Binary /v2 request headers seen before: a body with one is cut by what its first check
found instead of parsing and checking the header again.

A client calling one method in a loop with binary tensors (``tritonclient.http``) sends the
same JSON header every time: the same names, datatypes, shapes and sizes. Parsing and
checking it (``oip_codec.decode_infer_request``) cost 5.9 us of the server's CPU for a
one-input method, of about 140 us a small-model infer adds to a bare health check.
``HeaderPlans`` keeps, per method signature and exact header bytes, where each input's bytes
lie with its dtype and shape, the outputs asked for, the id and the parameters, and cuts
a later body by them; its binary section must still have exactly the bytes they need (or
the full decode answers, with its error). Only headers whose every input is binary are
kept (no JSON data), without sequence parameters (each call of a sequence names its own),
up to ``MAX_HEADER_BYTES`` long, ``MAX_PLANS`` of them (then it starts afresh).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.oip_codec import InferRequest, RequestedOutput, decode_infer_request

# Where one input's bytes lie in the binary section: its position among the signature's
# inputs, dtype, shape and size in bytes, in the order of the section.
_Slot = tuple[int, np.dtype, tuple[int, ...], int]


@dataclass(frozen=True)
class _Plan:
    signature: MethodSignature  # the very object it was checked against
    slots: tuple[_Slot, ...]
    binary_bytes: int
    id: str | None
    outputs: tuple[RequestedOutput, ...]
    parameters: dict[str, Any]

    def fits(self, signature: MethodSignature, binary_bytes: int) -> bool:
        """Whether a body with this plan's header, checked against ``signature`` and with
        ``binary_bytes`` after it, can be cut by it."""
        return signature is self.signature and binary_bytes == self.binary_bytes

    def cut(self, body: bytes, header_length: int) -> InferRequest:
        """The request of ``body``, whose header is this plan's."""
        view = memoryview(body)
        inputs: list[Any] = [None] * len(self.slots)
        offset = header_length
        for position, dtype, shape, size in self.slots:
            inputs[position] = np.frombuffer(view[offset : offset + size], dtype).reshape(shape)
            offset += size
        return InferRequest(self.id, inputs, list(self.outputs), dict(self.parameters))


def _plan(request: InferRequest, header: bytes, signature: MethodSignature) -> _Plan | None:
    """What decoding ``header`` found, if a body with it can be cut without a check."""
    entries = orjson.loads(header)["inputs"]  # decoded once already: valid
    if "sequence_id" in request.parameters or any(
        "binary_data_size" not in (entry.get("parameters") or {}) for entry in entries
    ):
        return None
    positions = {spec.name: i for i, spec in enumerate(signature.inputs)}
    slots = []
    for entry in entries:
        position = positions[str(entry["name"])]
        array = request.inputs[position]
        slots.append((position, array.dtype, array.shape, array.nbytes))
    outputs = tuple(request.outputs)
    binary_bytes = sum(slot[3] for slot in slots)
    return _Plan(signature, tuple(slots), binary_bytes, request.id, outputs, request.parameters)


class HeaderPlans:
    """``decode_infer_request`` for binary bodies, remembering the headers it has checked."""

    MAX_HEADER_BYTES, MAX_PLANS = 4096, 256

    def __init__(self) -> None:
        self._plans: dict[tuple[int, bytes], _Plan] = {}

    def decode(
        self, body: bytes, header_length: int | None, signature: MethodSignature
    ) -> InferRequest:
        """``decode_infer_request(body, header_length, signature)``, from a plan if the
        header was seen with this ``signature`` and the binary section has its size."""
        if header_length is None or not 0 < header_length <= self.MAX_HEADER_BYTES:
            return decode_infer_request(body, header_length, signature)
        key = (id(signature), bytes(body[:header_length]))
        plan = self._plans.get(key)
        if plan is not None and plan.fits(signature, len(body) - header_length):
            return plan.cut(body, header_length)
        request = decode_infer_request(body, header_length, signature)
        plan = _plan(request, key[1], signature)
        if plan is not None:
            if len(self._plans) >= self.MAX_PLANS:
                self._plans.clear()
            self._plans[key] = plan
        return request
