"""Remote execution of a compiled zoo method over ``/v2`` with unmodified clients.

Tensors are addressed by the names ``GET /v2/models/{model}`` gives (the program's own
names, or ``input_N`` where it has none), never by assumed names; inputs are matched to
them by position.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from tests.models import MultiMethod
from tests.runtime.helpers import triton_inputs

CLIENTS = ("triton-json", "triton-binary", "kserve-json", "kserve-binary")


@dataclass(frozen=True)
class Endpoint:
    """Where ``/v2`` is served and the bearer token to send."""

    url: str
    token: str

    def headers(self) -> dict[str, str]:
        """A fresh headers dict per call: tritonclient writes its own entries into it."""
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")


def metadata(endpoint: Endpoint, model: str) -> dict[str, Any]:
    """``GET /v2/models/{model}`` through tritonclient."""
    import tritonclient.http as triton

    client = triton.InferenceServerClient(url=endpoint.host)
    try:
        meta: dict[str, Any] = client.get_model_metadata(model, headers=endpoint.headers())
    finally:
        client.close()
    return meta


def tensor_names(meta: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Input and output names, in positional order, from ``/v2`` model metadata."""
    return [t["name"] for t in meta["inputs"]], [t["name"] for t in meta["outputs"]]


def triton_infer(
    endpoint: Endpoint, model: MultiMethod, artifact_id: str, method: str, binary: bool
) -> list[np.ndarray]:
    """Outputs of one ``tritonclient.http`` call on ``method``'s example inputs."""
    import tritonclient.http as triton

    served = f"{artifact_id}.{method}"
    inputs, outputs = tensor_names(metadata(endpoint, served))
    client = triton.InferenceServerClient(url=endpoint.host)
    try:
        result = client.infer(
            served,
            triton_inputs(model, method, binary, names=inputs),
            outputs=[triton.InferRequestedOutput(n, binary_data=binary) for n in outputs],
            headers=endpoint.headers(),
        )
    finally:
        client.close()
    return [np.asarray(result.as_numpy(name)) for name in outputs]


def kserve_infer(
    endpoint: Endpoint, model: MultiMethod, artifact_id: str, method: str, binary: bool
) -> list[np.ndarray]:
    """Outputs of one KServe ``InferenceRESTClient`` (v2) call, ordered by the metadata."""
    from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig

    served = f"{artifact_id}.{method}"
    names, outputs = tensor_names(metadata(endpoint, served))
    entries = []
    for name, tensor in zip(names, model.inputs[method], strict=True):
        array = tensor.numpy()
        datatype = "INT64" if array.dtype == np.int64 else "FP32"
        entry = InferInput(name, list(array.shape), datatype)
        entry.set_data_from_numpy(array, binary_data=binary)
        entries.append(entry)

    async def call() -> list[np.ndarray]:
        client = InferenceRESTClient(RESTConfig(protocol="v2"))
        try:
            response = await client.infer(
                endpoint.url,
                InferRequest(served, entries),
                model_name=served,
                headers=endpoint.headers(),
            )
        finally:
            await client.close()
        by_name = {out.name: np.asarray(out.as_numpy()) for out in response.outputs}
        return [by_name[name] for name in outputs]

    return asyncio.run(call())


Caller = Callable[[Endpoint, MultiMethod, str, str], list[np.ndarray]]


def callers() -> dict[str, Caller]:
    """Each client of ``CLIENTS`` as a function of (endpoint, model, artifact id, method)."""
    return {
        "triton-json": lambda e, m, a, n: triton_infer(e, m, a, n, binary=False),
        "triton-binary": lambda e, m, a, n: triton_infer(e, m, a, n, binary=True),
        "kserve-json": lambda e, m, a, n: kserve_infer(e, m, a, n, binary=False),
        "kserve-binary": lambda e, m, a, n: kserve_infer(e, m, a, n, binary=True),
    }


def max_difference(got: Sequence[np.ndarray], want: Sequence[torch.Tensor]) -> float:
    """Largest absolute difference between remote and in-process outputs (inf on mismatch)."""
    if len(got) != len(want):
        return float("inf")
    worst = 0.0
    for remote, local in zip(got, want, strict=True):
        expected = local.detach().numpy()
        if remote.shape != expected.shape or remote.dtype != expected.dtype:
            return float("inf")
        if remote.size:
            worst = max(worst, float(np.abs(remote.astype(np.float64) - expected).max()))
    return worst
