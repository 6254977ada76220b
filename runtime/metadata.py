"""Method signatures (input/output names, datatypes and shapes) read from ``.pte`` metadata."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pteforge.runtime.dtypes import oip_datatype
from pteforge.runtime.errors import ProgramLoadError


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a method: its name, OIP datatype and shape.

    ``shape`` has ``-1`` for dynamic dimensions; ``max_shape`` is then the upper bound
    the program was planned for (ExecuTorch records dynamism per tensor, not per
    dimension, so every dimension of a dynamic tensor is reported as ``-1``).
    """

    name: str
    datatype: str
    shape: tuple[int, ...]
    max_shape: tuple[int, ...] | None = None

    @property
    def dynamic(self) -> bool:
        return self.max_shape is not None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "datatype": self.datatype,
            "shape": list(self.shape),
        }
        if self.max_shape is not None:
            data["max_shape"] = list(self.max_shape)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorSpec:
        max_shape = data.get("max_shape")
        return cls(
            str(data["name"]),
            str(data["datatype"]),
            tuple(int(d) for d in data["shape"]),
            tuple(int(d) for d in max_shape) if max_shape is not None else None,
        )


@dataclass(frozen=True)
class MethodSignature:
    """The inputs and outputs of one method, in positional order."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MethodSignature:
        return cls(
            str(data["name"]),
            tuple(TensorSpec.from_json(t) for t in data["inputs"]),
            tuple(TensorSpec.from_json(t) for t in data["outputs"]),
        )

    def named(self, names: TensorNames | None) -> MethodSignature:
        """This signature with the program's own tensor names.

        ``.pte`` metadata carries no names, so a method's specs are named ``input_0``, ...
        until the program's graph-signature names are applied. Names that do not match the
        method's arity one to one (or repeat) are ignored: positional names stay.
        """
        if names is None:
            return self
        return MethodSignature(
            self.name,
            _renamed(self.inputs, names.inputs),
            _renamed(self.outputs, names.outputs),
        )


@dataclass(frozen=True)
class TensorNames:
    """The program's own names of a method's inputs and outputs, in positional order."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _renamed(specs: tuple[TensorSpec, ...], names: Sequence[str]) -> tuple[TensorSpec, ...]:
    if len(names) != len(specs) or len(set(names)) != len(names) or not all(names):
        return specs
    return tuple(replace(spec, name=name) for spec, name in zip(specs, names, strict=True))


def input_name(index: int) -> str:
    """The protocol name of positional input ``index`` (runtime metadata carries no names)."""
    return f"input_{index}"


def output_name(index: int) -> str:
    """The protocol name of positional output ``index``."""
    return f"output_{index}"


# Per method: which inputs and which outputs are dynamically shaped tensors.
Dynamism = dict[str, tuple[list[bool], list[bool]]]


def _tensor_spec(meta: Any, index: int, name: str, is_input: bool, dynamic: bool) -> TensorSpec:
    try:
        info = meta.input_tensor_meta(index) if is_input else meta.output_tensor_meta(index)
    except Exception:  # a non-tensor value (int, bool, ...) has no tensor metadata
        return TensorSpec(name, "UNSUPPORTED", ())
    sizes = tuple(int(s) for s in info.sizes())
    datatype = oip_datatype(int(info.dtype()))
    if dynamic:
        return TensorSpec(name, datatype, tuple(-1 for _ in sizes), sizes)
    return TensorSpec(name, datatype, sizes)


def signature_from_meta(
    method: str, meta: Any, dynamic: tuple[list[bool], list[bool]] = ([], [])
) -> MethodSignature:
    """Build a ``MethodSignature`` from an ExecuTorch ``MethodMeta``."""
    dyn_in, dyn_out = dynamic
    inputs = tuple(
        _tensor_spec(meta, i, input_name(i), True, i < len(dyn_in) and dyn_in[i])
        for i in range(meta.num_inputs())
    )
    outputs = tuple(
        _tensor_spec(meta, i, output_name(i), False, i < len(dyn_out) and dyn_out[i])
        for i in range(meta.num_outputs())
    )
    return MethodSignature(method, inputs, outputs)


def _is_dynamic(value: Any) -> bool:
    dynamism = getattr(value.val, "shape_dynamism", None)  # None for non-tensor values
    return dynamism is not None and int(getattr(dynamism, "value", dynamism)) != 0


def _program_flatbuffer(path: Path) -> Any:
    """The Program table of a ``.pte``, reading only its flatbuffer (not the segments)."""
    from executorch.exir._serialize._program import (
        _flatbuffer_to_program,
        _get_extended_header,
    )

    with path.open("rb") as fh:
        head = fh.read(64)
        header = _get_extended_header(head)
        size = header.program_size if header is not None and header.is_valid() else None
        return _flatbuffer_to_program(head + (fh.read(size - len(head)) if size else fh.read()))


def read_dynamism(path: Path) -> Dynamism:
    """Which method inputs/outputs are dynamic tensors, from the program flatbuffer.

    The runtime's ``MethodMeta`` only reports the upper-bound sizes; the flatbuffer's
    per-tensor ``shape_dynamism`` says whether they may vary. Unreadable -> all static.
    """
    try:
        return {
            plan.name: (
                [_is_dynamic(plan.values[i]) for i in plan.inputs],
                [_is_dynamic(plan.values[i]) for i in plan.outputs],
            )
            for plan in _program_flatbuffer(path).execution_plan
        }
    except Exception:
        return {}


def describe_program(program: Any, dynamism: Dynamism | None = None) -> dict[str, MethodSignature]:
    """Signatures of every method of a loaded ``executorch.runtime.Program``."""
    dynamism = dynamism or {}
    return {
        name: signature_from_meta(name, program.metadata(name), dynamism.get(name, ([], [])))
        for name in sorted(program.method_names)
    }


def describe_pte(path: str | Path) -> dict[str, MethodSignature]:
    """Per-method input and output specs of the ``.pte`` at ``path``, loaded in this process.

    Only call this on artifacts this service produced; for untrusted uploads use
    ``RuntimePool.describe``, which parses in an isolated worker process.
    """
    from executorch.runtime import Runtime

    try:
        program = Runtime.get().load_program(Path(path))
    except Exception as exc:
        raise ProgramLoadError(f"cannot load {path}: {exc}") from exc
    return describe_program(program, read_dynamism(Path(path)))
