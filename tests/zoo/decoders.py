"""Decoder-only LMs as ``prefill`` + ``decode`` with the KV cache passed in and out.

``prefill(input_ids)`` returns the logits and ``present_key_i``/``present_value_i`` per
layer; ``decode(input_ids, past_key_0, past_value_0, ...)`` takes one new token and the
prefill's cache and returns the logits and the grown cache. Shapes are static: the cache a
``decode`` takes is exactly as long as the prompt.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tests.zoo.base import Size, ZooModel, make_model, pick, token_ids, vocab_size


def _dims(size: Size) -> dict[str, int]:
    """hidden, layers, heads, kv heads, ffn and prompt length at ``size``."""
    return pick(
        size,
        {"hidden": 32, "layers": 1, "heads": 4, "kv": 2, "ffn": 64, "seq": 8},
        {"hidden": 256, "layers": 4, "heads": 8, "kv": 4, "ffn": 768, "seq": 64},
    )


def _flat_cache(cache: Any) -> list[torch.Tensor]:
    flat: list[torch.Tensor] = []
    for layer in cache.layers:
        flat += [layer.keys, layer.values]
    return flat


def _prefill(model: nn.Module, input_ids: torch.Tensor) -> tuple:
    out = model(input_ids=input_ids, use_cache=True, return_dict=True)
    return (out.logits, *_flat_cache(out.past_key_values))


def _decode(model: nn.Module, input_ids: torch.Tensor, **past: torch.Tensor) -> tuple:
    from transformers import DynamicCache

    layers = len(past) // 2
    cache = DynamicCache([(past[f"past_key_{i}"], past[f"past_value_{i}"]) for i in range(layers)])
    out = model(input_ids=input_ids, past_key_values=cache, use_cache=True, return_dict=True)
    return (out.logits, *_flat_cache(out.past_key_values))


def _lm(name: str, size: Size, model: nn.Module, seq: int) -> ZooModel:
    """The prefill and decode methods of ``model``, the decode inputs from a real prefill."""
    vocab = int(model.config.vocab_size)
    prompt = token_ids(vocab, seq)
    model.eval()
    with torch.no_grad():
        cache = _prefill(model, prompt)[1:]
    past: dict[str, torch.Tensor] = {"input_ids": token_ids(vocab, 1)}
    for i in range(len(cache) // 2):
        past[f"past_key_{i}"] = cache[2 * i]
        past[f"past_value_{i}"] = cache[2 * i + 1]
    methods = {"prefill": (_prefill, {"input_ids": prompt}), "decode": (_decode, past)}
    return make_model(name, "decoder", size, model, methods)


def gpt2(size: Size) -> ZooModel:
    """``GPT2LMHeadModel`` (``lm_head`` tied to ``wte``)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    d = _dims(size)
    config = GPT2Config(
        vocab_size=vocab_size(size),
        n_positions=128,
        n_embd=d["hidden"],
        n_layer=d["layers"],
        n_head=d["heads"],
        n_inner=d["ffn"],
        bos_token_id=1,
        eos_token_id=2,
    )
    return _lm("gpt2", size, GPT2LMHeadModel(config), d["seq"])


def _llama_like_kwargs(size: Size) -> dict[str, Any]:
    d = _dims(size)
    return {
        "vocab_size": vocab_size(size),
        "hidden_size": d["hidden"],
        "intermediate_size": d["ffn"],
        "num_hidden_layers": d["layers"],
        "num_attention_heads": d["heads"],
        "num_key_value_heads": d["kv"],
        "max_position_embeddings": 128,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
    }


def llama(size: Size) -> ZooModel:
    """``LlamaForCausalLM`` (RoPE, grouped-query attention)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**_llama_like_kwargs(size))
    return _lm("llama", size, LlamaForCausalLM(config), _dims(size)["seq"])


def qwen2(size: Size) -> ZooModel:
    """``Qwen2ForCausalLM`` (biased q/k/v projections)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**_llama_like_kwargs(size))
    return _lm("qwen2", size, Qwen2ForCausalLM(config), _dims(size)["seq"])


def mistral(size: Size) -> ZooModel:
    """``MistralForCausalLM`` (a sliding window longer than any sequence here)."""
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(**_llama_like_kwargs(size), sliding_window=4096)
    return _lm("mistral", size, MistralForCausalLM(config), _dims(size)["seq"])
