"""ExecuTorch's LLM runner convention, as an artifact describes it (``"generation"``).

A language-model ``.pte`` has a ``forward(tokens, input_pos)`` method (its KV cache in
mutable buffers) and constant methods that ExecuTorch's runners read: ``get_max_seq_len``
(required by the runner), ``get_bos_id``, ``get_eos_ids``, ``use_kv_cache``,
``get_vocab_size``, ... Each takes no input and answers a value (a list for
``get_eos_ids``). A confined child executes them (the program is an upload) and
:func:`generation_info` turns the answers into the artifact's ``generation`` description.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RUNNER_METADATA: tuple[str, ...] = (
    "get_max_seq_len",
    "get_max_context_len",
    "get_bos_id",
    "get_eos_ids",
    "get_eos_id",
    "get_vocab_size",
    "get_n_layers",
    "use_kv_cache",
    "use_sdpa_with_kv_cache",
    "enable_dynamic_shape",
)
"""The metadata methods read (upstream's LLM export writes these names; optimum-executorch
writes ``get_eos_id``, one id, where upstream writes ``get_eos_ids``)."""

EOS_METHODS = ("get_eos_ids", "get_eos_id")
"""The metadata methods naming the tokens that end a text, the first a program has read (as
optimum-executorch's runner reads them); without one, the tokenizer's EOS ends it."""

REQUIRED = "get_max_seq_len"
MAX_VALUES = 256
"""A metadata method answering more values than this is not read (``get_eos_ids`` lists a
handful)."""

Scalar = bool | int | float


class GenerationInfo(BaseModel):
    """How an artifact follows ExecuTorch's LLM runner convention: the method that
    generates and the values its metadata methods answered."""

    model_config = ConfigDict(frozen=True, extra="allow")

    convention: Literal["executorch_llm_runner"] = "executorch_llm_runner"
    method: str = Field(default="forward", description="The method taking (tokens, input_pos).")
    max_seq_len: int = Field(description="get_max_seq_len: prompt and output tokens together.")
    max_context_len: int | None = None
    bos_id: int | None = None
    eos_ids: list[int] = Field(default_factory=list)
    vocab_size: int | None = None
    use_kv_cache: bool | None = None
    enable_dynamic_shape: bool | None = None
    metadata: dict[str, Scalar | list[Scalar]] = Field(
        default_factory=dict,
        description="Every runner metadata method the program has, with what it answered.",
    )


def generation_info(
    method_names: Sequence[str], answers: Mapping[str, Sequence[Scalar]]
) -> GenerationInfo | None:
    """The description of a program with ``method_names`` whose metadata methods answered
    ``answers`` (name -> values); None unless it has ``forward`` and an integer
    ``get_max_seq_len``."""
    if "forward" not in method_names or not _is_int(answers.get(REQUIRED)):
        return None
    metadata = {n: _plain(n, v) for n, v in answers.items() if n in RUNNER_METADATA and v}
    return GenerationInfo(
        max_seq_len=int(answers[REQUIRED][0]),
        max_context_len=_int(answers.get("get_max_context_len")),
        bos_id=_int(answers.get("get_bos_id")),
        eos_ids=[int(v) for v in _eos_answer(answers) if _is_int([v])],
        vocab_size=_int(answers.get("get_vocab_size")),
        use_kv_cache=_bool(answers.get("use_kv_cache")),
        enable_dynamic_shape=_bool(answers.get("enable_dynamic_shape")),
        metadata=metadata,
    )


def _eos_answer(answers: Mapping[str, Sequence[Scalar]]) -> Sequence[Scalar]:
    return next((answers[name] for name in EOS_METHODS if name in answers), ())


def _plain(name: str, values: Sequence[Scalar]) -> Scalar | list[Scalar]:
    return values[0] if len(values) == 1 and name != "get_eos_ids" else list(values)


def _is_int(values: Sequence[Scalar] | None) -> bool:
    return bool(values) and type(values[0]) is int  # type: ignore[index]


def _int(values: Sequence[Scalar] | None) -> int | None:
    return int(values[0]) if values is not None and _is_int(values) else None


def _bool(values: Sequence[Scalar] | None) -> bool | None:
    return bool(values[0]) if values and isinstance(values[0], bool | int) else None
