"""Small models shared by the test suites of every layer.

Each ``*_programs()`` function returns method name -> ``torch.export.ExportedProgram``
plus the example inputs per method, so tests can compare against eager PyTorch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.export import ExportedProgram, export


@dataclass
class MultiMethod:
    """Exported methods of one model with the eager callables and inputs they came from."""

    programs: dict[str, ExportedProgram]
    inputs: dict[str, tuple[torch.Tensor, ...]]
    eager: dict[str, nn.Module]


def save_programs(
    programs: Mapping[str, ExportedProgram], directory: Path, name: str = "{method}.pt2"
) -> dict[str, Path]:
    """Each method saved with ``torch.export.save`` in ``directory`` under ``name`` (a format
    of ``method``), as a client would upload it."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {}
    for method, program in programs.items():
        files[method] = directory / name.format(method=method)
        torch.export.save(program, files[method])
    return files


class _Method(nn.Module):
    """Wraps one bound method of a model as a module so it can be exported on its own."""

    def __init__(self, model: nn.Module, method: str) -> None:
        super().__init__()
        self.model = model
        self.method = method

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return getattr(self.model, self.method)(*args)  # type: ignore[no-any-return]


def export_methods(model: nn.Module, inputs: dict[str, tuple[torch.Tensor, ...]]) -> MultiMethod:
    """Export each named method of ``model`` on its example inputs."""
    model.eval()
    eager = {name: _Method(model, name) for name in inputs}
    programs = {name: export(eager[name], inputs[name]) for name in inputs}
    return MultiMethod(programs=programs, inputs=inputs, eager=eager)


class SharedLinearPair(nn.Module):
    """Two methods that share one large linear layer (the weight-sharing workload)."""

    def __init__(self, features: int = 512) -> None:
        super().__init__()
        self.shared = nn.Linear(features, features)
        self.head_a = nn.Linear(features, 8)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.shared(x))

    def decode(self, x: torch.Tensor) -> torch.Tensor:
        return self.head_a(torch.sigmoid(self.shared(x)))


def shared_linear_programs(features: int = 512) -> MultiMethod:
    torch.manual_seed(0)
    x = torch.randn(2, features)
    return export_methods(SharedLinearPair(features), {"encode": (x,), "decode": (x,)})


class TinySeq2Seq(nn.Module):
    """A ``torch.nn.Transformer``-style encoder/decoder sharing one token embedding."""

    def __init__(self, vocab: int = 64, d_model: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.encoder = nn.TransformerEncoderLayer(d_model, heads, 64, dropout=0.0, batch_first=True)
        self.decoder = nn.TransformerDecoderLayer(d_model, heads, 64, dropout=0.0, batch_first=True)
        self.lm_head = nn.Linear(d_model, vocab)

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.embed(tokens))  # type: ignore[no-any-return]

    def decode(self, tokens: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.decoder(self.embed(tokens), memory))  # type: ignore[no-any-return]


def seq2seq_programs() -> MultiMethod:
    torch.manual_seed(0)
    src = torch.randint(0, 64, (1, 8))
    tgt = torch.randint(0, 64, (1, 4))
    memory = torch.randn(1, 8, 32)
    return export_methods(TinySeq2Seq(), {"encode": (src,), "decode": (tgt, memory)})


class UnsupportedOpModel(nn.Module):
    """A model whose graph holds an op XNNPACK cannot take (``aten.embedding``)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.proj = nn.Linear(8, 8)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.proj(self.embed(tokens))  # type: ignore[no-any-return]


def unsupported_op_programs() -> MultiMethod:
    torch.manual_seed(0)
    tokens = torch.randint(0, 16, (1, 4))
    return export_methods(UnsupportedOpModel(), {"forward": (tokens,)})


def embedding_programs() -> MultiMethod:
    """A bare ``nn.Embedding(32, 4)`` on three token ids: an id of 32 or more is refused by
    the runtime's embedding kernel."""
    torch.manual_seed(0)
    return export_methods(nn.Embedding(32, 4), {"forward": (torch.tensor([[1, 2, 3]]),)})


class MLP(nn.Module):
    """Two linear layers with a ReLU between; the defaults are the small single-method model
    of the runtime and service tests."""

    def __init__(self, features: int = 16, hidden: int = 32, outputs: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))  # type: ignore[no-any-return]


def small_mlp_programs() -> MultiMethod:
    torch.manual_seed(0)
    return export_methods(MLP(), {"forward": (torch.randn(1, 16),)})


class AttentionPool(nn.Module):
    """SigLIP's pooling head in small: a learned probe attends over the tokens. Under XNNPACK
    int8 its attention's quantize ops stay outside the delegate, on portable kernels."""

    def __init__(self) -> None:
        super().__init__()
        self.probe = nn.Parameter(torch.randn(1, 1, 16))
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        probe = self.probe.repeat(tokens.shape[0], 1, 1)
        return self.head(self.attention(probe, tokens, tokens)[0][:, 0])  # type: ignore[no-any-return]


def attention_pool_programs() -> MultiMethod:
    torch.manual_seed(0)
    return export_methods(AttentionPool(), {"forward": (torch.randn(1, 8, 16),)})


INT8_XNNPACK = {
    "all": {"partitioners": ["xnnpack"], "quantize": "xnnpack_pt2e_int8_dynamic_per_channel"}
}
"""The plan that quantizes ``attention_pool_programs`` (dynamic int8, per channel)."""


class HFEncoderDecoder(nn.Module):
    """A tiny T5 (Hugging Face ``transformers``) built from a config with random weights.

    ``encode`` runs the encoder; ``decode`` runs the decoder over encoder states and the LM
    head. Both use T5's shared token embedding, so the two methods share constants.
    """

    def __init__(self, vocab: int = 64, d_model: int = 32, layers: int = 1) -> None:
        super().__init__()
        from transformers import T5Config, T5ForConditionalGeneration

        config = T5Config(
            vocab_size=vocab,
            d_model=d_model,
            d_kv=8,
            d_ff=2 * d_model,
            num_layers=layers,
            num_decoder_layers=layers,
            num_heads=4,
            dropout_rate=0.0,
            use_cache=False,
            decoder_start_token_id=0,
            pad_token_id=0,
        )
        self.t5 = T5ForConditionalGeneration(config)

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.t5.encoder(input_ids=tokens, return_dict=False)[0]  # type: ignore[no-any-return]

    def decode(self, tokens: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        hidden = self.t5.decoder(
            input_ids=tokens, encoder_hidden_states=memory, use_cache=False, return_dict=False
        )[0]
        return self.t5.lm_head(hidden)  # type: ignore[no-any-return]


def hf_encoder_decoder_programs(
    vocab: int = 64, d_model: int = 32, layers: int = 1, src_len: int = 8, tgt_len: int = 4
) -> MultiMethod:
    """Encoder and decoder methods of a tiny random-weight ``transformers`` T5."""
    torch.manual_seed(0)
    model = HFEncoderDecoder(vocab, d_model, layers)
    src = torch.randint(0, vocab, (1, src_len))
    tgt = torch.randint(0, vocab, (1, tgt_len))
    memory = torch.randn(1, src_len, d_model)
    return export_methods(model, {"encode": (src,), "decode": (tgt, memory)})
