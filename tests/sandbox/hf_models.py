"""Tiny ``transformers`` models called the way people export them: with attention masks.

Random weights from configs (nothing is downloaded); hidden size 32 and one layer, so each
exports in about a second. Their graphs hold the operators real exports do (``aten.__and__``
from combining masks, ``scaled_dot_product_attention``, ``_assert_tensor_metadata`` ...).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tests.models import save_programs

VOCAB = 100
HIDDEN = 32
SEQ = 8


class _Method(nn.Module):
    """``fn(model, *inputs)`` as a module, so each method exports on its own."""

    def __init__(self, model: nn.Module, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.model = model.eval()
        self.fn = fn

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.fn(self.model, *inputs)


def ids_and_mask(length: int = SEQ, pad: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids (batch 1) and an attention mask whose last ``pad`` tokens are padding."""
    mask = torch.ones(1, length, dtype=torch.long)
    mask[:, -pad:] = 0
    return torch.randint(1, VOCAB, (1, length)), mask


def _encoder_with_mask(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, attention_mask=mask).last_hidden_state  # type: ignore[no-any-return]


_ENCODER_DIMS = {
    "vocab_size": VOCAB,
    "hidden_size": HIDDEN,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
}


def tiny_encoder(kind: str, **extra: int) -> nn.Module:
    """``transformers.<kind>Model`` at ``_ENCODER_DIMS`` (plus ``extra``), random weights,
    in eval mode."""
    import transformers  # imported when a model is built, not when tests are collected

    config = getattr(transformers, f"{kind}Config")(**_ENCODER_DIMS, **extra)
    return getattr(transformers, f"{kind}Model")(config).eval()  # type: ignore[no-any-return]


def _masked_encoder(
    kind: str, **extra: int
) -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    """:func:`tiny_encoder` called with a mask."""
    encoder = _Method(tiny_encoder(kind, **extra), _encoder_with_mask)
    return {"forward": (encoder, ids_and_mask())}


def albert() -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    """An ALBERT encoder called with an attention mask."""
    return _masked_encoder("Albert", embedding_size=16)


def bert() -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    """A BERT encoder called with an attention mask."""
    return _masked_encoder("Bert")


def _whisper_encode(model: nn.Module, features: torch.Tensor) -> torch.Tensor:
    return model.encoder(features).last_hidden_state  # type: ignore[no-any-return,operator]


def _whisper_decode(
    model: nn.Module, ids: torch.Tensor, encoded: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    out = model.decoder(  # type: ignore[operator]
        input_ids=ids, encoder_hidden_states=encoded, attention_mask=mask
    )
    return out.last_hidden_state  # type: ignore[no-any-return]


def _both_sides(**dims: int) -> dict[str, int]:
    """``encoder_<name>`` and ``decoder_<name>`` for each of ``dims``."""
    return {f"{side}_{name}": v for name, v in dims.items() for side in ("encoder", "decoder")}


_WHISPER_TOKENS = {
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 1,
}


def tiny_whisper_config(
    vocab: int, mel_bins: int, source_positions: int, target_positions: int, **extra: float
) -> Any:
    """A ``transformers.WhisperConfig`` of one layer each side at hidden size ``HIDDEN`` (two
    heads, feed-forward 64); token 0 pads, 1 starts the decoder, 2 ends (plus ``extra``)."""
    import transformers  # imported when a model is built, not when tests are collected

    return transformers.WhisperConfig(
        vocab_size=vocab,
        num_mel_bins=mel_bins,
        max_source_positions=source_positions,
        max_target_positions=target_positions,
        d_model=HIDDEN,
        **_both_sides(layers=1, attention_heads=2, ffn_dim=64),
        **_WHISPER_TOKENS,
        **extra,
    )


def whisper() -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    """A Whisper-style encoder (mel features) and decoder (tokens, encoder states, mask)."""
    import transformers  # imported when a model is built, not when tests are collected

    config = tiny_whisper_config(VOCAB, mel_bins=8, source_positions=16, target_positions=16)
    model = transformers.WhisperModel(config)
    ids, mask = ids_and_mask(length=4, pad=1)
    features = torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions)
    encoded = torch.randn(1, config.max_source_positions, HIDDEN)
    return {
        "encode": (_Method(model, _whisper_encode), (features,)),
        "decode": (_Method(model, _whisper_decode), (ids, encoded, mask)),
    }


MODELS: dict[str, Callable[[], dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]]] = {
    "albert": albert,
    "bert": bert,
    "whisper": whisper,
}
# (model, method) of every export, known without building the models
EXPORTS = (("albert", "forward"), ("bert", "forward"), ("whisper", "decode"), ("whisper", "encode"))


def export_model(name: str, directory: Path) -> dict[str, Path]:
    """Export each method of model ``name`` and ``torch.export.save`` it, as a client would."""
    torch.manual_seed(0)
    with torch.no_grad():
        programs = {
            method: torch.export.export(module, inputs)
            for method, (module, inputs) in MODELS[name]().items()
        }
    return save_programs(programs, directory, f"{name}_{{method}}.pt2")
