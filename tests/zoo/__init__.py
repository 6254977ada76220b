"""A zoo of ``transformers`` architectures (random weights) exported as shipped method sets.

``ZOO`` lists one ``ZooEntry`` per architecture; ``entry.build("small")`` (tests) or
``entry.build("bench")`` (``bench/zoo.py``) returns a ``ZooModel`` with ``methods()``
(``torch.export`` programs), named example inputs per method and eager references.

The zoo's language models in ExecuTorch's LLM runner form (a ``.pte`` with
``forward(tokens, input_pos)``, its KV cache in mutable buffers and the runner's metadata
methods, plus a ``tokenizer.json``) are ``RUNNER_LMS``, built by
``tests.generation.lm_builder.build_tiny_lm(family)``.
"""

from __future__ import annotations

from tests.generation.lm_builder import FAMILIES as RUNNER_LMS
from tests.zoo import audio, decoders, encoders, seq2seq, vision
from tests.zoo.base import NamedMethod, Size, ZooEntry, ZooModel

ZOO: tuple[ZooEntry, ...] = (
    ZooEntry("whisper", "encoder-decoder", seq2seq.whisper),
    ZooEntry("t5", "encoder-decoder", seq2seq.t5),
    ZooEntry("bart", "encoder-decoder", seq2seq.bart),
    ZooEntry("marian", "encoder-decoder", seq2seq.marian),
    ZooEntry("gpt2", "decoder", decoders.gpt2),
    ZooEntry("llama", "decoder", decoders.llama),
    ZooEntry("qwen2", "decoder", decoders.qwen2),
    ZooEntry("mistral", "decoder", decoders.mistral),
    ZooEntry("bert", "encoder", encoders.bert),
    ZooEntry("distilbert", "encoder", encoders.distilbert),
    ZooEntry("roberta", "encoder", encoders.roberta),
    ZooEntry("vit", "vision", vision.vit),
    ZooEntry("resnet", "vision", vision.resnet),
    ZooEntry("convnext", "vision", vision.convnext),
    ZooEntry("wav2vec2", "audio", audio.wav2vec2),
    ZooEntry("clip", "two-tower", vision.clip),
)
BY_NAME: dict[str, ZooEntry] = {entry.name: entry for entry in ZOO}

__all__ = ["BY_NAME", "RUNNER_LMS", "ZOO", "NamedMethod", "Size", "ZooEntry", "ZooModel"]
