"""A throw-away lowering that a standby lowering process runs before it takes a job.

The first lowering in a process pays for one-time work: XNNPACK builds its partitioner pattern
graphs, torch fills its dispatch and decomposition caches, exir traces its passes. Measured on
a 4-layer encoder/decoder that is about 1.9 s of a job; the numerics check's first runtime load
and eager run pay theirs too. A standby process does both while the worker is idle, on a tiny
encoder/decoder built here (no upload involved), so the job that follows runs warm. Warming up
in the fork server instead would run torch's thread pools before ``fork``, which can deadlock
the children.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger(__name__)

# One method partitioned to XNNPACK, one portable: the two paths most plans take.
WARMUP_PLAN = {"methods": {"encode": {"partitioners": ["xnnpack"]}, "decode": {}}}


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
