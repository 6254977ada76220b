"""Hand-written shipped models of ``bench/more_models.py``: what ``transformers`` does not give.

An LSTM and a GRU tagger (``torch.nn.LSTM``/``GRU`` exported as is, state in and out), a
detection head taking a bool mask and int class ids and answering a dict with a nested tuple,
a diffusion UNet block (GroupNorm, timestep embedding, attention, nearest upsampling) and a
BERT encoder with a dynamic batch and sequence (``Dim`` ranges).
"""

from __future__ import annotations

import inspect

import torch
from torch import nn
from torch.export import Dim

from bench.more_models_zoo import Shipped, _shipped
from tests.zoo.base import NamedMethod, make_model


class RecurrentTagger(nn.Module):
    """Embedding, a two-layer recurrent net and a tag head; the state goes in and out."""

    def __init__(self, cell: type[nn.Module], vocab: int = 64, hidden: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = cell(hidden, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, 8)

    def forward(self, tokens: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, new = self.rnn(self.embed(tokens), state if len(state) > 1 else state[0])
        news = new if isinstance(new, tuple) else (new,)
        return (self.head(out), *news)


def _recurrent(name: str, cell: type[nn.Module]) -> Shipped:
    model = RecurrentTagger(cell).eval()
    tokens = torch.randint(0, 64, (1, 12))
    state = {"h0": torch.randn(2, 1, 32)}
    if cell is nn.LSTM:
        state["c0"] = torch.randn(2, 1, 32)
    inputs = {"tokens": tokens, **state}
    module = _plain(model, tuple(inputs))
    return Shipped(name, "recurrent", "small", {"forward": module}, {"forward": inputs})


def _plain(model: nn.Module, names: tuple[str, ...]) -> NamedMethod:
    """``model`` itself as a method with named inputs: its outputs (a dict, nested tuples)
    are exported as they are, not turned into a tuple as ``named_method``'s are."""

    def forward(self: NamedMethod, *args: torch.Tensor) -> object:
        return self.model(*args)

    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(n, positional) for n in ("self", *names)]
    forward.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    cls = type(f"Whole_{'_'.join(names)}", (NamedMethod,), {"forward": forward, "names": names})
    method: NamedMethod = cls(model, lambda m, **kw: ())
    return method.eval()


def lstm() -> Shipped:
    return _recurrent("lstm", nn.LSTM)


def gru() -> Shipped:
    return _recurrent("gru", nn.GRU)


class DetectionHead(nn.Module):
    """A DETR-style head: queries attend to masked image features; answers a dict with
    ``logits``, ``boxes`` and a nested tuple (``scores``, per-query class-match ``hits``)."""

    def __init__(self, dim: int = 32, queries: int = 6, classes: int = 5) -> None:
        super().__init__()
        self.backbone = nn.Conv2d(3, dim, 8, stride=8)
        self.queries = nn.Parameter(torch.randn(queries, dim))
        self.attend = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.cls = nn.Linear(dim, classes)
        self.box = nn.Linear(dim, 4)

    def forward(
        self, pixels: torch.Tensor, mask: torch.Tensor, wanted: torch.Tensor
    ) -> dict[str, object]:
        features = self.backbone(pixels).flatten(2).transpose(1, 2)
        queries = self.queries.expand(pixels.shape[0], -1, -1)
        attended, _ = self.attend(queries, features, features, key_padding_mask=mask)
        logits = self.cls(attended)
        scores, labels = logits.softmax(-1).max(-1)
        return {
            "logits": logits,
            "boxes": self.box(attended).sigmoid(),
            "picked": (scores, labels == wanted.unsqueeze(-1)),
        }


def detection() -> Shipped:
    """Bool and int inputs, dict and nested tuple outputs (bool and int64 among them)."""
    mask = torch.zeros(1, 16, dtype=torch.bool)
    mask[:, -4:] = True
    inputs = {"pixels": torch.randn(1, 3, 32, 32), "mask": mask, "wanted": torch.tensor([2])}
    module = _plain(DetectionHead().eval(), tuple(inputs))
    return Shipped("detection", "detection", "small", {"forward": module}, {"forward": inputs})


class UNetBlock(nn.Module):
    """A diffusion UNet block: ResNet block with a timestep embedding, self-attention and
    nearest-neighbour upsampling, as in Stable Diffusion's decoder blocks."""

    def __init__(self, channels: int = 32) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(8, channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.time = nn.Linear(16, channels)
        self.norm2 = nn.GroupNorm(8, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.attn_norm = nn.GroupNorm(8, channels)
        self.attn = nn.MultiheadAttention(channels, 4, batch_first=True)
        self.up = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, sample: torch.Tensor, timestep: torch.Tensor) -> torch.Tensor:
        half = torch.exp(-torch.arange(8, dtype=torch.float32) * (9.21 / 8))
        angles = timestep.float()[:, None] * half[None]
        t = self.time(torch.cat([angles.sin(), angles.cos()], -1))
        h = self.conv1(nn.functional.silu(self.norm1(sample))) + t[:, :, None, None]
        h = sample + self.conv2(nn.functional.silu(self.norm2(h)))
        b, c, hh, ww = h.shape
        seq = self.attn_norm(h).flatten(2).transpose(1, 2)
        h = h + self.attn(seq, seq, seq)[0].transpose(1, 2).reshape(b, c, hh, ww)
        return self.up(nn.functional.interpolate(h, scale_factor=2.0, mode="nearest"))


def unet_block() -> Shipped:
    inputs = {"sample": torch.randn(1, 32, 8, 8), "timestep": torch.tensor([500])}
    module = _plain(UNetBlock().eval(), tuple(inputs))
    return Shipped("unet-block", "diffusion", "small", {"forward": module}, {"forward": inputs})


def _bert_hidden(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple:
    out = model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
    return (out.last_hidden_state, out.pooler_output)


def bert_dynamic() -> Shipped:
    """BERT with ``Dim("batch", 1..8)`` and ``Dim("seq", 4..64)``; run at 2x16 and 3x24."""
    from transformers import BertConfig, BertModel

    c = BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64,
    )  # fmt: skip
    inputs = {
        "input_ids": torch.randint(1, 128, (2, 16)),
        "attention_mask": torch.ones(2, 16, dtype=torch.long),
    }
    inputs["attention_mask"][1, -4:] = 0
    model = make_model(
        "bert-dynamic", "encoder", "small", BertModel(c), {"forward": (_bert_hidden, inputs)}
    )
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=4, max=64)
    dims = {"forward": ({0: batch, 1: seq}, {0: batch, 1: seq})}
    other = {
        "input_ids": torch.randint(1, 128, (3, 24)),
        "attention_mask": torch.ones(3, 24, dtype=torch.long),
    }
    return _shipped("bert-dynamic", model, dynamic=dims, other_inputs={"forward": other})
