"""The model side of ``tests.generation.lm_builder``: configs, export and lowering.

Each family is a ``transformers`` causal LM small enough to lower in seconds of CPU:
Llama (RoPE, grouped-query attention), Qwen2 (biased q/k/v projections, tied embeddings)
and GPT-2 (learned positions, LayerNorm, tied embeddings).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

_LAYERS = 2
_INIT_RANGE = {"llama": 0.1, "qwen2": 0.3, "gpt2": 0.3}
"""Weight scales whose greedy text varies (at 0.02 tied embeddings repeat one token); the
Qwen2 model emits an end-of-sequence token within a few dozen tokens of most prompts."""


def _config(family: str, vocab: int, max_seq_len: int, bos: int, eos: int) -> Any:
    from transformers import GPT2Config, LlamaConfig, Qwen2Config

    if family == "gpt2":
        return GPT2Config(
            vocab_size=vocab,
            n_positions=max_seq_len,
            n_embd=64,
            n_layer=_LAYERS,
            n_head=4,
            n_inner=128,
            bos_token_id=bos,
            eos_token_id=eos,
            initializer_range=_INIT_RANGE[family],
        )
    llama_like = {
        "vocab_size": vocab,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": _LAYERS,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": max_seq_len,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "initializer_range": _INIT_RANGE[family],
    }
    if family == "qwen2":
        return Qwen2Config(**llama_like, tie_word_embeddings=True)
    return LlamaConfig(**llama_like)


def eager_model(family: str, vocab: int, max_seq_len: int, seed: int) -> nn.Module:
    """The ``family`` causal LM with weights drawn from ``seed`` (the global RNG is left
    as it was), in eval mode; BOS and end of text are ids 0 and 1 (``lm_tokenizer``)."""
    from transformers import AutoModelForCausalLM

    config = _config(family, vocab, max_seq_len, bos=0, eos=1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model: nn.Module = AutoModelForCausalLM.from_config(config)
    return model.eval()


def runner_metadata(
    model: nn.Module, max_seq_len: int, bos: int, eos: list[int], dynamic: bool
) -> dict[str, Any]:
    """The metadata methods ExecuTorch's LLM runner reads (upstream's llama export writes
    the same names)."""
    config: Any = model.config
    return {
        "get_max_seq_len": max_seq_len,
        "get_max_context_len": max_seq_len,
        "get_bos_id": bos,
        "get_eos_ids": eos,
        "get_vocab_size": int(config.vocab_size),
        "get_n_layers": int(config.num_hidden_layers),
        "use_kv_cache": True,
        "use_sdpa_with_kv_cache": False,
        "enable_dynamic_shape": dynamic,
    }


def export_lm(model: nn.Module, max_seq_len: int, dynamic: bool) -> torch.export.ExportedProgram:
    """``forward(input_ids, cache_position)`` over a static KV cache in mutable buffers;
    with ``dynamic`` the sequence length runs from 1 to ``max_seq_len``."""
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    exportable: Any = copy.deepcopy(model)
    exportable.generation_config.cache_implementation = "static"
    wrapper = TorchExportableModuleForDecoderOnlyLM(
        exportable, batch_size=1, max_cache_len=max_seq_len
    )
    length = 2 if dynamic else 1
    ids = torch.ones((1, length), dtype=torch.long)
    positions = torch.arange(length, dtype=torch.long)
    shapes = None
    if dynamic:
        seq = torch.export.Dim("seq_len", min=1, max=max_seq_len)
        shapes = {"input_ids": {1: seq}, "cache_position": {0: seq}}
    with torch.no_grad():
        return wrapper.export(input_ids=ids, cache_position=positions, dynamic_shapes=shapes)


def lower(model: nn.Module, metadata: dict[str, Any], dynamic: bool) -> bytes:
    """The ``.pte`` bytes: ``forward`` lowered to XNNPACK, the metadata as constant
    methods, mutable buffers (the KV cache) planned outside the inputs."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import (
        EdgeCompileConfig,
        ExecutorchBackendConfig,
        to_edge_transform_and_lower,
    )
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass

    program = export_lm(model, int(metadata["get_max_seq_len"]), dynamic)
    edge = to_edge_transform_and_lower(
        program,
        partitioner=[XnnpackPartitioner()],
        constant_methods=metadata,
        compile_config=EdgeCompileConfig(_check_ir_validity=False),
    )
    config = ExecutorchBackendConfig(
        extract_delegate_segments=True,
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False),
        sym_shape_eval_pass=ConstraintBasedSymShapeEvalPass(),
    )
    pte: bytes = edge.to_executorch(config).buffer
    return pte
