"""Latency samples, percentiles, throughput of concurrent callers and the CPU they cost."""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch


def latencies(call: Callable[[], Any], iterations: int, warmup: int) -> list[float]:
    """Milliseconds of each of ``iterations`` calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def pct(samples: list[float], q: float) -> float:
    """The ``q``-th percentile of ``samples``."""
    return float(np.percentile(samples, q))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (its own threads, not children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Rate:
    """Throughput of one run, with the CPU the client and the server process spent on it."""

    per_second: float
    errors: int
    client_cpu_us: float  # per request, this process (the client threads)
    server_cpu_us: float  # per request, the server process (HTTP + dispatch; not the workers)


def measured(
    make_call: Callable[[], Callable[[], bool]],
    clients: int,
    seconds: float,
    server_pid: int | None,
) -> Rate:
    """``throughput`` with the CPU spent by this process and by ``server_pid`` meanwhile."""
    client, server = time.process_time(), cpu_seconds(server_pid) if server_pid else 0.0
    rate, errors, elapsed = throughput(make_call, clients, seconds)
    requests = max(rate * elapsed, 1.0)
    client_us = (time.process_time() - client) / requests * 1e6
    server_us = (cpu_seconds(server_pid) - server) / requests * 1e6 if server_pid else 0.0
    return Rate(rate, errors, client_us, server_us)


def throughput(make_call: Callable[[], Callable[[], bool]], clients: int, seconds: float
               ) -> tuple[float, int, float]:  # fmt: skip
    """Requests per second, error count and elapsed seconds of ``clients`` threads calling
    for ``seconds``."""
    counts, errors = [0] * clients, [0] * clients
    stop = time.monotonic() + seconds
    barrier = threading.Barrier(clients + 1)

    def run(i: int) -> None:
        call = make_call()
        call()  # connect and warm up outside the window
        barrier.wait()
        while time.monotonic() < stop:
            try:
                ok = call()
            except Exception:
                ok = False
            counts[i] += ok
            errors[i] += not ok

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.monotonic()
    stop = start + seconds
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    return sum(counts) / elapsed, sum(errors), elapsed


def single_threaded_workdir(prefix: str) -> Path:
    """Warnings silenced, torch kernels on one thread (as in a runtime worker), and a fresh
    work directory named ``prefix...``."""
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    return Path(tempfile.mkdtemp(prefix=prefix))


def single_threaded_bench(
    description: str, prefix: str, **int_options: int
) -> tuple[argparse.Namespace, Path]:
    """The start of a single-threaded benchmark: third-party noise quieted, the command line
    parsed (``--NAME N`` for each of ``int_options``, defaulting to its value) and
    :func:`single_threaded_workdir`."""
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
    parser = argparse.ArgumentParser(description=description)
    for name, default in int_options.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    return parser.parse_args(), single_threaded_workdir(prefix)
