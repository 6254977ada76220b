"""Encoder/decoder models as ``encode`` + ``decode``: Whisper, T5, BART, Marian.

``decode`` takes the decoder tokens so far and the encoder's states (no KV cache: the
decoder re-reads its whole prefix each step) and returns the LM logits.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tests.zoo.base import (
    Methods,
    Size,
    ZooModel,
    make_model,
    masked_text,
    pick,
    token_ids,
    vocab_size,
)


def _dims(size: Size) -> dict[str, int]:
    """vocab, d_model, layers, heads, ffn, source and target lengths at ``size``."""
    dims: dict[str, int] = pick(
        size,
        {"d": 32, "layers": 1, "heads": 2, "ffn": 64, "src": 12, "tgt": 4},
        {"d": 256, "layers": 3, "heads": 4, "ffn": 1024, "src": 64, "tgt": 16},
    )
    return {**dims, "vocab": vocab_size(size)}


def _encode(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple:
    encoder = model.get_encoder()
    out = encoder(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
    return (out.last_hidden_state,)


def _decoder_states(
    model: nn.Module,
    decoder_input_ids: torch.Tensor,
    encoder_hidden_states: torch.Tensor,
    **encoder_mask: torch.Tensor,
) -> torch.Tensor:
    """The decoder's last hidden state over the whole prefix (no KV cache)."""
    out = model.get_decoder()(
        input_ids=decoder_input_ids,
        encoder_hidden_states=encoder_hidden_states,
        use_cache=False,
        return_dict=True,
        **encoder_mask,
    )
    return out.last_hidden_state  # type: ignore[no-any-return]


def _decode(
    model: nn.Module,
    decoder_input_ids: torch.Tensor,
    encoder_hidden_states: torch.Tensor,
    encoder_attention_mask: torch.Tensor,
) -> tuple:
    mask = {"encoder_attention_mask": encoder_attention_mask}
    states = _decoder_states(model, decoder_input_ids, encoder_hidden_states, **mask)
    return (_lm_logits(model, states),)


def _lm_logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The LM head as ``forward`` applies it (T5 rescales tied embeddings; BART adds a bias)."""
    config = model.config
    if getattr(config, "model_type", "") == "t5" and config.tie_word_embeddings:
        hidden = hidden * (config.d_model**-0.5)
    logits = model.lm_head(hidden)
    bias = getattr(model, "final_logits_bias", None)
    return logits if bias is None else logits + bias


def _text_methods(model: nn.Module, d: dict[str, int]) -> Methods:
    with torch.no_grad():
        states = _encode(model, **masked_text(d["vocab"], d["src"]))[0]
    encode_inputs = masked_text(d["vocab"], d["src"])
    decode_inputs = {
        "decoder_input_ids": token_ids(d["vocab"], d["tgt"]),
        "encoder_hidden_states": states,
        "encoder_attention_mask": encode_inputs["attention_mask"],
    }
    return {"encode": (_encode, encode_inputs), "decode": (_decode, decode_inputs)}


def t5(size: Size) -> ZooModel:
    """``T5ForConditionalGeneration`` (relative attention bias, tied embeddings)."""
    from transformers import T5Config, T5ForConditionalGeneration

    d = _dims(size)
    config = T5Config(
        vocab_size=d["vocab"],
        d_model=d["d"],
        d_kv=d["d"] // d["heads"],
        d_ff=d["ffn"],
        num_layers=d["layers"],
        num_heads=d["heads"],
        dropout_rate=0.0,
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    model = T5ForConditionalGeneration(config)
    return make_model("t5", "encoder-decoder", size, model, _text_methods(model, d))


def _bart_config_kwargs(d: dict[str, int]) -> dict[str, Any]:
    return {
        "vocab_size": d["vocab"],
        "d_model": d["d"],
        "encoder_layers": d["layers"],
        "decoder_layers": d["layers"],
        "encoder_attention_heads": d["heads"],
        "decoder_attention_heads": d["heads"],
        "encoder_ffn_dim": d["ffn"],
        "decoder_ffn_dim": d["ffn"],
        "max_position_embeddings": 128,
        "pad_token_id": 0,
        "decoder_start_token_id": 2,
    }


def bart(size: Size) -> ZooModel:
    """``BartForConditionalGeneration``."""
    from transformers import BartConfig, BartForConditionalGeneration

    d = _dims(size)
    model = BartForConditionalGeneration(BartConfig(**_bart_config_kwargs(d)))
    return make_model("bart", "encoder-decoder", size, model, _text_methods(model, d))


def marian(size: Size) -> ZooModel:
    """``MarianMTModel`` (sinusoidal positions, ``final_logits_bias``)."""
    from transformers import MarianConfig, MarianMTModel

    d = _dims(size)
    model = MarianMTModel(MarianConfig(**_bart_config_kwargs(d)))
    return make_model("marian", "encoder-decoder", size, model, _text_methods(model, d))


def _whisper_encode(model: nn.Module, input_features: torch.Tensor) -> tuple:
    return (model.get_encoder()(input_features=input_features, return_dict=True)[0],)


def _whisper_decode(
    model: nn.Module, decoder_input_ids: torch.Tensor, encoder_hidden_states: torch.Tensor
) -> tuple:
    return (model.proj_out(_decoder_states(model, decoder_input_ids, encoder_hidden_states)),)


def whisper(size: Size) -> ZooModel:
    """``WhisperForConditionalGeneration``: log-mel features in, token logits out."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    d = _dims(size)
    mels, frames = pick(size, (16, 16), (80, 200))
    config = WhisperConfig(
        vocab_size=d["vocab"],
        num_mel_bins=mels,
        d_model=d["d"],
        encoder_layers=d["layers"],
        decoder_layers=d["layers"],
        encoder_attention_heads=d["heads"],
        decoder_attention_heads=d["heads"],
        encoder_ffn_dim=d["ffn"],
        decoder_ffn_dim=d["ffn"],
        max_source_positions=frames // 2,
        max_target_positions=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    model = WhisperForConditionalGeneration(config)
    features = torch.randn(1, mels, frames)
    with torch.no_grad():
        states = _whisper_encode(model, features)[0]
    methods: Methods = {
        "encode": (_whisper_encode, {"input_features": features}),
        "decode": (
            _whisper_decode,
            {"decoder_input_ids": token_ids(d["vocab"], d["tgt"]), "encoder_hidden_states": states},
        ),
    }
    return make_model("whisper", "encoder-decoder", size, model, methods)
