"""Service overhead benchmark: the HTTP service against the library, in the same run.

1. Upload-compile-download wall time through a real ``pteforge serve`` (one compile worker)
   against loading the same files and calling ``pteforge.manager.compile_programs`` in
   this process (target: service <= 1.10x library). Both sides are warmed up first.
2. The server process's peak RSS while a 512 MiB ``.pte`` is uploaded (``POST
   /v1/artifacts``) and downloaded (``GET /v1/artifacts/{id}/pte``) (target: < 100 MiB
   above idle). Validation of the upload runs in a disposable process, not counted.

Run: ``.venv/bin/python bench/service.py [--rounds 3] [--big-mib 512] [--layers 4]``
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.models import export_methods, save_programs
from tests.server.helpers import submit, wait_job
from tests.server.service import BENCH_ENV, ServiceProcess, wait_until

PLAN = {"methods": {"encode": {"partitioners": ["xnnpack"]}, "decode": {}}}


class Seq2Seq(nn.Module):
    """An encoder/decoder big enough that lowering, not plumbing, dominates."""

    def __init__(self, layers: int, d_model: int = 256, vocab: int = 1000) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        enc = nn.TransformerEncoderLayer(d_model, 8, 4 * d_model, dropout=0.0, batch_first=True)
        dec = nn.TransformerDecoderLayer(d_model, 8, 4 * d_model, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc, layers, enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec, layers)
        self.head = nn.Linear(d_model, vocab)

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.embed(tokens))  # type: ignore[no-any-return]

    def decode(self, tokens: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        return self.head(self.decoder(self.embed(tokens), memory))  # type: ignore[no-any-return]


def saved_seq2seq(layers: int, directory: Path, seed: int = 0) -> dict[str, Path]:
    """Export ``encode``/``decode`` and save each with ``torch.export.save``."""
    torch.manual_seed(seed)
    model = Seq2Seq(layers)
    inputs = {
        "encode": (torch.randint(0, 1000, (1, 32)),),
        "decode": (torch.randint(0, 1000, (1, 8)), torch.randn(1, 32, 256)),
    }
    programs = export_methods(model, inputs).programs
    return save_programs(programs, directory, f"{{method}}-{layers}.pt2")


def library_compile(files: dict[str, Path], out: Path) -> float:
    """Load the saved programs and compile them in-process; seconds taken."""
    from pteforge.backends import default_catalog
    from pteforge.manager import compile_programs

    start = time.perf_counter()
    programs = {name: torch.export.load(path) for name, path in files.items()}
    result = compile_programs(programs, PLAN, default_catalog())
    result.write(out)
    return time.perf_counter() - start


def service_compile(
    svc: ServiceProcess, token: str, files: dict[str, Path], out: Path
) -> dict[str, float]:
    """Upload, compile and download through HTTP; seconds per step and in total."""
    with svc.client(token, timeout=600) as client:
        start = time.perf_counter()
        parts = {name: (path.name, path.open("rb")) for name, path in files.items()}
        response = client.post("/v1/programs", files=parts)
        assert response.status_code == 201, response.text
        uploaded = time.perf_counter()
        job = wait_job(client, submit(client, response.json()["id"], PLAN)["id"], timeout=600)
        assert job["status"] == "succeeded", job
        compiled = time.perf_counter()
        url = f"/v1/artifacts/{job['artifact_id']}/pte"
        with client.stream("GET", url) as stream, out.open("wb") as f:
            for chunk in stream.iter_bytes():
                f.write(chunk)
        end = time.perf_counter()
    return {
        "upload": uploaded - start,
        "compile": compiled - uploaded,
        "download": end - compiled,
        "total": end - start,
    }


def big_pte(mib: int, path: Path) -> None:
    """A portable-only ``.pte`` holding about ``mib`` MiB of fp32 weights."""
    from pteforge.manager import to_edge

    cols = 4096
    rows = mib * 1024 * 1024 // (cols * 4)
    model = nn.Linear(cols, rows, bias=False).eval()
    program = torch.export.export(model, (torch.randn(1, cols),))
    path.write_bytes(to_edge(program).to_executorch().buffer)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


class PeakRss:
    """Samples a process's RSS every 20 ms while a block runs."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_kib(self.pid))

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def stream_big(svc: ServiceProcess, token: str, pte: Path, out: Path) -> dict[str, Any]:
    """Upload then download ``pte``; the server's idle and peak RSS in MiB."""
    assert svc.proc is not None
    pid = svc.proc.pid
    with svc.client(token, timeout=900) as client:
        client.get("/v1/backends").raise_for_status()
        idle = rss_kib(pid)
        with PeakRss(pid) as peak:
            with pte.open("rb") as f:
                response = client.post("/v1/artifacts", files={"pte": ("big.pte", f)})
            assert response.status_code == 201, response.text
            url = f"/v1/artifacts/{response.json()['id']}/pte"
            with client.stream("GET", url) as stream, out.open("wb") as f:
                for chunk in stream.iter_bytes():
                    f.write(chunk)
    assert out.stat().st_size == pte.stat().st_size
    return {"idle_mib": idle / 1024, "peak_mib": peak.peak / 1024}


def main() -> int:
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--big-mib", type=int, default=512)
    parser.add_argument("--part", choices=["all", "compile", "memory"], default="all")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pteforge-bench-"))
    # the compile warm-up on, the default of `pteforge serve`
    svc = ServiceProcess(work / "home", env={**BENCH_ENV, "PTEFORGE_COMPILE_WARMUP": "true"})
    svc.start()
    print("| measure | library | service | ratio / delta | target |")
    print("|---|---|---|---|---|")
    try:
        token = svc.admin_token
        assert token
        if args.part in ("all", "compile"):
            compile_row(svc, token, work, args.layers, args.rounds)
        if args.part in ("all", "memory"):
            memory_row(svc, token, work, args.big_mib)
    finally:
        svc.stop()
    return 0


# The line each standby lowering process logs once it can take a job (before issue 20's warm
# fork server: once its own warm-up finished).
_READY = re.compile(r"lowering process \d+ (?:warmed up|ready) in")


def ready_standbys(svc: ServiceProcess) -> int:
    """How many lowering processes so far reported themselves ready for a job."""
    return len(_READY.findall(svc.log_path.read_text()))


def wait_for_standbys(svc: ServiceProcess, jobs_done: int, timeout: float = 300) -> None:
    """Until the server log shows a ready lowering process for the next job."""
    wait_until(
        lambda: ready_standbys(svc) > jobs_done,
        timeout,
        "the standby lowering process to be ready",
        every=0.1,
    )


def compile_row(svc: ServiceProcess, token: str, work: Path, layers: int, rounds: int) -> None:
    """Interleaved rounds (library, then service, on freshly saved files each round so the
    service cannot answer from an earlier artifact); medians of each side and of the ratios."""
    warm = saved_seq2seq(1, work / "warm")
    library_compile(warm, work / "warm-lib.pte")
    service_compile(svc, token, warm, work / "warm-svc.pte")
    lib, svc_steps = [], []
    for i in range(rounds):
        files = saved_seq2seq(layers, work / f"round{i}", seed=i)
        # The worker's next lowering process warms up after each job; let it finish so its
        # CPU does not slow the library side down.
        wait_for_standbys(svc, jobs_done=i + 1)
        lib.append(library_compile(files, work / "lib.pte"))
        svc_steps.append(service_compile(svc, token, files, work / "svc.pte"))
    totals = [s["total"] for s in svc_steps]
    ratios = [t / lib_s for t, lib_s in zip(totals, lib, strict=True)]
    print(
        f"| upload+compile+download, {layers}-layer seq2seq, mixed plan (s), median of "
        f"{rounds} | {statistics.median(lib):.2f} | {statistics.median(totals):.2f} "
        f"| {statistics.median(ratios):.2f}x (rounds: {', '.join(f'{r:.2f}' for r in ratios)}) "
        "| <= 1.10x |",
        flush=True,
    )
    steps = {
        k: statistics.median(s[k] for s in svc_steps) for k in ("upload", "compile", "download")
    }
    detail = ", ".join(f"{k} {v:.2f}s" for k, v in steps.items())
    print(f"| service steps (medians) | | {detail} | | |", flush=True)


def memory_row(svc: ServiceProcess, token: str, work: Path, big_mib: int) -> None:
    pte = work / "big.pte"
    big_pte(big_mib, pte)
    mem = stream_big(svc, token, pte, work / "big-down.pte")
    delta = mem["peak_mib"] - mem["idle_mib"]
    print(
        f"| server RSS during {pte.stat().st_size / 2**20:.0f} MiB upload+download (MiB) "
        f"| idle {mem['idle_mib']:.0f} | peak {mem['peak_mib']:.0f} "
        f"| +{delta:.0f} MiB | < +100 MiB |",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
