"""Mutated ``.pte`` corpora: random single-bit flips plus flips known to abort the runtime."""

from __future__ import annotations

import random
import re


def crashing_flips(data: bytes, count: int) -> list[tuple[int, int]]:
    """(offset, bit) flips that make ExecuTorch abort the process.

    Each XNNPACK constant key (a 64-char hex digest) appears twice: in the delegate
    payload and in the program's named-data table. Setting bit 7 of a character of the
    table's copy makes it invalid UTF-8, and loading the method aborts the process with
    an uncaught C++ exception (``pybind11::error_already_set``, from ``XNNCompiler``).
    """
    seen: set[bytes] = set()
    keys = []
    for match in re.finditer(rb"[0-9a-f]{64}", data):
        if match.group() in seen:
            keys.append(match.start())
        seen.add(match.group())
    if not keys:
        raise ValueError("no named-data key found in the .pte")
    rng = random.Random(7)
    return [(rng.choice(keys) + rng.randrange(64), 7) for _ in range(count)]


def random_flips(data: bytes, count: int, seed: int = 0) -> list[tuple[int, int]]:
    """``count`` seeded random (offset, bit) flips anywhere in the file."""
    rng = random.Random(seed)
    return [(rng.randrange(len(data)), rng.randrange(8)) for _ in range(count)]


def flip(data: bytes, offset: int, bit: int) -> bytes:
    mutated = bytearray(data)
    mutated[offset] ^= 1 << bit
    return bytes(mutated)
