"""Echo's prompt scoring as the worker runs it (red-team pass), on ``forward`` methods whose
logits are rows of a fixed table: all positions', the last position's only, or a count
that is neither (which fed the prompt again for ever, holding the worker until the pool's
timeout). No model needed: the shapes are the point."""

from __future__ import annotations

from multiprocessing import Pipe
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pteforge.contracts.generation import GenerationRequest
from pteforge.contracts.runtime_messages import GeneratedReply
from pteforge.runtime.errors import InvalidInputError, NotALanguageModelError
from pteforge.runtime.generation_worker import ECHO_TOKENS_PER_EVENT, Channel, run
from pteforge.runtime.language_model import LmInfo, LmMethod, feed_each
from pteforge.runtime.text_codec import TextCodec

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


@pytest.fixture(scope="module")
def codec(tmp_path_factory: pytest.TempPathFactory) -> TextCodec:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({f"w{i}": i for i in range(VOCAB)}, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    path: Path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tokenizer.save(str(path))
    return TextCodec(path, None)


def test_scoring_a_prompt_ends_at_the_requests_seconds(codec: TextCodec) -> None:
    """Each piece of scores reaches the pool, whose timeout between two messages then never
    fires: past its seconds (here none at all) the scoring fails, as a generation ends; a
    prompt fed one token at a time held its worker for the whole prompt."""
    prompt = tuple(i % VOCAB for i in range(2 * ECHO_TOKENS_PER_EVENT))
    request = GenerationRequest(prompt_ids=prompt, max_tokens=0, echo=True, logprobs=0)
    step = LmMethod(_Forward("last"), INFO)
    ours, _theirs = Pipe()
    with pytest.raises(InvalidInputError, match="PTEFORGE_RUNTIME_REQUEST_TIMEOUT_SECONDS"):
        run(step, codec, request, [], Channel(ours), 0.0)
    reply = run(step, codec, request, [], Channel(ours), None)
    assert isinstance(reply, GeneratedReply) and reply.event.finish_reason == "length"
