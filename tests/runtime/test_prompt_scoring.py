"""Echo's prompt scoring as the worker runs it (red-team pass), on ``forward`` methods whose
logits are rows of a fixed table: all positions', the last position's only, or a count
that is neither (which fed the prompt again for ever, holding the worker until the pool's
timeout). No model needed: the shapes are the point."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from pteforge.runtime.errors import NotALanguageModelError
from pteforge.runtime.language_model import LmInfo, feed_each

VOCAB = 16
TABLE = torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(0))
INFO = LmInfo(256, "get_max_seq_len", frozenset(), VOCAB, 8, True, "int64")


class _Forward:
    """``forward(tokens, input_pos)``: the table's row of each token (``all``), of the last
    one (``last``), or of each token twice (``double``)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def execute(self, inputs: list[Any]) -> list[torch.Tensor]:
        rows = TABLE[inputs[0][0]]
        if self.kind == "last":
            return [rows[-1:]]
        return [torch.cat([rows, rows]) if self.kind == "double" else rows.unsqueeze(0)]


def test_a_forward_of_the_last_logits_only_is_fed_one_token_at_a_time() -> None:
    prompt = [i % VOCAB for i in range(3, 23)]  # more than one chunk of 8
    each = list(feed_each(_Forward("last"), INFO, prompt, 0))
    assert np.array_equal(np.stack(each), TABLE[prompt].numpy())
    assert np.array_equal(np.stack(list(feed_each(_Forward("all"), INFO, prompt, 0))), each)


def test_a_forward_of_any_other_count_of_rows_is_refused() -> None:
    with pytest.raises(NotALanguageModelError, match="answered 16 rows of logits for 8 tokens"):
        list(feed_each(_Forward("double"), INFO, list(range(12)), 0))
