"""A tiny Llama exported with upstream's LLM export tooling (``export_llama``).

``build_upstream_llama(workdir, quantization)`` writes a seeded random checkpoint and
``params.json`` for ``executorch.examples.models.llama`` (two layers, dim 64, grouped-query
attention, the vocabulary of :mod:`tests.generation.lm_tokenizer`), and exports it with
``executorch.examples.models.llama.export_llama_lib.export_llama``: the KV cache in mutable
buffers, ``use_sdpa_with_kv_cache`` (upstream's ``llama::update_cache`` and
``llama::custom_sdpa`` operators), dynamic shapes, XNNPACK, fp32 or a ``qmode`` linear
recipe (``8da4w``: int8 dynamic activations, int4 grouped weights). Its ``forward(tokens,
input_pos)`` returns the logits of the last position only (``[1, vocab]``).

The custom operators' kernels live in ``executorch.extension.llm.custom_ops``'s shared
library; importing it registers them for ``executorch.runtime`` (pteforge's runtime
workers preload it). Files are cached like :mod:`tests.generation.lm_builder`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tests import tiers
from tests.generation import lm_builder, lm_tokenizer
from tests.generation.lm_builder import LmFiles

MAX_SEQ_LEN = 64
_SEED = 0
_INIT_STD = 0.3
"""A weight scale whose greedy text varies (at 0.05 it repeats one token)."""
_PARAMS = {
    "dim": 64,
    "n_layers": 2,
    "n_heads": 4,
    "n_kv_heads": 2,
    "hidden_dim": 128,
    "multiple_of": 32,
    "norm_eps": 1e-5,
}
QUANTIZATIONS = (None, "8da4w")
"""The recipes built here: fp32 and upstream's int8-activation, int4-weight linears."""


def build_upstream_llama(workdir: Path | None = None, quantization: str | None = None) -> LmFiles:
    """Build (or take from the cache) the tiny Llama exported by ``export_llama`` with
    ``quantization`` (None: fp32; a ``qmode`` such as ``"8da4w"``), copied to ``workdir``.

    ``LmFiles.eager`` is the same checkpoint in upstream's ``Transformer`` without a KV
    cache (it returns the last position's logits); use :func:`eager_greedy` and
    :func:`pte_greedy` from this module, not ``lm_builder``'s. A test that calls this
    carries the ``zoo`` marker.
    """
    tiers.need("zoo")
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {quantization!r}; expected {QUANTIZATIONS}")
    key = "upstream-" + lm_builder._cache_key("llama", MAX_SEQ_LEN, bool(quantization))
    key += f"-{quantization or 'fp32'}"
    cached = lm_builder._cached(key, lambda d: _build_files(d, quantization))
    target = cached if workdir is None else lm_builder._copy(cached, workdir)
    metadata = json.loads((target / "metadata.json").read_text())
    return LmFiles(
        family="llama",
        pte=target / "model.pte",
        tokenizer_json=target / "tokenizer.json",
        tokenizer_config=target / "tokenizer_config.json",
        eager=eager_model(target / "params.json", target / "checkpoint.pth"),
        metadata=metadata,
    )


def eager_model(params_json: Path, checkpoint: Path) -> nn.Module:
    """Upstream's ``Transformer`` of ``params_json`` without a KV cache, ``checkpoint``'s
    weights loaded (a file this module wrote), in eval mode."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    params = json.loads(params_json.read_text())
    args = ModelArgs(**params, use_kv_cache=False, max_seq_len=MAX_SEQ_LEN)
    model = construct_transformer(args)
    model.load_state_dict(torch.load(checkpoint, weights_only=True))
    return model.eval()


def eager_greedy(lm: LmFiles, prompt_ids: Sequence[int], max_new_tokens: int) -> list[int]:
    """Greedy tokens of the eager model, the whole sequence fed at each step, stopping after
    an end-of-sequence token."""
    ids = list(prompt_ids)
    tokens: list[int] = []
    with torch.no_grad():
        while len(tokens) < max_new_tokens and (not tokens or tokens[-1] not in lm.eos_ids):
            tokens.append(int(lm.eager(torch.tensor([ids + tokens]))[0].argmax()))
    return tokens


def pte_greedy(lm: LmFiles, prompt_ids: Sequence[int], max_new_tokens: int) -> list[int]:
    """An in-process greedy loop over the ``.pte`` in ``executorch.runtime`` (the custom
    operators registered first): the prompt in one call, then one call per token."""
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (registers kernels)
    from executorch.runtime import Runtime

    forward = Runtime.get().load_program(lm.pte).load_method("forward")
    vocab = int(lm.metadata["get_vocab_size"])
    position, chunk = 0, list(prompt_ids)
    tokens: list[int] = []
    while len(tokens) < max_new_tokens and (not tokens or tokens[-1] not in lm.eos_ids):
        start = torch.tensor([position], dtype=torch.long)
        logits = forward.execute([torch.tensor([chunk], dtype=torch.long), start])[0]
        position += len(chunk)
        tokens.append(int(logits.reshape(-1, vocab)[-1].argmax()))
        chunk = [tokens[-1]]
    return tokens


def _build_files(directory: Path, quantization: str | None) -> None:
    """Train the tokenizer, write the checkpoint and params, export with upstream's tool."""
    from tokenizers import Tokenizer

    tokenizer_json, _ = lm_tokenizer.train_tokenizer(directory)
    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    params = {**_PARAMS, "vocab_size": tokenizer.get_vocab_size()}
    (directory / "params.json").write_text(json.dumps(params))
    torch.save(_seeded_weights(directory / "params.json"), directory / "checkpoint.pth")
    eos = [tokenizer.token_to_id(t) for t in (lm_tokenizer.EOS, lm_tokenizer.IM_END)]
    bos = tokenizer.token_to_id(lm_tokenizer.BOS)
    _export(directory, {"get_bos_id": bos, "get_eos_ids": eos}, quantization)
    _write_metadata(directory)


def _seeded_weights(params_json: Path) -> dict[str, torch.Tensor]:
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    params = json.loads(params_json.read_text())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_SEED)
        model = construct_transformer(ModelArgs(**params, max_seq_len=MAX_SEQ_LEN))
        for parameter in model.parameters():
            if parameter.dim() > 1:
                nn.init.normal_(parameter, std=_INIT_STD)
    return dict(model.state_dict())


def _export(directory: Path, metadata: dict[str, Any], quantization: str | None) -> None:
    """``export_llama`` as its ``llama_xnnpack.yaml`` recipe, at this model's size."""
    from executorch.examples.models.llama.export_llama_lib import export_llama
    from executorch.extension.llm.export.config.llm_config import DtypeOverride, LlmConfig

    config = LlmConfig()
    config.base.checkpoint = str(directory / "checkpoint.pth")
    config.base.params = str(directory / "params.json")
    config.base.metadata = json.dumps(metadata)
    config.model.use_kv_cache = True
    config.model.use_sdpa_with_kv_cache = True
    config.model.enable_dynamic_shape = True
    config.model.dtype_override = DtypeOverride("fp32")
    config.export.max_seq_length = MAX_SEQ_LEN
    config.export.max_context_length = MAX_SEQ_LEN
    config.export.output_dir = str(directory)
    config.export.output_name = str(directory / "model.pte")
    config.backend.xnnpack.enabled = True
    if quantization:
        config.quantization.qmode = quantization
        config.quantization.group_size = 32
    export_llama(config)


def _write_metadata(directory: Path) -> None:
    """The ``.pte``'s metadata methods' values, read back from the program."""
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(directory / "model.pte")
    values: dict[str, Any] = {}
    for name in sorted(program.method_names - {"forward"}):
        result = program.load_method(name).execute([])
        values[name] = result if name == "get_eos_ids" else result[0]
    (directory / "metadata.json").write_text(json.dumps(values, indent=1))
