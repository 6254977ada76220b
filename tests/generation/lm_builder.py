"""Tiny real language models as ExecuTorch's LLM runner convention defines them.

``build_tiny_lm(family, workdir)`` builds a decoder-only LM from a ``transformers`` config
with seeded random weights (nothing is downloaded), wraps it in
``transformers.integrations.executorch.TorchExportableModuleForDecoderOnlyLM`` (a static
KV cache in mutable buffers; ``forward(input_ids, cache_position)`` returns the logits of
every position), exports it with a dynamic sequence length, lowers it to XNNPACK and emits
a ``.pte`` whose ``constant_methods`` are the runner's metadata methods
(``get_max_seq_len``, ``get_bos_id``, ``get_eos_ids``, ``use_kv_cache``, ...): the same file
ExecuTorch's ``TextLLMRunner`` runs. Its tokenizer is a byte-level BPE ``tokenizer.json``
trained on local text (:mod:`tests.generation.lm_tokenizer`) whose vocabulary is the
model's.

Lowering costs tens of CPU seconds, so the files are built once per machine and version
set, in a cache directory keyed by this package's source and the library versions, and
copied into ``workdir``; the eager model is rebuilt from its seed (about a second).

References for tests: ``eager_greedy`` (``transformers`` ``generate`` with
``do_sample=False``) and ``pte_greedy`` (an in-process argmax loop over the ``.pte`` in
``executorch.runtime``). Both return the new tokens, ending with an end-of-sequence token
when one came before ``max_new_tokens``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from tests import tiers
from tests.generation import lm_export, lm_tokenizer

Family = Literal["llama", "qwen2", "gpt2"]
FAMILIES: tuple[Family, ...] = ("llama", "qwen2", "gpt2")
SEED = 0
MAX_SEQ_LEN = 64


@dataclass(frozen=True)
class LmFiles:
    """A built LM: its ``.pte``, tokenizer files, eager model and runner metadata."""

    family: Family
    pte: Path
    tokenizer_json: Path
    tokenizer_config: Path
    eager: nn.Module
    metadata: dict[str, Any]

    @property
    def max_seq_len(self) -> int:
        """The context: prompt and generated tokens together (``get_max_seq_len``)."""
        return int(self.metadata["get_max_seq_len"])

    @property
    def bos_id(self) -> int:
        return int(self.metadata["get_bos_id"])

    @property
    def eos_ids(self) -> list[int]:
        return [int(i) for i in self.metadata["get_eos_ids"]]

    def encode(self, text: str) -> list[int]:
        """``text`` as the tokenizer encodes it (BOS first, from its post-processor)."""
        from tokenizers import Tokenizer

        ids: list[int] = Tokenizer.from_file(str(self.tokenizer_json)).encode(text).ids
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens left out."""
        from tokenizers import Tokenizer

        text: str = Tokenizer.from_file(str(self.tokenizer_json)).decode(list(ids))
        return text


def build_tiny_lm(
    family: Family = "llama",
    workdir: Path | None = None,
    *,
    max_seq_len: int = MAX_SEQ_LEN,
    dynamic_shape: bool = True,
) -> LmFiles:
    """Build (or take from the cache) a tiny ``family`` LM and copy its files to ``workdir``.

    ``dynamic_shape`` False exports ``forward`` for one token at a time (the runner then
    prefills token by token, as ``enable_dynamic_shape`` says); ``workdir`` None leaves the
    files in the cache directory (read them, do not change them). A test that calls this
    carries the ``zoo`` marker (``make test`` only).
    """
    tiers.need("zoo")
    if family not in FAMILIES:
        raise ValueError(f"unknown LM family {family!r}; expected one of {FAMILIES}")
    key = _cache_key(family, max_seq_len, dynamic_shape)
    cached = _cached(key, lambda d: _build_files(d, family, max_seq_len, dynamic_shape))
    target = cached if workdir is None else _copy(cached, workdir)
    metadata = json.loads((target / "metadata.json").read_text())
    vocab = int(metadata["get_vocab_size"])
    return LmFiles(
        family=family,
        pte=target / "model.pte",
        tokenizer_json=target / "tokenizer.json",
        tokenizer_config=target / "tokenizer_config.json",
        eager=lm_export.eager_model(family, vocab, max_seq_len, SEED),
        metadata=metadata,
    )


def _eager_generate(lm: LmFiles, prompt_ids: Sequence[int], **options: Any) -> Any:
    """Eager greedy ``generate`` on ``prompt_ids`` with ``options``."""
    ids = torch.tensor([list(prompt_ids)], dtype=torch.long)
    with torch.no_grad():
        return lm.eager.generate(  # type: ignore[operator]
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            pad_token_id=lm.eos_ids[0],
            **options,
        )


def eager_greedy(lm: LmFiles, prompt_ids: Sequence[int], max_new_tokens: int) -> list[int]:
    """Eager ``generate`` (``do_sample=False``): the new tokens, at most ``max_new_tokens``,
    stopping after one of the model's end-of-sequence tokens."""
    out = _eager_generate(lm, prompt_ids, max_new_tokens=max_new_tokens, eos_token_id=lm.eos_ids)
    return [int(t) for t in out[0, len(prompt_ids) :]]


def eager_logprobs(lm: LmFiles, prompt_ids: Sequence[int], steps: int) -> list[torch.Tensor]:
    """Eager greedy ``generate``'s log-softmax of the raw logits at each of ``steps`` steps
    (it runs on past an end-of-sequence token)."""
    out = _eager_generate(
        lm,
        prompt_ids,
        max_new_tokens=steps,
        min_new_tokens=steps,
        output_logits=True,
        return_dict_in_generate=True,
    )
    return [torch.log_softmax(row[0].double(), dim=-1) for row in out.logits]


def pte_greedy(
    pte: Path, prompt_ids: Sequence[int], max_new_tokens: int, eos_ids: Sequence[int]
) -> list[int]:
    """An in-process greedy loop over the ``.pte`` (``executorch.runtime``): the prompt in
    one ``forward(tokens, input_pos)`` call (token by token when the program's sequence
    length is static), then one call per new token."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    forward = program.load_method("forward")
    dynamic = bool(program.load_method("enable_dynamic_shape").execute([])[0])
    prompt = list(prompt_ids)
    chunks = [prompt] if dynamic else [[t] for t in prompt]
    position = 0
    for chunk in chunks:
        logits = forward.execute([torch.tensor([chunk]), _positions(position, len(chunk))])[0]
        position += len(chunk)
    tokens: list[int] = []
    while len(tokens) < max_new_tokens:
        tokens.append(int(logits[0, -1].argmax()))
        if tokens[-1] in eos_ids:
            break
        logits = forward.execute([torch.tensor([[tokens[-1]]]), _positions(position, 1)])[0]
        position += 1
    return tokens


def _positions(start: int, count: int) -> torch.Tensor:
    return torch.arange(start, start + count, dtype=torch.long)


def _build_files(directory: Path, family: Family, max_seq_len: int, dynamic: bool) -> None:
    """Train the tokenizer, then build and lower the model of its vocabulary size."""
    from tokenizers import Tokenizer

    tokenizer_json, _ = lm_tokenizer.train_tokenizer(directory)
    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    bos = tokenizer.token_to_id(lm_tokenizer.BOS)
    eos = [tokenizer.token_to_id(t) for t in (lm_tokenizer.EOS, lm_tokenizer.IM_END)]
    vocab = tokenizer.get_vocab_size()
    model = lm_export.eager_model(family, vocab, max_seq_len, SEED)
    metadata = lm_export.runner_metadata(model, max_seq_len, bos, eos, dynamic)
    (directory / "model.pte").write_bytes(lm_export.lower(model, metadata, dynamic))
    (directory / "metadata.json").write_text(json.dumps(metadata, indent=1))


def _cache_key(family: str, max_seq_len: int, dynamic: bool) -> str:
    sources = sorted(Path(__file__).parent.glob("lm_*.py"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.read_bytes())
    for package in ("torch", "executorch", "transformers", "tokenizers"):
        digest.update(version(package).encode())
    digest.update(f"{family}/{max_seq_len}/{dynamic}".encode())
    return f"{family}-{digest.hexdigest()[:16]}"


def _cache_root() -> Path:
    return Path(tempfile.gettempdir()) / "pteforge-tiny-lm"


def _cached(key: str, build: Callable[[Path], None]) -> Path:
    """The cache directory of ``key``, built once by ``build`` under a file lock (test
    processes running at once wait for one build instead of each lowering the model)."""
    root = _cache_root()
    root.mkdir(parents=True, exist_ok=True)
    done = root / key
    with (root / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_dir():
            scratch = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=root))
            try:
                build(scratch)
            except BaseException:
                shutil.rmtree(scratch, ignore_errors=True)
                raise
            scratch.rename(done)
    return done


def _copy(source: Path, workdir: Path) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        shutil.copyfile(item, workdir / item.name)
    return workdir
