"""Vision models: ViT, ResNet, ConvNeXt and CLIP (text and vision towers as two methods)."""

from __future__ import annotations

import torch
from torch import nn

from tests.zoo.base import Methods, Size, ZooModel, make_model, masked_text, pick, vocab_size

_TOKENS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


def _image(size: Size) -> torch.Tensor:
    side = pick(size, 32, 224)
    return torch.randn(1, 3, side, side)


def _classify(model: nn.Module, pixel_values: torch.Tensor) -> tuple:
    return (model(pixel_values=pixel_values, return_dict=True).logits,)


def _embed(model: nn.Module, pixel_values: torch.Tensor) -> tuple:
    out = model(pixel_values=pixel_values, return_dict=True)
    return (out.last_hidden_state, out.pooler_output)


def vit(size: Size) -> ZooModel:
    """``ViTModel``: patch tokens and the pooled [CLS] state."""
    from transformers import ViTConfig, ViTModel

    hidden, layers, patch = pick(size, (32, 1, 8), (384, 6, 16))
    config = ViTConfig(
        image_size=pick(size, 32, 224),
        patch_size=patch,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=pick(size, 2, 6),
        intermediate_size=4 * hidden,
    )
    methods = {"forward": (_embed, {"pixel_values": _image(size)})}
    return make_model("vit", "vision", size, ViTModel(config), methods)


def resnet(size: Size) -> ZooModel:
    """``ResNetForImageClassification`` (convolutions with batch norm)."""
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(
        embedding_size=pick(size, 16, 64),
        hidden_sizes=pick(size, [16, 32], [64, 128, 256, 512]),
        depths=pick(size, [1, 1], [2, 2, 2, 2]),
        layer_type="basic",
        num_labels=10,
    )
    methods = {"forward": (_classify, {"pixel_values": _image(size)})}
    return make_model("resnet", "vision", size, ResNetForImageClassification(config), methods)


def convnext(size: Size) -> ZooModel:
    """``ConvNextForImageClassification`` (depthwise convolutions, layer norm)."""
    from transformers import ConvNextConfig, ConvNextForImageClassification

    config = ConvNextConfig(
        hidden_sizes=pick(size, [16, 32], [96, 192, 384, 768]),
        depths=pick(size, [1, 1], [2, 2, 4, 2]),
        num_stages=pick(size, 2, 4),
        num_labels=10,
    )
    model = ConvNextForImageClassification(config)
    methods = {"forward": (_classify, {"pixel_values": _image(size)})}
    return make_model("convnext", "vision", size, model, methods)


def _text_tower(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple:
    out = model.text_model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
    return (model.text_projection(out.pooler_output),)


def _vision_tower(model: nn.Module, pixel_values: torch.Tensor) -> tuple:
    out = model.vision_model(pixel_values=pixel_values, return_dict=True)
    return (model.visual_projection(out.pooler_output),)


def clip(size: Size) -> ZooModel:
    """``CLIPModel`` as two methods: ``text`` and ``vision`` embeddings."""
    from transformers import CLIPConfig, CLIPModel

    hidden, layers, seq = pick(size, (32, 1, 8), (256, 4, 32))
    tower = {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": pick(size, 2, 4),
        "intermediate_size": 4 * hidden,
    }
    config = CLIPConfig(
        text_config={
            **tower,
            "vocab_size": vocab_size(size),
            "max_position_embeddings": 64,
            **_TOKENS,
        },
        vision_config={**tower, "image_size": pick(size, 32, 224), "patch_size": 16},
        projection_dim=pick(size, 16, 128),
    )
    methods: Methods = {
        "text": (_text_tower, masked_text(vocab_size(size), seq)),
        "vision": (_vision_tower, {"pixel_values": _image(size)}),
    }
    return make_model("clip", "two-tower", size, CLIPModel(config), methods)
