"""The /v2 server the runtime and session benchmarks measure, in a subprocess of its own.

The /v2 router over a ``RuntimePool`` of ``--workers`` single-threaded workers (and a wide
one for lone requests with ``--request-threads`` other than 1), with an
allow-all auth dependency (like the service's bearer check on a cache hit: no database, no
thread hop), on uvicorn with httptools and uvloop. Artifacts are served by name.

Run (``start_server`` does): ``python bench/v2_server.py --port P --workers N --artifacts
'{"name": "path.pte"}' --home DIR``
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def serve(
    port: int, workers: int, artifacts: Mapping[str, str], home: Path, request_threads: int = 1
) -> None:
    """Serve ``artifacts`` (name -> ``.pte`` path) on ``port`` until killed; a lone request
    gets ``request_threads`` XNNPACK threads (0: every core; 1: one, as under load)."""
    import hashlib

    import uvicorn
    from fastapi import FastAPI
    from prometheus_client import CollectorRegistry

    from pteforge.runtime import RuntimePool, describe_pte
    from pteforge.server.inference import (
        IndexedVersion,
        ResolvedArtifact,
        build_inference_router,
        new_inference_state,
    )

    resolved = {
        name: ResolvedArtifact(
            hashlib.sha256(Path(path).read_bytes()).hexdigest(),
            Path(path),
            tuple(describe_pte(path)),
        )
        for name, path in artifacts.items()
    }

    class Resolver:
        def resolve(
            self, principal: Any, artifact_id: str, version: str | None = None
        ) -> ResolvedArtifact | None:
            return resolved.get(artifact_id)

        def index(self, principal: Any) -> list[IndexedVersion]:
            return []  # artifact ids only: no model names

    async def allow_all(request: Any) -> str:
        return "bench"

    pool = RuntimePool(workers, 1 << 30, home, request_threads=request_threads or None)
    app = FastAPI()
    state = new_inference_state(Resolver(), pool, allow_all, CollectorRegistry())
    app.include_router(build_inference_router(state))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                http="httptools", loop="uvloop")  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as probe:
            probe.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
            return probe.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def start_server(
    artifacts: Mapping[str, Path], home: Path, workers: int = 1, request_threads: int = 1
) -> tuple[subprocess.Popen[bytes], int]:
    """The server process serving ``artifacts`` once it answers ready, and its port."""
    port = _free_port()
    spec = json.dumps({name: str(path) for name, path in artifacts.items()})
    command = [sys.executable, __file__, "--port", str(port), "--workers", str(workers),
               "--artifacts", spec, "--home", str(home),
               "--request-threads", str(request_threads)]  # fmt: skip
    process = subprocess.Popen(command)
    deadline = time.monotonic() + 600  # a loaded machine takes minutes to import torch
    while time.monotonic() < deadline:
        if _ready(port):
            return process, port
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("the /v2 server did not start")


def main() -> None:
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--artifacts", required=True, help="JSON: name -> .pte path")
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--request-threads", type=int, default=1, help="0: every core")
    args = parser.parse_args()
    serve(args.port, args.workers, json.loads(args.artifacts), args.home, args.request_threads)


if __name__ == "__main__":
    main()
