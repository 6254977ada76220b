"""Models people ship that ``tests/zoo`` does not cover, exported the way people export them.

Tiny ``transformers`` configs with random weights (nothing is downloaded) and hand-written
modules for what ``transformers`` does not give: an LSTM/GRU tagger, a detection head with
dict outputs, bool and int inputs, a diffusion UNet block, dynamic batch and sequence with
``Dim`` ranges. Each builder returns a ``Shipped`` (a ``tests.zoo`` ``ZooModel`` whose eager
outputs are the flattened pytree leaves, and which exports with its dynamic shapes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.export import ExportedProgram, export
from torch.utils._pytree import tree_leaves

from tests.zoo.base import ZooModel, make_model


@dataclass
class Shipped(ZooModel):
    """A ``ZooModel`` with dynamic shapes per method and inputs of a second shape."""

    dynamic: dict[str, Any] = field(default_factory=dict)
    other_inputs: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)

    def methods(self) -> dict[str, ExportedProgram]:
        """``torch.export`` per method with its ``dynamic_shapes`` (cached)."""
        if self._programs is None:
            with torch.no_grad():
                self._programs = {
                    name: export(
                        module, self.example_inputs(name), dynamic_shapes=self.dynamic.get(name)
                    )
                    for name, module in self.modules.items()
                }
        return self._programs

    def eager(self, method: str, inputs: Any = None) -> tuple[torch.Tensor, ...]:
        """Eager outputs flattened as ``torch.export`` flattens them (dicts, nested tuples)."""
        given = self.inputs[method] if inputs is None else inputs
        with torch.no_grad():
            return tuple(tree_leaves(self.modules[method](*given.values())))


def _shipped(name: str, model: ZooModel, **extra: Any) -> Shipped:
    return Shipped(name, model.family, model.size, model.modules, model.inputs, **extra)


def _image(side: int = 32, batch: int = 1) -> torch.Tensor:
    return torch.randn(batch, 3, side, side)


def _hf(name: str, model: nn.Module, fn: Any, inputs: dict[str, torch.Tensor]) -> Shipped:
    return _shipped(name, make_model(name, "vision", "small", model, {"forward": (fn, inputs)}))


def _leaves(model: nn.Module, pixel_values: torch.Tensor) -> tuple:
    out = model(pixel_values=pixel_values, return_dict=True)
    return tuple(v for v in out.values() if isinstance(v, torch.Tensor))


def deit() -> Shipped:
    from transformers import DeiTConfig, DeiTForImageClassificationWithTeacher

    c = DeiTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64, num_labels=10,
    )  # fmt: skip
    return _hf(
        "deit", DeiTForImageClassificationWithTeacher(c), _leaves, {"pixel_values": _image()}
    )


def swin() -> Shipped:
    from transformers import SwinConfig, SwinForImageClassification

    c = SwinConfig(
        image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
        window_size=4, num_labels=10,
    )  # fmt: skip
    return _hf("swin", SwinForImageClassification(c), _leaves, {"pixel_values": _image()})


def efficientnet() -> Shipped:
    from transformers import EfficientNetConfig, EfficientNetForImageClassification

    c = EfficientNetConfig(
        image_size=32, width_coefficient=0.1, depth_coefficient=0.1, hidden_dim=128, num_labels=10
    )
    model = EfficientNetForImageClassification(c)
    nn.init.normal_(model.classifier.weight, std=0.5)  # initialised to zeros: outputs all 0
    return _hf("efficientnet", model, _leaves, {"pixel_values": _image()})


def mobilevitv2() -> Shipped:
    from transformers import MobileViTV2Config, MobileViTV2ForImageClassification

    c = MobileViTV2Config(image_size=64, width_multiplier=0.25, num_labels=10)
    model = MobileViTV2ForImageClassification(c)
    return _hf("mobilevitv2", model, _leaves, {"pixel_values": _image(64)})


def dinov2() -> Shipped:
    from transformers import Dinov2Config, Dinov2Model

    c = Dinov2Config(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, mlp_ratio=2,
    )  # fmt: skip
    return _hf("dinov2", Dinov2Model(c), _leaves, {"pixel_values": _image()})


def segformer() -> Shipped:
    from transformers import SegformerConfig, SegformerForSemanticSegmentation

    c = SegformerConfig(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
        num_attention_heads=[1, 2], decoder_hidden_size=32, num_labels=5,
    )  # fmt: skip
    model = SegformerForSemanticSegmentation(c)
    return _hf("segformer", model, _leaves, {"pixel_values": _image()})


def yolos() -> Shipped:
    from transformers import YolosConfig, YolosForObjectDetection

    c = YolosConfig(
        image_size=[32, 32], patch_size=8, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64, num_detection_tokens=5, num_labels=3,
    )  # fmt: skip
    model = YolosForObjectDetection(c)
    return _hf("yolos", model, _leaves, {"pixel_values": _image()})


def _speech(model: nn.Module, input_values: torch.Tensor) -> tuple:
    return (model(input_values=input_values, return_dict=True).last_hidden_state,)


def hubert() -> Shipped:
    from transformers import HubertConfig, HubertModel

    c = HubertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
        num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2, vocab_size=32,
    )  # fmt: skip
    methods = {"forward": (_speech, {"input_values": torch.randn(1, 400)})}
    return _shipped("hubert", make_model("hubert", "audio", "small", HubertModel(c), methods))


def _features(out: Any) -> tuple:
    """transformers 5 returns a ``ModelOutput`` from ``get_*_features``; its pooled tensor
    (a ``ModelOutput`` in a program's outputs is refused at upload: see the report)."""
    return (out if isinstance(out, torch.Tensor) else out.pooler_output,)


def _siglip_text(model: nn.Module, input_ids: torch.Tensor) -> tuple:
    return _features(model.get_text_features(input_ids=input_ids))


def _siglip_image(model: nn.Module, pixel_values: torch.Tensor) -> tuple:
    return _features(model.get_image_features(pixel_values=pixel_values))


def siglip() -> Shipped:
    """``SiglipModel`` as two methods (text and image towers share nothing)."""
    from transformers import SiglipConfig, SiglipModel

    tower = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    c = SiglipConfig(
        text_config={**tower, "intermediate_size": 64, "vocab_size": 128,
                     "max_position_embeddings": 16},
        vision_config={**tower, "intermediate_size": 64, "image_size": 32, "patch_size": 8},
    )  # fmt: skip
    methods = {
        "text": (_siglip_text, {"input_ids": torch.randint(1, 128, (1, 16))}),
        "image": (_siglip_image, {"pixel_values": _image()}),
    }
    return _shipped("siglip", make_model("siglip", "two-tower", "small", SiglipModel(c), methods))
