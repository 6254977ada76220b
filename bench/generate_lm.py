"""The language model ``bench/generate.py`` measures, and the in-process runs it compares to.

The model is a Llama-style LM built like ``tests.generation.lm_builder``'s (seeded random
weights, ``TorchExportableModuleForDecoderOnlyLM``, XNNPACK, the runner's metadata as
constant methods, via ``tests.generation.lm_export``), but larger than the test zoo's
(hidden 64, 2 layers, about 0.26 ms a token) so a decode step costs about a millisecond.
Its tokenizer is byte-level BPE trained on the ASCII lines of the zoo's corpus with an ASCII
alphabet: every token decodes to whole UTF-8, since ``TextLLMRunner``'s token callback
raises ``UnicodeDecodeError`` on a piece of a character (issue 21) and would end the
upstream run early. Built once per machine under ``$TMPDIR/pteforge-tiny-lm/bench-*``.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tests.generation import lm_export, lm_tokenizer

_RECIPE = 1
"""Bump when ``_build_files`` or ``_ascii_tokenizer`` change (the cache key)."""


@dataclass(frozen=True)
class LmSize:
    """The bench model's shape (Llama: grouped-query attention, 8 heads, 4 of K/V)."""

    hidden: int = 128
    layers: int = 4
    max_seq_len: int = 128


@dataclass
class Run:
    """One timed generation: ms to the first token and between the tokens after it."""

    ttft_ms: float
    gaps_ms: list[float] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return len(self.gaps_ms) + 1


def build(size: LmSize) -> Path:
    """The directory holding ``model.pte``, ``tokenizer.json`` and ``tokenizer_config.json``
    (built on first use, a few CPU minutes)."""
    root = Path(tempfile.gettempdir()) / "pteforge-tiny-lm"
    digest = hashlib.sha256(f"{_RECIPE}/{size}".encode())
    for module in (lm_export, lm_tokenizer):
        digest.update(Path(module.__file__ or "").read_bytes())
    key = digest.hexdigest()[:16]
    done = root / f"bench-{key}"
    if not done.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="bench-", dir=root))
        try:
            _build_files(scratch, size)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        scratch.rename(done)
    return done


def _ascii_tokenizer(directory: Path) -> int:
    """Train the ASCII tokenizer into ``directory``; its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    lines = [line for line in lm_tokenizer.corpus() if line.isascii()]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    alphabet = [c for c in pre_tokenizers.ByteLevel.alphabet() if ord(c) < 0x80]
    trainer = trainers.BpeTrainer(
        vocab_size=lm_tokenizer.VOCAB_SIZE,
        special_tokens=list(lm_tokenizer.SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        limit_alphabet=len(alphabet),
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines, trainer)
    bos = lm_tokenizer.BOS
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, 0)]
    )
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {"bos_token": bos, "eos_token": lm_tokenizer.EOS, "add_bos_token": True}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return int(tokenizer.get_vocab_size())


def _build_files(directory: Path, size: LmSize) -> None:
    from transformers import AutoModelForCausalLM, LlamaConfig

    vocab = _ascii_tokenizer(directory)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=size.hidden,
        intermediate_size=size.hidden * 3,
        num_hidden_layers=size.layers,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=size.max_seq_len,
        bos_token_id=0,
        eos_token_id=1,
        initializer_range=0.1,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config).eval()
    metadata = lm_export.runner_metadata(model, size.max_seq_len, 0, [1, 3], True)
    (directory / "model.pte").write_bytes(lm_export.lower(model, metadata, True))
    (directory / "metadata.json").write_text(json.dumps(metadata))


def one_thread() -> None:
    """ExecuTorch's threadpool (shared by ``executorch.runtime`` and the LLM runner) and
    torch on one thread, as in a runtime worker."""
    from executorch.runtime import Runtime

    Runtime.get()._legacy_module._unsafe_reset_threadpool(1)
    torch.set_num_threads(1)


class UpstreamRunner:
    """``executorch.extension.llm.runner.TextLLMRunner`` on the files, greedy; times come
    from its token callback."""

    def __init__(self, lm: Path) -> None:
        from executorch.extension.llm.runner import TextLLMRunner

        self.runner = TextLLMRunner(str(lm / "model.pte"), str(lm / "tokenizer.json"))
        self.prompt_tokens = 0

    def run(self, prompt: str, max_tokens: int) -> Run:
        from executorch.extension.llm.runner import GenerationConfig

        config = GenerationConfig(echo=False, max_new_tokens=max_tokens, temperature=0.0, num_bos=1)
        stamps: list[float] = []

        def stats(s: Any) -> None:
            self.prompt_tokens = int(s.num_prompt_tokens)

        self.runner.reset()
        with _native_stdout_muted():  # the runner prints its text and stats
            start = time.perf_counter()
            self.runner.generate(
                prompt, config, lambda _: stamps.append(time.perf_counter()), stats
            )
        return timed(start, stamps)


@contextlib.contextmanager
def _native_stdout_muted() -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


class GreedyLoop:
    """The in-process greedy loop over ``executorch.runtime``: tokenize, prefill the prompt
    in one ``forward`` call, then one call and an argmax per token."""

    def __init__(self, lm: Path) -> None:
        from executorch.runtime import Runtime
        from tokenizers import Tokenizer

        self.forward = Runtime.get().load_program(lm / "model.pte").load_method("forward")
        self.tokenizer = Tokenizer.from_file(str(lm / "tokenizer.json"))
        self.tokens: list[int] = []

    def run(self, prompt: str, max_tokens: int) -> Run:
        start = time.perf_counter()
        ids = self.tokenizer.encode(prompt).ids
        step: Callable[[list[int], int], Any] = lambda t, at: self.forward.execute(  # noqa: E731
            [torch.tensor([t]), torch.arange(at, at + len(t))]
        )[0]
        logits, stamps, self.tokens = step(ids, 0), [], []
        for count in range(1, max_tokens + 1):
            self.tokens.append(int(logits[0, -1].argmax()))
            stamps.append(time.perf_counter())
            if count < max_tokens:
                logits = step(self.tokens[-1:], len(ids) + count - 1)
        return timed(start, stamps)


def timed(start: float, stamps: list[float]) -> Run:
    """The run whose tokens came at ``stamps`` (``perf_counter``) after ``start``."""
    gaps = [(b - a) * 1e3 for a, b in itertools.pairwise(stamps)]
    return Run((stamps[0] - start) * 1e3, gaps)
