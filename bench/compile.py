"""Lowering time and ``.pte`` size of ``pteforge.manager`` against upstream ExecuTorch.

For each plan (portable, XNNPACK partitioner, whole-graph XnnpackBackend delegate, mixed)
the same encoder/decoder programs are compiled by ``compile_programs`` and by upstream
``executorch.exir.to_edge_transform_and_lower(...).to_executorch()``, interleaved (the order
alternates per round) after one untimed warm-up each. Printed: a markdown table of medians
and ratios ours/upstream (targets: time <= 1.05, size <= 1.01).

    .venv/bin/python bench/compile.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.export import ExportedProgram

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.models import export_methods


class Block(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.relu(self.fc1(x)))


class EncoderDecoder(nn.Module):
    """Encoder/decoder sharing an input projection; every op is XNNPACK's (whole-graph works)."""

    def __init__(self, width: int = 256, hidden: int = 1024, vocab: int = 2000, layers: int = 3):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.encoder = nn.Sequential(*[Block(width, hidden) for _ in range(layers)])
        self.decoder = nn.Sequential(*[Block(width, hidden) for _ in range(layers)])
        self.head = nn.Linear(width, vocab)
        self.scale = 1 / math.sqrt(width)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.proj(x))  # type: ignore[no-any-return]

    def decode(self, y: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        h = self.proj(y)
        attention = torch.softmax(torch.bmm(h, memory.transpose(1, 2)) * self.scale, dim=-1)
        return self.head(self.decoder(h + torch.bmm(attention, memory)))  # type: ignore[no-any-return]


def workload() -> dict[str, ExportedProgram]:
    torch.manual_seed(0)
    model = EncoderDecoder().eval()
    inputs = {
        "encode": (torch.randn(1, 32, 256),),
        "decode": (torch.randn(1, 8, 256), torch.randn(1, 32, 256)),
    }
    return export_methods(model, inputs).programs


@dataclass(frozen=True)
class Case:
    name: str
    plan: dict[str, Any] | None
    upstream: Callable[[], dict[str, list[Any]] | None]  # method -> partitioners


def _cases() -> list[Case]:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir.backend.canonical_partitioners.all_node_partitioner import (
        AllNodePartitioner,
    )

    def whole() -> AllNodePartitioner:
        return AllNodePartitioner("XnnpackBackend", [])

    delegate = {"delegate": {"backend_id": "XnnpackBackend"}}
    return [
        Case("portable", None, lambda: None),
        Case(
            "xnnpack partitioner",
            {"all": {"partitioners": ["xnnpack"]}},
            lambda: {m: [XnnpackPartitioner()] for m in ("encode", "decode")},
        ),
        Case(
            "whole-graph XnnpackBackend",
            {"all": delegate},
            lambda: {m: [whole()] for m in ("encode", "decode")},
        ),
        Case(
            "mixed (encode partitioner, decode whole-graph)",
            {"methods": {"encode": {"partitioners": ["xnnpack"]}, "decode": delegate}},
            lambda: {"encode": [XnnpackPartitioner()], "decode": [whole()]},
        ),
    ]


def _ours(programs: dict[str, ExportedProgram], case: Case, catalog: Any) -> bytes:
    from pteforge.manager import compile_programs

    return compile_programs(programs, case.plan, catalog).pte


def _upstream(programs: dict[str, ExportedProgram], case: Case) -> bytes:
    from executorch.exir import to_edge_transform_and_lower

    partitioners = case.upstream()
    edge = to_edge_transform_and_lower(programs, partitioner=partitioners)
    return bytes(edge.to_executorch().buffer)


def _timed(run: Callable[[], bytes]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds of this process (less sensitive to busy neighbours), size."""
    wall, cpu = time.perf_counter(), time.process_time()
    size = len(run())
    return time.perf_counter() - wall, time.process_time() - cpu, size


def _row(
    name: str, wall: dict[str, list[float]], cpu: dict[str, list[float]], sizes: dict[str, int]
) -> str:
    ours, theirs = statistics.median(wall["ours"]), statistics.median(wall["upstream"])
    cpu_ratio = statistics.median(cpu["ours"]) / statistics.median(cpu["upstream"])
    size_ratio = sizes["ours"] / sizes["upstream"]
    return (
        f"| {name} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.3f} | {cpu_ratio:.3f} "
        f"| {sizes['ours']:,} | {sizes['upstream']:,} | {size_ratio:.4f} |"
    )


def main() -> None:
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    from pteforge.backends import default_catalog

    catalog = default_catalog()
    programs = workload()
    rows = []
    for case in _cases():
        runners = {
            "ours": lambda c=case: _ours(programs, c, catalog),
            "upstream": lambda c=case: _upstream(programs, c),
        }
        for run in runners.values():
            run()  # warm-up
        wall: dict[str, list[float]] = {"ours": [], "upstream": []}
        cpu: dict[str, list[float]] = {"ours": [], "upstream": []}
        sizes: dict[str, int] = {}
        for index in range(args.rounds):
            order = ["ours", "upstream"] if index % 2 == 0 else ["upstream", "ours"]
            for who in order:
                seconds, cpu_seconds, sizes[who] = _timed(runners[who])
                wall[who].append(seconds)
                cpu[who].append(cpu_seconds)
        rows.append(_row(case.name, wall, cpu, sizes))
    print(f"rounds: {args.rounds} (medians), torch threads: {torch.get_num_threads()}\n")
    print(
        "| plan | ours s | upstream s | wall ratio | CPU ratio "
        "| ours bytes | upstream bytes | size ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
