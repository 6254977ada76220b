"""Stateful test workloads: a counter, a KV-cached decoder-only LM, a Whisper-style model.

Each keeps its state in registered buffers that its methods mutate. The multi-method ones
are exported as one ``torch.export`` program per method of the same module, so the methods
name the same buffers (``model.k_cache_0``, ...) and a program compiled with
``MemoryPlanningPass(share_mutable_buffers=True)`` gives them one shared allocation
(``tests.runtime.stateful_compile``). The layers are in ``tests.runtime.stateful_layers``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.export import Dim, ExportedProgram, export

from tests.models import MultiMethod
from tests.runtime.stateful_layers import Block


class Counter(nn.Module):
    """``forward(x)`` adds one to the buffer ``n`` and returns ``x + n``."""

    def __init__(self, start: float = 0.0) -> None:
        super().__init__()
        self.register_buffer("n", torch.full((1,), start))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.n.add_(1.0)
        return x + self.n


def counter_programs(start: float = 0.0) -> MultiMethod:
    """``Counter`` exported with its buffer at ``start``."""
    model = Counter(start).eval()
    x = (torch.zeros(1),)
    return MultiMethod({"forward": export(model, x)}, {"forward": x}, {"forward": model})


class CachedLM(nn.Module):
    """A decoder-only LM with its KV cache in buffers: ``prefill`` then ``decode``."""

    def __init__(
        self, vocab: int = 64, d_model: int = 32, heads: int = 2, layers: int = 2, max_len: int = 48
    ) -> None:
        super().__init__()
        self.max_len = max_len
        self.embed, self.pos = nn.Embedding(vocab, d_model), nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, max_len) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab)

    def _run(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens[0]) + self.pos(pos)
        for block in self.blocks:
            x = block(x, pos)
        return self.head(self.norm(x)).unsqueeze(0)  # type: ignore[no-any-return]

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (1, T) from position 0 -> logits (1, T, vocab); fills the cache."""
        return self._run(tokens, torch.arange(tokens.shape[1]))

    def decode(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """One token (1, 1) at position ``pos`` (1,) -> logits (1, 1, vocab)."""
        return self._run(token, pos)


class WhisperStyle(nn.Module):
    """Conv + transformer audio encoder, and a decoder with a self-attention cache.

    ``encode`` stores each decoder layer's cross-attention keys/values (a session's
    encoder state) and returns the encoder output; ``decode`` runs one token against the
    caches; ``decode_with`` is the stateless form that takes the encoder output and the
    whole token context every time.
    """

    def __init__(
        self,
        mels: int = 16,
        frames: int = 32,
        vocab: int = 64,
        d_model: int = 32,
        heads: int = 2,
        layers: int = 1,
        max_len: int = 48,
    ) -> None:
        super().__init__()
        source = frames // 2
        self.conv = nn.Conv1d(mels, d_model, 3, stride=2, padding=1)
        self.enc_pos = nn.Parameter(torch.randn(source, d_model) * 0.1)
        self.encoder = nn.TransformerEncoderLayer(
            d_model, heads, 2 * d_model, dropout=0.0, batch_first=True, norm_first=True
        )
        self.embed, self.pos = nn.Embedding(vocab, d_model), nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, heads, max_len, cross_len=source) for _ in range(layers)
        )
        self.norm, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab)

    def encode(self, features: torch.Tensor) -> torch.Tensor:
        """features (1, mels, frames) -> encoder output (1, frames/2, d)."""
        x = torch.nn.functional.gelu(self.conv(features)).transpose(1, 2) + self.enc_pos
        memory = self.encoder(x)
        for block in self.blocks:
            assert block.cross is not None
            block.cross.remember(memory[0])
        return memory  # type: ignore[no-any-return]

    def decode(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """One token (1, 1) at ``pos`` (1,) against the caches -> logits (1, 1, vocab)."""
        x = self.embed(token[0]) + self.pos(pos)
        for block in self.blocks:
            x = block(x, pos)
        return self.head(self.norm(x)).unsqueeze(0)  # type: ignore[no-any-return]

    def decode_with(self, tokens: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """Stateless: tokens (1, T) from position 0 and encoder output -> logits (1, T, V)."""
        pos = torch.arange(tokens.shape[1])
        x = self.embed(tokens[0]) + self.pos(pos)
        for block in self.blocks:
            assert block.cross is not None
            x = x + block.attn(block.norm1(x), pos)
            x = x + block.cross(x, memory[0])
            x = x + block.mlp(block.norm2(x))
        return self.head(self.norm(x)).unsqueeze(0)  # type: ignore[no-any-return]


class _Method(nn.Module):
    def __init__(self, model: nn.Module, method: str) -> None:
        super().__init__()
        self.model, self.method = model, method

    def forward(self, *args: torch.Tensor) -> Any:
        return getattr(self.model, self.method)(*args)


def reset_state(model: nn.Module) -> None:
    """Zero every buffer of ``model`` (the initial state of these workloads)."""
    for buffer in model.buffers():
        buffer.zero_()


def _export(
    model: nn.Module, method: str, args: tuple[torch.Tensor, ...], dynamic: Any = None
) -> ExportedProgram:
    shapes = None if dynamic is None else (dynamic,)  # one entry: the ``*args`` tuple
    model.requires_grad_(False)  # in-place writes to buffers need tensors without grad
    with torch.no_grad():
        program = export(_Method(model, method), args, dynamic_shapes=shapes)
    reset_state(model)
    return program


def cached_lm_programs(prompt: int = 4, **config: int) -> MultiMethod:
    """``prefill`` (dynamic length 2..max_len) and ``decode`` of a random-weight ``CachedLM``."""
    torch.manual_seed(0)
    model = CachedLM(**config).eval()
    tokens = torch.randint(0, model.head.out_features, (1, prompt))
    step = (torch.tensor([[1]]), torch.tensor([prompt]))
    length = Dim("length", min=2, max=model.max_len)
    programs = {
        "prefill": _export(model, "prefill", (tokens,), ({1: length},)),
        "decode": _export(model, "decode", step),
    }
    inputs = {"prefill": (tokens,), "decode": step}
    return MultiMethod(programs, inputs, {m: _Method(model, m) for m in programs})


def whisper_programs(**config: int) -> MultiMethod:
    """``encode``, ``decode`` and ``decode_with`` of a random-weight ``WhisperStyle``."""
    torch.manual_seed(0)
    model = WhisperStyle(**config).eval()
    mels, frames = model.conv.in_channels, 2 * model.enc_pos.shape[0]
    features = torch.randn(1, mels, frames)
    step = (torch.tensor([[1]]), torch.tensor([0]))
    with torch.no_grad():
        memory = model.encode(features)
    reset_state(model)
    context = (torch.tensor([[1, 2]]), memory)
    length = Dim("length", min=1, max=model.pos.num_embeddings)
    programs = {
        "encode": _export(model, "encode", (features,)),
        "decode": _export(model, "decode", step),
        "decode_with": _export(model, "decode_with", context, ({1: length}, None)),
    }
    inputs = {"encode": (features,), "decode": step, "decode_with": context}
    return MultiMethod(programs, inputs, {m: _Method(model, m) for m in programs})
