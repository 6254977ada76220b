"""The ``transformers`` models of ``bench/hf_outputs.py``, called the direct way.

Tiny configs, random weights (nothing is downloaded). Each is the model object itself,
exported with ``torch.export.export(model, args, kwargs)``: no wrapper that picks a field,
so every program returns the model's ``ModelOutput`` (LMs with ``use_cache=False``, so the
output holds no cache).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

VOCAB, SEQ = 100, 8
_TEXT = {"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64}
_SPECIAL_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


@dataclass
class Direct:
    """A model and the args and kwargs it is exported and called with."""

    name: str
    model: torch.nn.Module
    args: tuple[torch.Tensor, ...]
    kwargs: dict[str, torch.Tensor]

    def export(self) -> torch.export.ExportedProgram:
        """``torch.export.export`` of the model itself."""
        with torch.no_grad():
            return torch.export.export(self.model, self.args, self.kwargs)

    def eager(self) -> list[torch.Tensor]:
        """The eager outputs' leaves, in the order the program returns them."""
        with torch.no_grad():
            out = self.model(*self.args, **self.kwargs)
        return [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]

    def flat_inputs(self) -> list[torch.Tensor]:
        """The inputs in the program's order: the args, then the kwargs as given."""
        return [*self.args, *self.kwargs.values()]


def _ids() -> torch.Tensor:
    return torch.randint(1, VOCAB, (1, SEQ))


def bert() -> Direct:
    """``BertModel`` with keyword inputs and a padding mask."""
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=VOCAB, num_hidden_layers=1, **_TEXT)
    mask = torch.ones(1, SEQ, dtype=torch.long)
    mask[:, -2:] = 0
    kwargs = {"input_ids": _ids(), "attention_mask": mask}
    return Direct("bert (kwargs)", BertModel(config).eval(), (), kwargs)


def gpt2() -> Direct:
    """``GPT2LMHeadModel``'s plain forward."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2, n_positions=64, bos_token_id=1,
        eos_token_id=2,
    )  # fmt: skip
    config.use_cache = False
    return Direct("gpt2-lm", GPT2LMHeadModel(config).eval(), (_ids(),), {})


def llama() -> Direct:
    """``LlamaForCausalLM``'s plain forward."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB, num_hidden_layers=1, num_key_value_heads=1, use_cache=False, **_TEXT
    )
    return Direct("llama-lm", LlamaForCausalLM(config).eval(), (_ids(),), {})


def _vit_config() -> Any:
    from transformers import ViTConfig

    return ViTConfig(image_size=32, patch_size=8, num_hidden_layers=1, num_labels=10, **_TEXT)


def vit() -> Direct:
    """``ViTModel`` (last hidden state and pooler output)."""
    from transformers import ViTModel

    return Direct("vit", ViTModel(_vit_config()).eval(), (torch.randn(1, 3, 32, 32),), {})


def vit_classifier() -> Direct:
    """``ViTForImageClassification`` (logits)."""
    from transformers import ViTForImageClassification

    model = ViTForImageClassification(_vit_config()).eval()
    return Direct("vit-cls", model, (torch.randn(1, 3, 32, 32),), {})


def whisper_encoder() -> Direct:
    """``WhisperModel(config).get_encoder()`` on log-mel features."""
    from transformers import WhisperConfig, WhisperModel

    config = WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=16, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_source_positions=16, max_target_positions=16,
        decoder_start_token_id=1, **_SPECIAL_IDS,
    )  # fmt: skip
    encoder = WhisperModel(config).eval().get_encoder()
    return Direct("whisper-encoder", encoder, (torch.randn(1, 16, 32),), {})


def t5_encoder() -> Direct:
    """``T5EncoderModel``."""
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_heads=2
    )  # fmt: skip
    return Direct("t5-encoder", T5EncoderModel(config).eval(), (_ids(),), {})


BUILDERS: dict[str, Callable[[], Direct]] = {
    "bert": bert, "gpt2": gpt2, "llama": llama, "vit": vit, "vit-cls": vit_classifier,
    "whisper-encoder": whisper_encoder, "t5-encoder": t5_encoder,
}  # fmt: skip
