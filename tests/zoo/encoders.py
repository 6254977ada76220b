"""Text encoders called with an attention mask: BERT, DistilBERT, RoBERTa."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import nn

from tests.zoo.base import Size, ZooModel, make_model, masked_text, pick, vocab_size


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


def _bert_like(name: str, size: Size, model: nn.Module, seq: int) -> ZooModel:
    inputs = masked_text(vocab_size(size), seq)
    return make_model(name, "encoder", size, model, {"forward": (_encode, inputs)})


_BERT_NAMES = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
# architecture -> (config class, model class, its names for hidden/layers/heads/ffn, extras)
_ENCODERS: dict[str, tuple[str, str, tuple[str, ...], dict[str, Any]]] = {
    "bert": ("BertConfig", "BertModel", _BERT_NAMES, {"max_position_embeddings": 128}),
    "roberta": (
        "RobertaConfig",
        "RobertaModel",
        _BERT_NAMES,
        {"max_position_embeddings": 130, "pad_token_id": 0},
    ),
    "distilbert": (
        "DistilBertConfig",
        "DistilBertModel",
        ("dim", "n_layers", "n_heads", "hidden_dim"),
        {"max_position_embeddings": 128, "pad_token_id": 0},
    ),
}


def _encoder(name: str, size: Size) -> ZooModel:
    """The ``_ENCODERS`` row ``name`` at ``size``."""
    import transformers

    config_class, model_class, dim_names, extras = _ENCODERS[name]
    d = _dims(size)
    dims = dict(zip(dim_names, (d["hidden"], d["layers"], d["heads"], d["ffn"]), strict=True))
    config = getattr(transformers, config_class)(vocab_size=vocab_size(size), **dims, **extras)
    return _bert_like(name, size, getattr(transformers, model_class)(config), d["seq"])


bert = partial(_encoder, "bert")  # ``BertModel``: last hidden state and pooled output
roberta = partial(_encoder, "roberta")  # ``RobertaModel``: last hidden state and pooled output
distilbert = partial(_encoder, "distilbert")  # ``DistilBertModel``: last hidden state
