"""Tokenizers shaped like the ones LM families ship, trained on local text (nothing is
downloaded), with the family's chat template and special tokens in ``tokenizer_config.json``.

Three styles, as real checkpoints have them:

- ``bytelevel``: GPT-2 / Llama 3 / SmolLM / Qwen2 byte-level BPE (Qwen's ``Split`` regex
  pre-tokenizer when ``qwen``), every byte in the alphabet;
- ``metaspace``: Llama 2 / Mistral / Phi-3 / Gemma SentencePiece-style BPE: spaces as ``▁``
  (prepended or not), ``<0xNN>`` byte-fallback tokens for characters out of the vocabulary,
  decoded with ``Replace``, ``ByteFallback``, ``Fuse`` (and ``Strip`` when prepended).

Used by ``bench/lm_families.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.generation.lm_tokenizer import corpus

_QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class TokenizerStyle:
    """How one family's tokenizer is built: its style, special tokens and config."""

    style: str  # "bytelevel", "qwen" or "metaspace", "metaspace-noprefix"
    specials: tuple[str, ...]  # ids 0.. in this order
    bos: str | None  # added first by the post-processor (None: nothing added)
    eos: tuple[str, ...]  # the runner's get_eos_ids, first one is eos_token
    chat_template: str | None
    vocab_size: int = 400


def train(spec: TokenizerStyle, directory: Path) -> tuple[Path, Path]:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` of ``spec`` in ``directory``."""
    if spec.style.startswith("metaspace"):
        tokenizer = _metaspace(spec, prefix=spec.style == "metaspace")
    else:
        tokenizer = _bytelevel(spec, qwen=spec.style == "qwen")
    if spec.bos is not None:
        from tokenizers import processors

        bos_id = tokenizer.token_to_id(spec.bos)
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{spec.bos} $A", pair=f"{spec.bos} $A $B", special_tokens=[(spec.bos, bos_id)]
        )
    path = directory / "tokenizer.json"
    tokenizer.save(str(path))
    config: dict[str, Any] = {
        "bos_token": spec.bos,
        "eos_token": spec.eos[0],
        "add_bos_token": spec.bos is not None,
        "model_max_length": 1 << 20,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    if spec.chat_template is not None:
        config["chat_template"] = spec.chat_template
    config_path = directory / "tokenizer_config.json"
    config_path.write_text(json.dumps(config, indent=1, ensure_ascii=False))
    return path, config_path


def _bytelevel(spec: TokenizerStyle, qwen: bool) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    if qwen:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(_QWEN_SPLIT), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=list(spec.specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    return tokenizer


def _metaspace(spec: TokenizerStyle, prefix: bool) -> Any:
    """SentencePiece-style BPE: a first training pass gives the merges, then the model is
    rebuilt with the specials, the 256 ``<0xNN>`` tokens, then the learned pieces."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers

    steps = [normalizers.Prepend("▁")] if prefix else []
    normalizer = normalizers.Sequence([*steps, normalizers.Replace(" ", "▁")])
    draft = Tokenizer(models.BPE(unk_token=spec.specials[0]))
    draft.normalizer = normalizer
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size - 256,
        special_tokens=list(spec.specials),
        limit_alphabet=64,  # CJK and emoji stay out: they fall back to bytes
        show_progress=False,
    )
    draft.train_from_iterator(corpus(), trainer)
    learned = json.loads(draft.to_str())["model"]
    vocab = {s: i for i, s in enumerate(spec.specials)}
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = len(vocab)
    for piece in sorted(learned["vocab"], key=learned["vocab"].get):
        vocab.setdefault(piece, len(vocab))
    merges: list[tuple[str, str]] = [
        (m.split(" ")[0], m.split(" ")[1]) if isinstance(m, str) else (m[0], m[1])
        for m in learned["merges"]
    ]
    model = models.BPE(vocab, merges, unk_token=spec.specials[0], byte_fallback=True, fuse_unk=True)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizer
    tokenizer.add_special_tokens(list(spec.specials))
    pieces: list[Any] = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if prefix:
        pieces.append(decoders.Strip(" ", 1, 0))
    tokenizer.decoder = decoders.Sequence(pieces)
    return tokenizer
