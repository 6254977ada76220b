"""Mutated ``.pte`` corpora: random single-bit flips plus flips known to abort the runtime."""

from __future__ import annotations

import random
import re


def crashing_flips(data: bytes, count: int) -> list[tuple[int, int]]:
    """(offset, bit) flips that make ExecuTorch abort the process.

    Setting bit 7 of a character of an XNNPACK named-data key (a 64-char hex digest)
    makes the key invalid UTF-8; the XNNPACK backend then aborts inside
    ``XNNCompiler`` with an uncaught C++ exception when the method is loaded.
    """
    keys = [m.start() for m in re.finditer(rb"[0-9a-f]{64}", data)]
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
