"""A program that follows ExecuTorch's LLM runner convention, as the worker drives it.

The convention: ``forward(tokens, input_pos)`` takes ``tokens`` of shape ``[1, n]`` and
returns logits (``[1, n, vocab]`` or the last row only, ``[1, vocab]``), its KV cache in
mutable buffers; the constant methods ``get_max_context_len`` (else ``get_max_seq_len``)
and ``get_eos_ids`` (optimum-executorch's ``get_eos_id``; among others the runner reads) say
how long the context is and which tokens end a text; ``get_max_seq_len`` also bounds the
tokens of one call. ``input_pos`` is either the first position (``[1]``: ExecuTorch's Llama
export) or one position per token (``[n]``: ``transformers``'
``TorchExportableModuleForDecoderOnlyLM``); which one is read from its shape. A prompt is fed
in chunks of as many tokens as ``tokens`` takes (its planned maximum when dynamic), at most
``get_max_seq_len``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pteforge.contracts.generation import TokenLogprob
from pteforge.contracts.llm_runner import EOS_METHODS
from pteforge.contracts.specs import MethodSignature, TensorSpec
from pteforge.runtime.errors import (
    ContextLengthError,
    ExecutionError,
    InvalidInputError,
    NotALanguageModelError,
)
from pteforge.runtime.instances import ProgramInstance
from pteforge.runtime.logprobs import TokenBytes, step_logprobs, unscored

_TOKEN_DTYPES = {"int64": "int64", "int32": "int32"}

Execute = Callable[[list[Any]], list[Any]]
"""Runs a method on its inputs: its outputs."""


@dataclass(frozen=True)
class LmInfo:
    """What the loop needs to know about a language-model method."""

    context_len: int  # prompt and generated tokens together: the KV cache's length
    context_method: str  # the metadata method it was read from
    eos_ids: frozenset[int] | None  # None: no EOS_METHODS (the tokenizer's EOS ends a text)
    vocab_size: int
    chunk: int  # most tokens one call takes
    per_token_positions: bool  # input_pos is [n] (one per token), not [1] (the start)
    dtype: str  # of tokens and input_pos


def read_lm_info(instance: ProgramInstance, signature: MethodSignature) -> LmInfo:
    """The runner metadata and the shape rules of ``signature`` (the forward method);
    ``NotALanguageModelError`` naming what does not fit the convention."""
    names = set(instance.program.method_names)
    if "get_max_seq_len" not in names:
        raise NotALanguageModelError(
            "the artifact is not a language model in ExecuTorch's LLM runner convention: "
            "it has no get_max_seq_len method"
        )
    max_seq_len = int(_constant(instance, "get_max_seq_len")[0])
    # as ExecuTorch's runner: the context is get_max_context_len (the KV cache) where the
    # program has it, and get_max_seq_len bounds one prefill call
    context = "get_max_context_len" if "get_max_context_len" in names else "get_max_seq_len"
    eos_method = next((name for name in EOS_METHODS if name in names), None)
    eos = _constant(instance, eos_method) if eos_method else None
    tokens, positions, logits = _specs(signature)
    bound = _bounds(tokens)[1]
    pos_len = _bounds(positions)[0]
    return LmInfo(
        context_len=int(_constant(instance, context)[0]),
        context_method=context,
        eos_ids=None if eos is None else frozenset(int(e) for e in eos),
        vocab_size=_bounds(logits)[-1],
        chunk=max(1, min(bound, max_seq_len)),
        per_token_positions=bound > 1 and pos_len >= bound,
        dtype=_TOKEN_DTYPES[tokens.dtype],
    )


def _specs(signature: MethodSignature) -> tuple[TensorSpec, TensorSpec, TensorSpec]:
    ins, outs = signature.inputs, signature.outputs
    fits = (
        len(ins) == 2
        and len(outs) >= 1
        and ins[0].dtype in _TOKEN_DTYPES
        and ins[1].dtype == ins[0].dtype
        and len(_bounds(ins[0])) == 2
        and len(_bounds(ins[1])) == 1
        and outs[0].dtype.startswith(("float", "bfloat"))
    )
    if not fits:
        raise NotALanguageModelError(
            f"method {signature.name!r} is not forward(tokens [1, n], input_pos) -> logits "
            "as ExecuTorch's LLM runner expects it"
        )
    return ins[0], ins[1], outs[0]


def _bounds(spec: TensorSpec) -> tuple[int, ...]:
    return spec.max_shape if spec.max_shape is not None else spec.shape


def _constant(instance: ProgramInstance, name: str) -> list[Any]:
    try:
        values = instance.method(name).execute([])
        return [v.item() if hasattr(v, "item") else v for v in values]
    except Exception as exc:
        raise NotALanguageModelError(f"metadata method {name!r} failed: {exc}") from None


def feed(method: Any, info: LmInfo, tokens: Sequence[int], start: int) -> np.ndarray:
    """Run ``tokens`` through the model from position ``start`` (the cache then holds
    them); the logits after the last one, as a 1-D float array."""
    outputs: list[Any] = []
    for at in range(0, len(tokens), info.chunk):
        outputs = _feed_part(method, info, tokens[at : at + info.chunk], start + at)
    return last_logits(outputs[0], info.vocab_size)


def feed_each(method: Any, info: LmInfo, tokens: Sequence[int], start: int) -> Iterator[np.ndarray]:
    """Run ``tokens`` as :func:`feed` does, yielding the logits after each token in turn
    (a prompt's own logprobs). A method that answers the last position's logits only is fed
    one token at a time from the first chunk that shows it; one that answers any other
    number of rows is refused (fed one at a time, it would be fed again for ever)."""
    at, size = 0, info.chunk
    while at < len(tokens):
        part = tokens[at : at + size]
        output = _feed_part(method, info, part, start + at)[0]
        rows = output.detach().reshape(-1, info.vocab_size).float().numpy()
        if len(rows) == len(part):
            yield from rows
            at += len(part)
        elif len(rows) == 1:  # the last position's only: fed again, one token at a time
            size = 1
        else:
            raise NotALanguageModelError(
                f"forward answered {len(rows)} rows of logits for {len(part)} tokens, neither "
                "one a token nor the last token's, as ExecuTorch's LLM runner expects them"
            )


def _feed_part(method: Any, info: LmInfo, part: Sequence[int], first: int) -> list[Any]:
    """``forward``'s outputs for the tokens ``part`` from position ``first`` on."""
    import torch

    dtype = getattr(torch, info.dtype)
    ids = torch.tensor([list(part)], dtype=dtype)
    if info.per_token_positions:
        pos = torch.arange(first, first + len(part), dtype=dtype)
    else:
        pos = torch.tensor([first], dtype=dtype)
    return _forward(method.execute, [ids, pos], first)


def _forward(execute: Execute, inputs: list[Any], position: int) -> list[Any]:
    """``forward``'s outputs for ``inputs`` (tokens from ``position`` on)."""
    try:
        outputs: list[Any] = execute(inputs)
    except Exception as exc:
        raise ExecutionError(f"forward failed at position {position}: {exc}") from exc
    return outputs


def uncloned(method: Any) -> Execute:
    """``method.execute`` without copying its outputs: ExecuTorch's binding clones each
    output tensor unless told not to (~2.5 us a decode step, and ~1 us more for the
    ``Method`` wrapper). Its outputs then alias the method's memory: read them before its
    next call. A method that is no ``executorch.runtime.Method`` runs as it is."""
    binding = getattr(method, "_method", None)
    if binding is None:
        return lambda inputs: method.execute(inputs)
    return lambda inputs: binding(inputs, False)  # clone_outputs=False


def last_logits(output: Any, vocab_size: int) -> np.ndarray:
    """The logits after the last token of a ``forward`` output, as a 1-D float array (a
    view, when they are float32: read before the next call)."""
    import torch

    if output.dtype == torch.float32 and not output.requires_grad:  # no torch ops: ~2 us less
        logits: np.ndarray = output.numpy().reshape(-1, vocab_size)[-1]
        return logits
    return np.asarray(output.detach().reshape(-1, vocab_size)[-1].float().numpy())


class DecodeInputs:
    """One-token steps of ``method``: its ``(tokens, input_pos)`` made once and refilled in
    place (creating two tensors costs ~4 us a token, writing two numpy cells 0.2 us;
    ExecuTorch reads them during ``execute`` only), its outputs not copied
    (:func:`uncloned`: the logits are a view, read before the next step)."""

    def __init__(self, info: LmInfo, method: Any) -> None:
        import torch

        self.vocab_size = info.vocab_size
        self.execute = uncloned(method)
        self.ids = np.zeros((1, 1), np.dtype(info.dtype))
        self.pos = np.zeros((1,), np.dtype(info.dtype))
        self.tensors = [torch.from_numpy(self.ids), torch.from_numpy(self.pos)]

    def step(self, token: int, position: int) -> np.ndarray:
        """The logits after feeding ``token`` at ``position`` (as :func:`feed` would)."""
        self.ids[0, 0], self.pos[0] = token, position
        return last_logits(_forward(self.execute, self.tensors, position)[0], self.vocab_size)


class LmMethod:
    """The model's method and metadata: feeds tokens, keeping the cache's token count."""

    def __init__(self, method: Any, info: LmInfo) -> None:
        self.method = method
        self.info = info
        self.decode = DecodeInputs(info, method)

    def feed(self, tokens: Sequence[int], history: list[int]) -> Any:
        if len(tokens) == 1:  # a decode step
            logits = self.decode.step(tokens[0], len(history))
        else:
            logits = feed(self.method, self.info, tokens, len(history))
        history.extend(tokens)
        return logits

    def end_ids(self, tokenizer_eos: Callable[[], frozenset[int]], ignore: bool) -> frozenset[int]:
        """The tokens that end a text: the program's end-of-sequence ids, else the tokenizer
        config's (``tokenizer_eos``); none when asked to ``ignore`` them."""
        if ignore:
            return frozenset()
        return tokenizer_eos() if self.info.eos_ids is None else self.info.eos_ids

    def score(
        self, prompt: Sequence[int], history: list[int], top: int, token_bytes: TokenBytes
    ) -> Iterator[tuple[TokenLogprob, Any]]:
        """Feed ``prompt``, yielding each of its tokens scored under the logits before it
        (the first: unscored) with the logits after it (read before the next one is asked
        for). ``history`` holds the prompt once every token was yielded."""
        scored = unscored(prompt[0], token_bytes)
        for i, logits in enumerate(feed_each(self.method, self.info, prompt, len(history)), 1):
            yield scored, logits
            if i < len(prompt):
                scored = step_logprobs(logits, prompt[i], top, token_bytes)
        history.extend(prompt)


def check_prompt(prompt: list[int], info: LmInfo) -> None:
    """Refuse an empty prompt, one longer than the context or with unknown token ids."""
    if not prompt:
        raise InvalidInputError(
            "the prompt has no tokens (an empty text, and the tokenizer adds no BOS)"
        )
    if len(prompt) > info.context_len:
        raise ContextLengthError(
            f"the prompt has {len(prompt)} tokens, more than the model's context of "
            f"{info.context_len} tokens ({info.context_method})"
        )
    bad = next((t for t in prompt if t >= info.vocab_size), None)
    if bad is not None:
        raise InvalidInputError(
            f"token id {bad} is outside the model's vocabulary of {info.vocab_size} tokens"
        )
