"""Client overhead benchmark: ``pteforge.client`` against raw ``httpx`` doing the same calls.

One real ``pteforge serve`` (SQLite, one compile worker, one runtime worker), one keep-alive
connection per side, both sides in this process, calls alternating one by one. For each call
the raw side does what a careful hand-written client would, with the same fast primitives
(orjson, numpy views, sha256 while streaming):

- ``infer``: a method of a small two-method model with binary tensors (2x512 fp32 in);
- ``get_artifact``: ``GET /v1/artifacts/{id}`` parsed (typed result vs ``.json()``);
- ``list_jobs``: ``GET /v1/jobs``;
- ``download``: the 1 MiB ``.pte`` streamed to a temporary file with its sha256 checked,
  then renamed into place.

Reported: the median wall time per call of each side and their ratio (target: client <
1.05x raw), and the median CPU time per call in this process (the client-side cost, which
the server's noise does not reach). Then the client's memory while a ``--big-mib`` upload
(read whole by the server, then refused) and download stream through it: peak RSS above the
level before (the RSS high-water mark is reset through ``/proc/self/clear_refs``), and the
peak of Python allocations (tracemalloc, a second run).

Run: ``.venv/bin/python bench/client.py [--calls 1000] [--big-mib 512]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pteforge.children.limits import memory_figure, reset_memory_peak
from pteforge.client import Artifact, Client, UploadRejectedError
from tests.models import save_programs, shared_linear_programs
from tests.server.service import ServiceProcess, store_artifact

PLAN = {"all": {"partitioners": ["xnnpack"]}}
HEADER = "Inference-Header-Content-Length"


def raw_infer(http: httpx.Client, model: str, name: str, array: np.ndarray) -> np.ndarray:
    """One OIP call with binary tensors, by hand."""
    header = orjson.dumps(
        {
            "inputs": [
                {
                    "name": name,
                    "datatype": "FP32",
                    "shape": list(array.shape),
                    "parameters": {"binary_data_size": array.nbytes},
                }
            ],
            "parameters": {"binary_data_output": True},
        }
    )
    response = http.post(
        f"/v2/models/{model}/infer",
        content=b"".join([header, array]),  # type: ignore[list-item]
        headers={HEADER: str(len(header)), "Content-Type": "application/octet-stream"},
    )
    response.raise_for_status()
    split = int(response.headers[HEADER])
    output = orjson.loads(response.content[:split])["outputs"][0]
    return np.frombuffer(response.content, np.float32, offset=split).reshape(output["shape"])


def raw_download(http: httpx.Client, artifact: Artifact, path: Path) -> None:
    """Stream to a temporary name, check the sha256, rename into place (what the client
    guarantees: the file appears only once verified)."""
    digest = hashlib.sha256()
    part = path.with_name(f".{path.name}.raw-part")
    with http.stream("GET", f"/v1/artifacts/{artifact.id}/pte") as response, part.open("wb") as f:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            f.write(chunk)
            digest.update(chunk)
    assert digest.hexdigest() == artifact.sha256
    os.replace(part, path)


def calls(
    client: Client, http: httpx.Client, artifact: Artifact, work: Path
) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """Per call: (client side, raw side)."""
    x = np.random.default_rng(0).standard_normal((2, 512)).astype(np.float32)
    name = artifact.methods[0].inputs[0].name
    method = artifact.methods[0].name
    model = f"{artifact.id}.{method}"
    return {
        "infer": (
            lambda: client.infer(artifact, method, [x]),
            lambda: raw_infer(http, model, name, x),
        ),
        "get_artifact": (
            lambda: client.get_artifact(artifact.id),
            lambda: http.get(f"/v1/artifacts/{artifact.id}").raise_for_status().json(),
        ),
        "list_jobs": (
            lambda: client.list_jobs(limit=20),
            lambda: http.get("/v1/jobs", params={"limit": 20}).raise_for_status().json(),
        ),
        "download": (
            lambda: client.download(artifact, work / "client.pte"),
            lambda: raw_download(http, artifact, work / "raw.pte"),
        ),
    }


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU seconds (this process) of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def overhead_table(
    table: dict[str, tuple[Callable[[], Any], Callable[[], Any]]], args: Any
) -> None:
    """Calls alternate one by one (the first side flips every pair), so both sides see the
    same moments of a noisy machine; medians of each side's calls."""
    print("| call | raw httpx ms | client ms | ratio | raw CPU us | client CPU us | CPU ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (ours, raw) in table.items():
        for _ in range(10):  # warm up both connections and caches
            ours(), raw()
        samples: dict[str, list[tuple[float, float]]] = {"client": [], "raw": []}
        for i in range(args.calls):
            pair = [("client", ours), ("raw", raw)]
            for side, fn in pair if i % 2 == 0 else pair[::-1]:
                samples[side].append(timed(fn))
        wall = {k: statistics.median(w for w, _ in v) * 1e3 for k, v in samples.items()}
        cpu = {k: statistics.median(c for _, c in v) * 1e6 for k, v in samples.items()}
        print(
            f"| {name} | {wall['raw']:.3f} | {wall['client']:.3f} | "
            f"{wall['client'] / wall['raw']:.3f} | {cpu['raw']:.0f} | {cpu['client']:.0f} | "
            f"{cpu['client'] / cpu['raw']:.3f} |",
            flush=True,
        )


def peak_above(fn: Callable[[], Any]) -> tuple[float, float]:
    """Seconds ``fn`` took and the RSS high-water mark above the RSS before it, in MiB."""
    if not reset_memory_peak():
        raise RuntimeError("cannot reset VmHWM through /proc/self/clear_refs")
    before = memory_figure("VmRSS") / 2**20
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start, memory_figure("VmHWM") / 2**20 - before


def peak_traced(fn: Callable[[], Any]) -> float:
    """The peak of Python allocations while ``fn`` runs, in MiB (tracemalloc)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def memory_rows(svc: ServiceProcess, client: Client, work: Path, mib: int) -> None:
    big = work / "big.pt2"
    with big.open("wb") as f:
        f.truncate(mib << 20)

    def upload() -> None:
        try:
            client.upload_program({"forward": big})
        except UploadRejectedError:
            return
        raise AssertionError("the server accepted a file of zeros as a program")

    artifact, _ = store_artifact(svc.home, (bytes(1 << 20) for _ in range(mib)), "bench")
    print(
        f"\n| {mib} MiB through the client | seconds | MiB/s | peak RSS above before (MiB) "
        "| peak Python allocations (MiB) |"
    )
    print("|---|---:|---:|---:|---:|")
    for what, fn in (
        ("upload (POST /v1/programs, refused after reading)", upload),
        ("download (sha256 checked)", lambda: client.download(artifact.id, work / "big.pte")),
    ):
        seconds, peak = peak_above(fn)
        traced = peak_traced(fn)
        print(f"| {what} | {seconds:.2f} | {mib / seconds:.0f} | {peak:.1f} | {traced:.2f} |")
    (work / "big.pte").unlink()
    client.delete_artifact(artifact.id)


def main() -> int:
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per side and call kind")
    parser.add_argument("--big-mib", type=int, default=512, help="0 skips the memory part")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pteforge-bench-client-") as tmp:
        work = Path(tmp)
        svc = ServiceProcess(
            work / "home",
            env={"PTEFORGE_COMPILE_WORKERS": "1", "PTEFORGE_RUNTIME_POOL_SIZE": "1"},
        )
        svc.start()
        try:
            assert svc.admin_token
            model = shared_linear_programs()
            with Client(svc.url, svc.admin_token) as client, svc.client(svc.admin_token) as http:
                files = save_programs(model.programs, work)
                artifact = client.compile(client.upload_program(files), PLAN)
                overhead_table(calls(client, http, artifact, work), args)
                if args.big_mib:
                    memory_rows(svc, client, work, args.big_mib)
        finally:
            svc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
