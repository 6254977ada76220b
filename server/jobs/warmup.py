"""A throw-away lowering, on a tiny encoder/decoder built here (no upload involved), that warms
a compile worker's fork server before it forks any lowering process.

The first lowering in a process pays for one-time work: XNNPACK builds its partitioner pattern
graphs, torch fills its dispatch and decomposition caches, exir traces its passes. Measured on
a 4-layer encoder/decoder that is about 1.9 s of a job. The fork server lowers the tiny program
once (:func:`warm_up_fork_server`, run by importing :data:`FORK_SERVER_WARM_UP` last in its
preload list), so every lowering process forked from it starts warm, in milliseconds: a job
sent right after another never waits for a warm-up (issue 20: it waited 11.75 s for each new
standby's own). Forking is safe only from a process whose thread pools never ran: the fork
server lowers with one torch thread (so no OpenMP team starts) and without tqdm's monitor
thread, skips the numerics check (the runtime's thread pool; its first load costs a job about
40 ms), and reports if it holds more threads afterwards than before.

:func:`warm_up_lowering` (lower and verify in the calling process) is for a standby forked from
a fork server that did not warm up (``StandbyLowering.start(..., warm_up=True)``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

# One method partitioned to XNNPACK, one portable: the two paths most plans take.
WARMUP_PLAN = {"methods": {"encode": {"partitioners": ["xnnpack"]}, "decode": {}}}

FORK_SERVER_WARM_UP = "pteforge.server.jobs.warm_fork_server"
"""The module whose import warms the importing fork server up (:func:`warm_up_fork_server`):
``multiprocessing`` runs nothing of ours in its fork server but the imports of its preload
list, so a compile worker with the warm-up on lists this one last."""


def _tiny_programs() -> dict[str, Any]:
    import torch
    from torch import nn

    class TinyEncoderDecoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(16, 16)
            self.encoder = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
            self.decoder = nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
            self.head = nn.Linear(16, 16)

    class Method(nn.Module):
        def __init__(self, model: TinyEncoderDecoder, decode: bool) -> None:
            super().__init__()
            self.model, self.decode = model, decode

        def forward(self, tokens: torch.Tensor, *memory: torch.Tensor) -> torch.Tensor:
            x = self.model.embed(tokens)
            if not self.decode:
                return self.model.encoder(x)
            return self.model.head(self.model.decoder(x, memory[0]))

    model = TinyEncoderDecoder().eval()
    tokens = torch.zeros(1, 4, dtype=torch.long)
    return {
        "encode": torch.export.export(Method(model, False), (tokens,)),
        "decode": torch.export.export(Method(model, True), (tokens, torch.zeros(1, 4, 16))),
    }


def warm_up_lowering() -> float:
    """Lower and verify the tiny program once; returns the seconds taken. Never raises: a failed
    warm-up only means the next job runs cold."""
    from pteforge.backends import default_catalog
    from pteforge.manager import compile_programs, verify_numerics

    start = time.perf_counter()
    try:
        programs = _tiny_programs()
        verify_numerics(programs, compile_programs(programs, WARMUP_PLAN, default_catalog()))
    except Exception:
        log.exception("lowering warm-up failed; the next job runs cold")
    return time.perf_counter() - start


def _thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


@contextlib.contextmanager
def _no_thread_pools() -> Iterator[None]:
    """One torch thread while the block runs (``at::parallel_for`` then never starts OpenMP's
    team; the count is restored after it, for the children), and tqdm's monitor thread off
    for good (in the children too: it only tunes how often progress bars refresh)."""
    import torch

    with contextlib.suppress(ImportError):
        from tqdm import tqdm

        tqdm.monitor_interval = 0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def warm_up_fork_server() -> None:
    """Lower the tiny program once in this fork server, with no thread pool running, and freeze
    the heap for the children it forks. Never raises (a fork server that failed to import its
    preload list would start no child): a failed warm-up means cold children. Reports to
    stderr (the worker's log) how long it took, and warns if threads outlived it."""
    from pteforge.backends import default_catalog
    from pteforge.manager import compile_programs
    from pteforge.server.startup.heap import freeze_startup_heap

    start, threads = time.perf_counter(), _thread_count()
    try:
        with _no_thread_pools():
            compile_programs(_tiny_programs(), WARMUP_PLAN, default_catalog())
    except Exception:
        log.exception("lowering fork server warm-up failed; its lowering processes run cold")
    freeze_startup_heap()
    seconds, pid = time.perf_counter() - start, os.getpid()
    print(f"lowering fork server {pid} warmed up in {seconds:.2f}s", file=sys.stderr, flush=True)
    if _thread_count() > threads:
        print(
            f"WARNING lowering fork server {pid} holds {_thread_count()} threads after its "
            f"warm-up ({threads} before): a child forked while one holds a lock may hang",
            file=sys.stderr,
            flush=True,
        )
