"""What a stateless request to a stateful method costs: reset in place vs reload.

A stateless request must start from the program's initial state. Two ways, both in
``pteforge.runtime.instances``:
- reset: copy each named mutable buffer back from the snapshot taken at load
  (``ProgramInstance.reset``; needs ``emit_mutable_buffer_names=True``);
- reload: a fresh ``ProgramInstance`` (program load + method load, delegate init included),
  what a method whose buffers have no names pays.
Measured on a small program (the counter: one 4-byte buffer, portable) and a medium one
(a KV-cached decoder-only LM, d=256, 4 layers, 256 positions, XNNPACK: 2 MiB of cache),
next to one execution of the method, all in this process, single-threaded kernels.

Run: ``.venv/bin/python bench/state_reset.py [--iterations 300]``
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.timing import latencies, single_threaded_bench
from pteforge.runtime.instances import ProgramInstance
from pteforge.runtime.state import read_program_state
from tests.runtime.stateful_compile import compile_stateful
from tests.runtime.stateful_models import cached_lm_programs, counter_programs


def _micros(call: Callable[[], Any], iterations: int) -> tuple[float, float]:
    """p50 and p99 of ``call`` in microseconds."""
    times = sorted(ms * 1e3 for ms in latencies(call, iterations, warmup=1))
    return statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))]


def _measure(name: str, path: Path, method: str, inputs: list[Any], iterations: int) -> None:
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    runtime._legacy_module._unsafe_reset_threadpool(1)  # one thread, as in a worker
    state = read_program_state(path)
    assert state is not None and state.method(method).resettable, state
    instance = ProgramInstance(runtime, path, state, eager=True)
    loaded = instance.method(method)
    buffers = sum(
        v.numel() * v.element_size()
        for v in (loaded._method.get_attribute(b) for b in state.method(method).buffers)
    )
    rows = {
        "execute": _micros(lambda: loaded.execute(inputs), iterations),
        "reset (named buffers)": _micros(lambda: instance.reset(method), iterations),
        "reload (fresh instance)": _micros(
            lambda: ProgramInstance(runtime, path, state, eager=False).method(method),
            max(20, iterations // 5),
        ),
    }
    size = path.stat().st_size
    for what, (p50, p99) in rows.items():
        print(f"| {name} | {size:,} | {buffers:,} | {what} | {p50:.1f} | {p99:.1f} |")


def main() -> None:
    args, root = single_threaded_bench(__doc__, "state-reset-", iterations=300)
    small = compile_stateful(counter_programs(), root / "counter.pte", xnnpack=False)
    medium = compile_stateful(
        cached_lm_programs(d_model=256, heads=4, layers=4, max_len=256), root / "lm.pte"
    )
    print("| program | .pte bytes | buffer bytes | step | p50 us | p99 us |")
    print("|---|---:|---:|---|---:|---:|")
    _measure("counter (portable)", small.path, "forward", [torch.zeros(1)], args.iterations)
    step = [torch.tensor([[1]]), torch.tensor([5])]
    _measure("KV-cache LM decode (XNNPACK)", medium.path, "decode", step, args.iterations)


if __name__ == "__main__":
    main()
