"""Text encoders called with an attention mask: BERT, DistilBERT, RoBERTa."""

from __future__ import annotations

import torch
from torch import nn

from tests.zoo.base import (
    Size,
    ZooModel,
    make_model,
    padded_mask,
    pick,
    token_ids,
    vocab_size,
)


def _dims(size: Size) -> dict[str, int]:
    """hidden, layers, heads, ffn and sequence length at ``size``."""
    return pick(
        size,
        {"hidden": 32, "layers": 1, "heads": 2, "ffn": 64, "seq": 12},
        {"hidden": 256, "layers": 4, "heads": 4, "ffn": 1024, "seq": 64},
    )


def _encode(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple:
    out = model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
    pooled = getattr(out, "pooler_output", None)
    return (out.last_hidden_state,) if pooled is None else (out.last_hidden_state, pooled)


def _masked_inputs(vocab: int, seq: int) -> dict[str, torch.Tensor]:
    return {"input_ids": token_ids(vocab, seq), "attention_mask": padded_mask(seq, seq // 4)}


def _bert_like(name: str, size: Size, model: nn.Module, seq: int) -> ZooModel:
    inputs = _masked_inputs(vocab_size(size), seq)
    return make_model(name, "encoder", size, model, {"forward": (_encode, inputs)})


def bert(size: Size) -> ZooModel:
    """``BertModel``: last hidden state and pooled output."""
    from transformers import BertConfig, BertModel

    d = _dims(size)
    config = BertConfig(
        vocab_size=vocab_size(size),
        hidden_size=d["hidden"],
        num_hidden_layers=d["layers"],
        num_attention_heads=d["heads"],
        intermediate_size=d["ffn"],
        max_position_embeddings=128,
    )
    return _bert_like("bert", size, BertModel(config), d["seq"])


def roberta(size: Size) -> ZooModel:
    """``RobertaModel``: last hidden state and pooled output."""
    from transformers import RobertaConfig, RobertaModel

    d = _dims(size)
    config = RobertaConfig(
        vocab_size=vocab_size(size),
        hidden_size=d["hidden"],
        num_hidden_layers=d["layers"],
        num_attention_heads=d["heads"],
        intermediate_size=d["ffn"],
        max_position_embeddings=130,
        pad_token_id=0,
    )
    return _bert_like("roberta", size, RobertaModel(config), d["seq"])


def distilbert(size: Size) -> ZooModel:
    """``DistilBertModel``: last hidden state."""
    from transformers import DistilBertConfig, DistilBertModel

    d = _dims(size)
    config = DistilBertConfig(
        vocab_size=vocab_size(size),
        dim=d["hidden"],
        n_layers=d["layers"],
        n_heads=d["heads"],
        hidden_dim=d["ffn"],
        max_position_embeddings=128,
        pad_token_id=0,
    )
    return _bert_like("distilbert", size, DistilBertModel(config), d["seq"])
