"""Layers of the stateful test workloads: attention whose keys and values live in buffers.

``CachedAttention`` writes each position's keys/values into ``(max_len, H, D)`` buffers;
``CrossAttention`` stores the encoder's keys/values (``remember``) for later calls.
"""

from __future__ import annotations

import torch
from torch import nn

NEG = -1e9  # additive mask for positions not yet written (finite: no NaN from -inf rows)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """q (T, H, D), k/v (S, H, D), additive bias (T, S) -> (T, H*D)."""
    scores = torch.einsum("thd,shd->hts", q, k) / (q.shape[-1] ** 0.5) + bias
    out = torch.einsum("hts,shd->thd", torch.softmax(scores, dim=-1), v)
    return out.reshape(out.shape[0], -1)


class CachedAttention(nn.Module):
    """Self-attention whose keys and values are kept in ``(max_len, H, D)`` buffers."""

    def __init__(self, d_model: int, heads: int, max_len: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, d_model // heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.register_buffer("k_cache", torch.zeros(max_len, heads, self.head_dim))
        self.register_buffer("v_cache", torch.zeros(max_len, heads, self.head_dim))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x (T, d) at positions ``pos`` (T,): writes their keys/values, attends to <= pos."""
        q, k, v = self.qkv(x).reshape(x.shape[0], 3, self.heads, self.head_dim).unbind(1)
        self.k_cache[pos] = k
        self.v_cache[pos] = v
        slots = torch.arange(self.k_cache.shape[0])
        bias = torch.where(slots[None, :] <= pos[:, None], 0.0, NEG)
        return self.out(attend(q, self.k_cache, self.v_cache, bias))  # type: ignore[no-any-return]


class Block(nn.Module):
    """Pre-norm transformer block with cached self-attention (and optional cross-attention)."""

    def __init__(self, d_model: int, heads: int, max_len: int, cross_len: int = 0) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = CachedAttention(d_model, heads, max_len)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 2 * d_model), nn.GELU(), nn.Linear(2 * d_model, d_model)
        )
        self.cross = CrossAttention(d_model, heads, cross_len) if cross_len else None

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), pos)
        if self.cross is not None:
            x = x + self.cross(x)
        return x + self.mlp(self.norm2(x))  # type: ignore[no-any-return]


class CrossAttention(nn.Module):
    """Attention over encoder keys/values that ``remember`` stores in buffers."""

    def __init__(self, d_model: int, heads: int, source_len: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, d_model // heads
        self.norm = nn.LayerNorm(d_model)
        self.q, self.kv, self.out = (
            nn.Linear(d_model, d_model),
            nn.Linear(d_model, 2 * d_model),
            nn.Linear(d_model, d_model),
        )
        self.register_buffer("k_mem", torch.zeros(source_len, heads, self.head_dim))
        self.register_buffer("v_mem", torch.zeros(source_len, heads, self.head_dim))

    def keys_values(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """memory (S, d) -> keys, values (S, H, D)."""
        k, v = self.kv(memory).reshape(memory.shape[0], 2, self.heads, self.head_dim).unbind(1)
        return k, v

    def remember(self, memory: torch.Tensor) -> None:
        k, v = self.keys_values(memory)
        self.k_mem.copy_(k)
        self.v_mem.copy_(v)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        k, v = (self.k_mem, self.v_mem) if memory is None else self.keys_values(memory)
        q = self.q(self.norm(x)).reshape(x.shape[0], self.heads, self.head_dim)
        bias = torch.zeros(x.shape[0], k.shape[0])
        return self.out(attend(q, k, v, bias))  # type: ignore[no-any-return]
