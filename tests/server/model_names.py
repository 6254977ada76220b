"""Tiny `.pte` artifacts that tell their versions apart (``forward(x) = x * scale``),
uploaded to a real service and deployed as model versions, and /v2 calls by model name."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np

INPUT = np.arange(6, dtype=np.float32).reshape(2, 3)
INPUT_NAME = "input_0"  # an uploaded .pte has no graph signature: positional names


def scale_pte(scale: float) -> bytes:
    """A `.pte` whose ``forward(x)`` is ``x * scale`` (portable operators)."""
    import torch
    from executorch.exir import to_edge

    class Scale(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * scale

    program = torch.export.export(Scale(), (torch.from_numpy(INPUT),))
    return bytes(to_edge(program).to_executorch().buffer)


def upload_scales(client: httpx.Client, scales: list[float]) -> dict[float, str]:
    """Each scale's artifact id, uploaded as a `.pte` built here."""
    ids = {}
    for scale in scales:
        answer = client.post("/v1/artifacts", files={"pte": ("scale.pte", scale_pte(scale))})
        assert answer.status_code == 201, answer.text
        ids[scale] = answer.json()["id"]
    return ids


def deploy(client: httpx.Client, name: str, artifact_id: str) -> dict[str, Any]:
    """Deploy ``artifact_id`` as the next version of model ``name``: the version created."""
    answer = client.post(f"/v1/models/{name}/versions", json={"artifact_id": artifact_id})
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def infer_body() -> dict[str, Any]:
    """An OIP JSON request with :data:`INPUT` as the method's one input."""
    tensor = {"name": INPUT_NAME, "shape": list(INPUT.shape), "datatype": "FP32"}
    return {"inputs": [{**tensor, "data": INPUT.reshape(-1).tolist()}]}


def served_scale(answer: httpx.Response) -> float:
    """The scale of the artifact that answered an infer request for :data:`INPUT`."""
    assert answer.status_code == 200, answer.text
    data = np.asarray(answer.json()["outputs"][0]["data"], dtype=np.float32)
    return float(data[1] / INPUT.reshape(-1)[1])
