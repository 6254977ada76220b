"""Compiling small test models to XNNPACK ``.pte`` files and serving the /v2 router."""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import uvicorn
from fastapi import FastAPI, HTTPException, Request
from prometheus_client import CollectorRegistry

from pteforge.runtime import RuntimePool
from pteforge.server.inference import (
    IndexedVersion,
    ResolvedArtifact,
    build_inference_router,
    new_inference_state,
)
from tests.models import MLP, MultiMethod

TOKENS = {"tok-a": "project-a", "tok-b": "project-b"}


@dataclass
class Compiled:
    """A compiled test artifact and the model it came from."""

    path: Path
    sha256: str
    model: MultiMethod


def compile_pte(model: MultiMethod, path: Path) -> Compiled:
    """Lower every method of ``model`` with XnnpackPartitioner and write the ``.pte``."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    lowered = to_edge_transform_and_lower(model.programs, partitioner=[XnnpackPartitioner()])
    data = lowered.to_executorch().buffer
    path.write_bytes(data)
    return Compiled(path, hashlib.sha256(data).hexdigest(), model)


def dynamic_mlp_programs() -> MultiMethod:
    """``MLP`` exported with a dynamic batch dimension (1..8)."""
    import torch
    from torch.export import Dim, export

    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(2, 16)
    program = export(model, (x,), dynamic_shapes=({0: Dim("batch", min=1, max=8)},))
    return MultiMethod({"forward": program}, {"forward": (x,)}, {"forward": model})


def crashing_copy(compiled: Compiled) -> Compiled:
    """A copy of ``compiled`` mutated so that loading its method aborts the process."""
    from tests.runtime.mutations import crashing_flips, flip

    data = compiled.path.read_bytes()
    mutated = flip(data, *crashing_flips(data, 1)[0])
    path = compiled.path.with_name(f"crashing-{compiled.path.name}")
    path.write_bytes(mutated)
    return Compiled(path, hashlib.sha256(mutated).hexdigest(), compiled.model)


class MemoryResolver:
    """Artifacts by (project, artifact id); materialising from bytes counts its calls."""

    def __init__(self) -> None:
        self.artifacts: dict[tuple[str, str], ResolvedArtifact] = {}
        self.materialized = 0

    def add(self, project: str, artifact_id: str, compiled: Compiled, as_path: bool) -> None:
        data = compiled.path.read_bytes()

        def materialize(dest: Path) -> None:
            self.materialized += 1
            dest.write_bytes(data)

        source = compiled.path if as_path else materialize
        methods = tuple(compiled.model.programs)
        self.artifacts[(project, artifact_id)] = ResolvedArtifact(compiled.sha256, source, methods)

    def resolve(
        self, principal: Any, artifact_id: str, version: str | None = None
    ) -> ResolvedArtifact | None:
        return self.artifacts.get((str(principal), artifact_id))

    def index(self, principal: Any) -> list[IndexedVersion]:
        return []  # artifact ids only: no model names


async def bearer_auth(request: Request) -> str:
    """A trivial auth function: the project of a known bearer token, else 401."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or token not in TOKENS:
        raise HTTPException(status_code=401, detail="bad token")
    return TOKENS[token]


def build_app(resolver: MemoryResolver, pool: RuntimePool) -> tuple[FastAPI, CollectorRegistry]:
    registry = CollectorRegistry()
    app = FastAPI()
    app.include_router(
        build_inference_router(new_inference_state(resolver, pool, bearer_auth, registry))
    )
    return app, registry


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(app: FastAPI, deadline_s: float = 30.0, **options: Any) -> Iterator[str]:
    """Run ``app`` with uvicorn (and its ``options``) on a free local port in a thread; yield
    its base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            if httpx.get(f"{url}/v2/health/live", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not become ready")
        time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def triton_inputs(
    model: MultiMethod, method: str, binary: bool, names: Sequence[str] | None = None
) -> list[Any]:
    """``tritonclient.http.InferInput``s for ``method``'s example inputs, named ``names``
    (the served model's input names) or ``input_N`` when none are given."""
    import tritonclient.http as triton

    entries = []
    for i, tensor in enumerate(model.inputs[method]):
        array = tensor.numpy()
        datatype = "INT64" if array.dtype == np.int64 else "FP32"
        name = names[i] if names is not None else f"input_{i}"
        entry = triton.InferInput(name, list(array.shape), datatype)
        entry.set_data_from_numpy(array, binary_data=binary)
        entries.append(entry)
    return entries
