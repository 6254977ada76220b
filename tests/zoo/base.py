"""The zoo's building blocks: named methods, exported models and registry entries.

A ``ZooModel`` is one architecture built from a ``transformers`` config with random weights
(nothing is downloaded). Each method is a small ``nn.Module`` whose ``forward`` takes
explicit, named tensors (``input_ids``, ``attention_mask``, ``past_key_0`` ...) and returns
a tuple of tensors, so the exported graph signature carries meaningful input names.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn
from torch.export import ExportedProgram, export

from tests import tiers
from tests.models import MultiMethod

Size = Literal["small", "bench"]
MethodFn = Callable[..., tuple[torch.Tensor, ...]]
Methods = dict[str, tuple[MethodFn, dict[str, torch.Tensor]]]
"""Method name -> (function of the model and named inputs, named example inputs)."""


class NamedMethod(nn.Module):
    """One method of ``model``: ``fn(model, **named_inputs)`` -> a tuple of tensors.

    Use ``named_method`` to build one: it gives ``forward`` a signature with the input
    names, which is where ``torch.export`` takes the graph's input names from.
    """

    names: tuple[str, ...] = ()

    def __init__(self, model: nn.Module, fn: MethodFn) -> None:
        super().__init__()
        self.model = model
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.fn(self.model, **dict(zip(self.names, args, strict=True))))


def named_method(model: nn.Module, fn: MethodFn, names: tuple[str, ...]) -> NamedMethod:
    """A ``NamedMethod`` whose ``forward`` signature lists ``names`` as its parameters."""

    def forward(self: NamedMethod, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return NamedMethod.forward(self, *args)

    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(n, positional) for n in ("self", *names)]
    forward.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    attributes = {"forward": forward, "names": names}
    cls = type(f"Method_{'_'.join(names)}"[:60], (NamedMethod,), attributes)
    method: NamedMethod = cls(model, fn)
    return method.eval()


@dataclass
class ZooModel:
    """An architecture's methods, their named example inputs and eager references."""

    name: str
    family: str
    size: Size
    modules: dict[str, NamedMethod]
    inputs: dict[str, dict[str, torch.Tensor]]
    _programs: dict[str, ExportedProgram] | None = field(default=None, repr=False)

    def example_inputs(self, method: str) -> tuple[torch.Tensor, ...]:
        """The example inputs of ``method`` in positional order."""
        return tuple(self.inputs[method].values())

    def methods(self) -> dict[str, ExportedProgram]:
        """``torch.export`` programs, one per method (exported once, then cached)."""
        if self._programs is None:
            with torch.no_grad():
                self._programs = {
                    name: export(module, self.example_inputs(name))
                    for name, module in self.modules.items()
                }
        return self._programs

    def eager(
        self, method: str, inputs: Mapping[str, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Eager PyTorch outputs of ``method`` (on the example inputs unless given)."""
        given = self.inputs[method] if inputs is None else inputs
        with torch.no_grad():
            return tuple(self.modules[method](*given.values()))

    def multimethod(self) -> MultiMethod:
        """The same model as the ``tests.models.MultiMethod`` other suites take."""
        inputs = {m: self.example_inputs(m) for m in self.modules}
        return MultiMethod(self.methods(), inputs, dict(self.modules))


@dataclass(frozen=True)
class ZooEntry:
    """A registry row: the architecture's name, family and builder."""

    name: str
    family: str
    builder: Callable[[Size], ZooModel]

    def build(self, size: Size = "small") -> ZooModel:
        """Build the model at ``size`` with seeded random weights."""
        tiers.need("zoo")
        torch.manual_seed(0)
        return self.builder(size)


def make_model(
    name: str,
    family: str,
    size: Size,
    model: nn.Module,
    methods: Methods,
) -> ZooModel:
    """Wrap ``model``'s methods (``fn`` and named example inputs each) as a ``ZooModel``."""
    model.eval()
    modules = {m: named_method(model, fn, tuple(ins)) for m, (fn, ins) in methods.items()}
    inputs = {m: dict(ins) for m, (_, ins) in methods.items()}
    return ZooModel(name, family, size, modules, inputs)


def pick(size: Size, small: Any, bench: Any) -> Any:
    """``small`` or ``bench`` by size."""
    return small if size == "small" else bench


def vocab_size(size: Size) -> int:
    """Token vocabulary: tiny for tests; at bench size large enough that the embedding
    (shared by methods, tied to the LM head in GPT-2 and T5) is a real share of the weights."""
    return int(pick(size, 128, 8192))


def token_ids(vocab: int, length: int, batch: int = 1) -> torch.Tensor:
    """Random token ids in ``[1, vocab)`` (0 is often the pad id)."""
    return torch.randint(1, vocab, (batch, length))


def padded_mask(length: int, pad: int, batch: int = 1) -> torch.Tensor:
    """An int64 attention mask with the last ``pad`` positions masked out."""
    mask = torch.ones(batch, length, dtype=torch.long)
    if pad:
        mask[:, -pad:] = 0
    return mask


def masked_text(vocab: int, length: int) -> dict[str, torch.Tensor]:
    """Named text inputs: random ``input_ids`` and an ``attention_mask`` padding the last
    quarter of the sequence."""
    return {
        "input_ids": token_ids(vocab, length),
        "attention_mask": padded_mask(length, length // 4),
    }
