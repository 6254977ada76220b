"""Server and runtime-worker CPU per request: what one gRPC ModelInfer, one HTTP /v2 infer
and one streamed token cost, measured as CPU time rather than wall time (the 2-core machine
is shared, so latency swings with the load; the CPU a request takes does not, much).

One real ``pteforge serve`` (``BENCH_ENV``: one runtime worker) per tree given with
``--tree`` (default: this checkout), all started side by side and measured in interleaved
rounds, so an A/B of two commits is one command::

    git worktree add /tmp/pf-old <commit>
    .venv/bin/python bench/server_cpu.py --tree /tmp/pf-old --tree .

Each round, per server: ``--requests`` bare gRPC ServerLive calls and HTTP health checks
(the floor the protocol stacks set), as many gRPC ModelInfer calls of the small XNNPACK
MLP (raw tensor contents, a bare grpc stub) and HTTP /v2 infer calls (binary tensors, one
raw keep-alive socket: ``bench/v2_wire``), and ``--streams`` streamed ``/v1/completions`` of
``--max-tokens`` tokens of ``bench/generate_lm``'s Llama (greedy, ``http.client``). The
server's CPU is the run time of its threads (``/proc/PID/task/*/schedstat``), the worker's
that of the runtime worker (uid 64999). Reported: the median over rounds of microseconds of
CPU per request (per token for the streams), each side. ``--profile DIR`` first records
``py-spy`` (raw, 500 Hz; as root) of the first tree's server and worker under each call.

Run: ``.venv/bin/python bench/server_cpu.py [--tree DIR]... [--rounds 4] [--requests 2000]``
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.generate import MODEL, PROMPT, deploy
from bench.generate_lm import LmSize, build
from bench.grpc_overhead import upload_pte
from bench.runtime import _compile
from bench.timing import single_threaded_workdir
from bench.v2_wire import Connection, infer_request
from tests.models import small_mlp_programs
from tests.server.service import BENCH_ENV, ServiceProcess, process_table

RUNTIME_UID = 64999


def runtime_workers(server: int) -> list[int]:
    """The runtime worker processes under ``server`` (they run as uid 64999)."""
    table = process_table()
    found, frontier = [], [server]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in table.items():
            if ppid == parent:
                frontier.append(pid)
                found.append(pid)
    return [pid for pid in found if _uid(pid) == RUNTIME_UID]


def cpu_s(pid: int) -> float:
    """CPU seconds the threads of ``pid`` alive now have run (``schedstat``: nanoseconds,
    where ``/proc/PID/stat`` counts 10 ms ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return total / 1e9


def _uid(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next(line for line in status.splitlines() if line.startswith("Uid:"))
    return int(line.split()[1])


def grpc_call(port: int, token: str, model: str, array: np.ndarray) -> Callable[[], int]:
    """One ModelInfer of ``model`` on ``array`` (raw contents) through a bare stub; with
    ``model`` empty, one ServerLive."""
    import grpc
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as rpc

    stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    request = pb.ModelInferRequest(model_name=model)
    request.inputs.add(name="input_0", datatype="FP32", shape=list(array.shape))
    request.raw_input_contents.append(array.tobytes())
    metadata = (("authorization", f"Bearer {token}"),)
    if not model:  # the floor the protocol stack sets: a bare ServerLive
        live = pb.ServerLiveRequest()
        return lambda: stub.ServerLive(live) and 1

    def call() -> int:
        stub.ModelInfer(request, metadata=metadata)
        return 1

    return call


def http_call(port: int, token: str, model: str, array: np.ndarray) -> Callable[[], int]:
    """One binary /v2 infer of ``model`` on ``array`` over a kept-alive raw socket; with
    ``model`` empty, one ``GET /v2/health/live``."""
    conn = [Connection(port)]
    request = infer_request(model, [array]).replace(
        b"\r\n\r\n", f"\r\nAuthorization: Bearer {token}\r\n\r\n".encode(), 1
    )
    if not model:  # the floor the protocol stack sets: a bare health check
        request = b"GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

    def call() -> int:
        try:
            status, _, body = conn[0].exchange(request)
        except ConnectionError:  # closed by the server while idle (keep-alive timeout)
            conn[0] = Connection(port)
            status, _, body = conn[0].exchange(request)
        assert status.endswith(b"200"), (status, body[:300])
        return 1

    return call


def stream_call(port: int, token: str, max_tokens: int) -> Callable[[], int]:
    """One streamed greedy /v1/completions; the tokens it carried."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    body = json.dumps({"model": MODEL, "prompt": PROMPT, "max_tokens": max_tokens,
                       "temperature": 0, "stream": True, "return_token_ids": True})  # fmt: skip

    def call() -> int:
        try:
            conn.request("POST", "/v1/completions", body, headers)
            answer = conn.getresponse()
        except ConnectionError:  # closed by the server while idle (keep-alive timeout)
            conn.close()
            conn.request("POST", "/v1/completions", body, headers)
            answer = conn.getresponse()
        assert answer.status == 200, answer.read()
        tokens = 0
        while (line := answer.readline()) and line != b"data: [DONE]\n":
            if line.startswith(b"data: "):
                choices = json.loads(line[6:])["choices"]
                tokens += len(choices[0].get("token_ids", [])) if choices else 0
        answer.read()
        return tokens

    return call


@dataclass
class Side:
    """One server, the calls measured on it and their CPU per unit (request or token)."""

    tree: Path
    svc: ServiceProcess
    calls: dict[str, tuple[Callable[[], int], int]] = field(default_factory=dict)
    server_us: dict[str, list[float]] = field(default_factory=dict)
    worker_us: dict[str, list[float]] = field(default_factory=dict)


def start(tree: Path, home: Path) -> Side:
    """A server running ``tree``'s code (its ``pteforge`` first on the path)."""
    path = os.pathsep.join([str(tree.resolve()), os.environ.get("PYTHONPATH", "")])
    env = {**BENCH_ENV, "PYTHONPATH": path, "PYTHONSAFEPATH": "1"}
    svc = ServiceProcess(home, env=env)
    svc.start(timeout=300)
    assert svc.admin_token, "the server printed no admin token"
    return Side(tree, svc)


def prepare(side: Side, mlp: Path, array: np.ndarray, args: argparse.Namespace) -> None:
    """Deploy the MLP and the LM on ``side`` and make its calls."""
    svc, token = side.svc, str(side.svc.admin_token)
    model = f"{upload_pte(svc, token, mlp)}.forward"
    deploy(svc.url, token, build(LmSize()))
    side.calls = {
        "gRPC ServerLive": (grpc_call(svc.grpc_port, token, "", array), args.requests),
        "gRPC ModelInfer": (grpc_call(svc.grpc_port, token, model, array), args.requests),
        "HTTP health": (http_call(svc.port, token, "", array), args.requests),
        "HTTP /v2 infer": (http_call(svc.port, token, model, array), args.requests),
        "stream token": (stream_call(svc.port, token, args.max_tokens), args.streams),
    }


def measure(side: Side, label: str) -> None:
    """Run ``label``'s calls once on ``side``, recording CPU per unit of work."""
    call, repeat = side.calls[label]
    assert side.svc.proc is not None
    server, workers = side.svc.proc.pid, runtime_workers(side.svc.proc.pid)
    before = cpu_s(server), sum(cpu_s(w) for w in workers)
    units = sum(call() for _ in range(repeat))
    after = cpu_s(server), sum(cpu_s(w) for w in workers)
    side.server_us.setdefault(label, []).append((after[0] - before[0]) / units * 1e6)
    side.worker_us.setdefault(label, []).append((after[1] - before[1]) / units * 1e6)


def profile(side: Side, label: str, seconds: int, spy: str, out: Path, native: bool) -> None:
    """``py-spy record`` (raw, 500 Hz, ``--nonblocking`` or ``--native``) of the server and
    the runtime worker while ``label``'s calls repeat on ``side``:
    ``out/{label}-{server,worker}.txt``."""
    assert side.svc.proc is not None
    pids = {"server": side.svc.proc.pid, "worker": runtime_workers(side.svc.proc.pid)[0]}
    name = label.replace(" ", "_").replace("/", "")
    mode = ["--native"] if native else ["--nonblocking"]
    options = ["-d", str(seconds), "-r", "500", *mode, "-f", "raw"]
    spies = [
        subprocess.Popen(
            [spy, "record", "-p", str(pid), *options, "-o", str(out / f"{name}-{who}.txt")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for who, pid in pids.items()
    ]
    call, _ = side.calls[label]
    while any(spy.poll() is None for spy in spies):
        call()


def report(sides: list[Side]) -> None:
    """Median CPU us per unit, server and worker, of each call on each side."""
    print("| call | tree | server CPU us (median; rounds) | worker CPU us (median) |")
    print("|---|---|---|---|")
    for label in sides[0].calls:
        for side in sides:
            rounds = ", ".join(f"{v:.0f}" for v in side.server_us[label])
            server = statistics.median(side.server_us[label])
            worker = statistics.median(side.worker_us[label])
            print(f"| {label} | {side.tree} | {server:.0f} ({rounds}) | {worker:.0f} |")


def options() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, action="append")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--only", action="append", help="measure only these calls")
    parser.add_argument("--profile", type=Path, help="py-spy the first tree's calls into DIR")
    parser.add_argument("--profile-seconds", type=int, default=10)
    parser.add_argument("--py-spy", default="/tmp/tools/bin/py-spy")
    parser.add_argument("--native", action="store_true", help="py-spy --native (it pauses)")
    return parser.parse_args()


def run(sides: list[Side], labels: list[str], args: argparse.Namespace) -> None:
    """Warm every side up, profile the first if asked, then the interleaved rounds."""
    for side in sides:  # caches, first-call imports
        for label in labels:
            call, _ = side.calls[label]
            for _ in range(50 if label != "stream token" else 3):
                call()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        for label in labels:
            spy, seconds = args.py_spy, args.profile_seconds
            profile(sides[0], label, seconds, spy, args.profile, args.native)
    for _ in range(args.rounds):
        for label in labels:
            for side in sides:
                measure(side, label)
    for side in sides:
        side.calls = {k: v for k, v in side.calls.items() if k in labels}


def main() -> None:
    args = options()
    work = single_threaded_workdir("server-cpu-")
    workload = _compile(small_mlp_programs(), "forward", work / "mlp.pte", "small MLP")
    sides: list[Side] = []
    try:
        for i, tree in enumerate(args.tree or [Path(".")]):
            sides.append(start(tree, work / f"home{i}"))
            prepare(sides[-1], workload.path, workload.inputs[0], args)
        labels = [label for label in sides[0].calls if not args.only or label in args.only]
        run(sides, labels, args)
        report(sides)
    finally:
        for side in sides:
            side.svc.stop()


if __name__ == "__main__":
    main()
