"""Tiny encoder-decoder models exported the way ``transformers`` exports them for ExecuTorch.

``transformers.integrations.executorch.Seq2SeqLMExportableModule`` (what optimum-executorch
builds on) exports two methods: ``encoder`` (input ids, or log-mel features for Whisper, to
hidden states) and ``text_decoder`` (one token, the encoder's states and ``cache_position``
to logits), whose self-attention KV cache is a ``StaticCache`` held in mutable buffers; the
cross-attention keys and values are recomputed from the encoder's states at every step. The
installed version supports T5, BART and Marian as they are. Whisper needs what
optimum-executorch adds: the encoder called with its features positionally (the module
passes ``input_ids=``) and ``proj_out`` as the LM head (the module reads ``lm_head``).

Random weights, tiny configs (d_model 32, one layer each side): each exports in a second or
two. ``reference_decode`` is the greedy decode of the eager model without any cache.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn
from torch.export import ExportedProgram

from tests.sandbox.hf_models import tiny_whisper_config

MAX_CACHE = 32
"""The decoder's static cache length: the most tokens one session can decode."""
VOCAB = 128
SOURCE = 10
"""Source tokens of the text models' example input."""
MAX_SOURCE = 64
"""The text models' longest source (``max_hidden_seq_length``; the module's default, 4096,
plans hundreds of MiB of attention scores per loaded copy even at this size)."""


@dataclass
class Seq2Seq:
    """One exported model: its two methods, the eager model and the decode's inputs."""

    name: str
    model: nn.Module
    programs: dict[str, ExportedProgram]
    source: torch.Tensor
    start: int
    eos: int


def _bart_kwargs() -> dict[str, Any]:
    return {
        "vocab_size": VOCAB,
        "d_model": 32,
        "encoder_layers": 1,
        "decoder_layers": 1,
        "encoder_attention_heads": 2,
        "decoder_attention_heads": 2,
        "encoder_ffn_dim": 64,
        "decoder_ffn_dim": 64,
        "max_position_embeddings": 64,
        "pad_token_id": 0,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "decoder_start_token_id": 0,
    }


def _t5() -> nn.Module:
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=1,
                      num_heads=2, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0,
                      eos_token_id=1)  # fmt: skip
    return T5ForConditionalGeneration(config)


def _bart() -> nn.Module:
    from transformers import BartConfig, BartForConditionalGeneration

    return BartForConditionalGeneration(BartConfig(**_bart_kwargs()))


def _marian() -> nn.Module:
    from transformers import MarianConfig, MarianMTModel

    return MarianMTModel(MarianConfig(**_bart_kwargs()))


def _whisper() -> nn.Module:
    from transformers import WhisperForConditionalGeneration

    # init_std 0.2: at the default 0.02 the decode repeats one token over and over
    config = tiny_whisper_config(
        VOCAB, mel_bins=16, source_positions=8, target_positions=64, init_std=0.2
    )
    return WhisperForConditionalGeneration(config)


BUILDERS: dict[str, Callable[[], nn.Module]] = {
    "t5": _t5,
    "bart": _bart,
    "marian": _marian,
    "whisper": _whisper,
}
"""The models of the sweep, by name."""


class _FeaturesEncoder(nn.Module):
    """Whisper's encoder as optimum-executorch wraps it: the features passed positionally."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_features: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_features).last_hidden_state


def _export_whisper(model: nn.Module, features: torch.Tensor) -> dict[str, ExportedProgram]:
    from transformers.integrations.executorch import (
        Seq2SeqLMDecoderExportableModuleWithStaticCache as Decoder,
    )

    model.lm_head = model.proj_out  # the name the decoder module reads
    with torch.no_grad():
        encoder = torch.export.export(_FeaturesEncoder(model.get_encoder()).eval(), (features,))
        states = encoder.module()(features)
        decoder = Decoder(model, max_static_cache_length=MAX_CACHE, batch_size=1).eval()
        step = (torch.tensor([[0]]), states, torch.tensor([0]))
        text_decoder = torch.export.export(decoder, step, strict=True)
    return {"encoder": encoder, "text_decoder": text_decoder}


def _export_text(
    model: nn.Module, source: torch.Tensor, max_source: int
) -> dict[str, ExportedProgram]:
    from transformers.integrations.executorch import Seq2SeqLMExportableModule

    module = Seq2SeqLMExportableModule(model, max_hidden_seq_length=max_source,
                                       max_cache_length=MAX_CACHE)  # fmt: skip
    module.export(encoder_input_ids=source)
    return {"encoder": module.exported_encoder, "text_decoder": module.exported_decoder}


def build(name: str, seed: int = 0, max_source: int = MAX_SOURCE) -> Seq2Seq:
    """``name``'s tiny random model and its ``encoder`` and ``text_decoder`` programs; the
    text models' source length is a dynamic dimension up to ``max_source``."""
    torch.manual_seed(seed)
    model = BUILDERS[name]().eval()
    config = model.config
    if name == "whisper":
        source = torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions)
        programs = _export_whisper(model, source)
    else:
        source = torch.randint(3, VOCAB, (1, SOURCE))
        programs = _export_text(model, source, max_source)
    return Seq2Seq(name, model, programs, source, config.decoder_start_token_id,
                   config.eos_token_id)  # fmt: skip


def with_other_source(work: Seq2Seq, seed: int = 1) -> Seq2Seq:
    """``work`` on another input of the same shape (the second of two sessions)."""
    generator = torch.Generator().manual_seed(seed)
    if work.name == "whisper":
        source = torch.randn(work.source.shape, generator=generator)
    else:
        source = torch.randint(3, VOCAB, tuple(work.source.shape), generator=generator)
    return replace(work, source=source)


def _encoder_states(work: Seq2Seq) -> torch.Tensor:
    encoder = work.model.get_encoder()
    if work.name == "whisper":
        return encoder(work.source).last_hidden_state
    return encoder(input_ids=work.source).last_hidden_state


def reference_decode(work: Seq2Seq, steps: int) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy decoding on the eager model, re-reading the whole prefix at every step (no
    cache): the start token, then up to ``steps`` tokens, stopping after end-of-sequence;
    and each step's last-position logits (a lost or mixed cache changes these even where
    the argmax survives)."""
    tokens, logits = [work.start], []
    with torch.no_grad():
        states = _encoder_states(work)
        for _ in range(steps):
            out = work.model(encoder_outputs=(states,), decoder_input_ids=torch.tensor([tokens]),
                             use_cache=False)  # fmt: skip
            logits.append(out.logits[0, -1])
            tokens.append(int(logits[-1].argmax()))
            if tokens[-1] == work.eos:
                break
    return tokens, logits


def generate_tokens(work: Seq2Seq, steps: int) -> list[int]:
    """``model.generate(..., do_sample=False)`` (the text models; Whisper's ``generate``
    wants a processor's generation config), without a forced end-of-sequence token."""
    with torch.no_grad():
        out = work.model.generate(
            work.source, max_new_tokens=steps, do_sample=False, num_beams=1,
            forced_eos_token_id=None, decoder_start_token_id=work.start,
        )  # fmt: skip
    return [int(t) for t in out[0]]


def exported_decode(work: Seq2Seq, steps: int) -> tuple[list[int], list[torch.Tensor]]:
    """The same greedy decode on the exported programs run eagerly (copies: running them
    writes their cache buffers), one token per ``text_decoder`` call as on a device."""
    encoder = copy.deepcopy(work.programs["encoder"]).module()
    decoder = copy.deepcopy(work.programs["text_decoder"]).module()
    tokens, logits = [work.start], []
    with torch.no_grad():
        states = encoder(work.source)
        for i in range(steps):
            out = decoder(torch.tensor([[tokens[-1]]]), states, torch.tensor([i]))
            logits.append(out[0, -1])
            tokens.append(int(logits[-1].argmax()))
            if tokens[-1] == work.eos:
                break
    return tokens, logits
