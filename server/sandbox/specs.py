"""Typed descriptions of programs and artifacts; their JSON form is all that crosses processes.

A worker builds a :class:`ProgramDescription` and sends :meth:`~JsonForm.to_json`'s form;
the parent validates it back with :meth:`~JsonForm.from_json` (an unexpected key, a missing
method field or a wrong type raises ``pydantic.ValidationError``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass as json_dataclass

from pteforge.contracts.llm_runner import GenerationInfo
from pteforge.contracts.specs import JsonForm

# The shared spec contracts (the store keeps what a loader reports, as is).
from pteforge.contracts.specs import MethodSignature as MethodSignature  # re-exported
from pteforge.contracts.specs import TensorSpec as TensorSpec  # re-exported for the workers
from pteforge.contracts.specs import methods_to_json as methods_to_json  # re-exported

_PIPE_CONFIG = ConfigDict(extra="forbid")


class _Described:
    """A description with ``methods``: their names, in its order."""

    methods: tuple[MethodSignature, ...]

    @property
    def method_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.methods)


@dataclass(frozen=True)
class ArchiveManifest(_Described):
    """What the static validator learnt from a pt2 archive without loading it."""

    root: str
    methods: tuple[MethodSignature, ...]
    payload_bytes: int
    entry_count: int


@json_dataclass(frozen=True, config=_PIPE_CONFIG)
class ProgramDescription(_Described, JsonForm):
    """What a disposable worker reported after really loading a pt2 archive or a ``.pte``:
    the reply of both loader workers; its JSON form is ``{"methods": [...]}``, plus
    ``"generation"`` for a ``.pte`` that follows ExecuTorch's LLM runner convention."""

    methods: tuple[MethodSignature, ...]
    generation: GenerationInfo | None = None


@json_dataclass(frozen=True, config=_PIPE_CONFIG)
class PteDescription(_Described, JsonForm):
    """A verified ``.pte``: its digest, size, per-method tensor metadata and, for a
    language model, its runner metadata."""

    sha256: str
    size_bytes: int
    methods: tuple[MethodSignature, ...]
    generation: GenerationInfo | None = None


@json_dataclass(frozen=True, config=_PIPE_CONFIG)
class TokenizerCheck(JsonForm):
    """A worker's reply after reading an uploaded tokenizer (and its config) as JSON: the
    number of parts it found well-formed, and of the config: how many keys it has and
    whether one is ``chat_template``; ``token_ids`` is the tokenizer's highest token id plus
    one (its vocabulary and added tokens), None when it names no id."""

    parts: int
    config_keys: int = 0
    config_has_template: bool = False
    token_ids: int | None = None
