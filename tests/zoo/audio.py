"""Audio: wav2vec2 on raw samples."""

from __future__ import annotations

import torch
from torch import nn

from tests.zoo.base import Size, ZooModel, make_model, pick


def _speech(model: nn.Module, input_values: torch.Tensor) -> tuple:
    return (model(input_values=input_values, return_dict=True).last_hidden_state,)


def wav2vec2(size: Size) -> ZooModel:
    """``Wav2Vec2Model``: raw 16 kHz samples in, frame features out."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    hidden = pick(size, 32, 256)
    config = Wav2Vec2Config(
        hidden_size=hidden,
        num_hidden_layers=pick(size, 1, 4),
        num_attention_heads=pick(size, 2, 4),
        intermediate_size=2 * hidden,
        conv_dim=pick(size, (16, 16), (256, 256, 256, 256)),
        conv_stride=pick(size, (5, 2), (5, 2, 2, 2)),
        conv_kernel=pick(size, (10, 3), (10, 3, 3, 3)),
        num_conv_pos_embeddings=pick(size, 8, 32),
        num_conv_pos_embedding_groups=pick(size, 2, 8),
        vocab_size=32,
    )
    samples = torch.randn(1, pick(size, 400, 16000))
    methods = {"forward": (_speech, {"input_values": samples})}
    return make_model("wav2vec2", "audio", size, Wav2Vec2Model(config), methods)
