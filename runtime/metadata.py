"""Method signatures (input/output names, datatypes and shapes) read from ``.pte`` metadata."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pteforge.runtime.dtypes import oip_datatype
from pteforge.runtime.errors import ProgramLoadError


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a method: its name, OIP datatype and static shape."""

    name: str
    datatype: str
    shape: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorSpec:
        return cls(str(data["name"]), str(data["datatype"]), tuple(int(d) for d in data["shape"]))


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


def input_name(index: int) -> str:
    """The protocol name of positional input ``index`` (runtime metadata carries no names)."""
    return f"input_{index}"


def output_name(index: int) -> str:
    """The protocol name of positional output ``index``."""
    return f"output_{index}"


def _tensor_spec(meta: Any, index: int, name: str, is_input: bool) -> TensorSpec:
    try:
        info = meta.input_tensor_meta(index) if is_input else meta.output_tensor_meta(index)
    except Exception:  # a non-tensor value (int, bool, ...) has no tensor metadata
        return TensorSpec(name, "UNSUPPORTED", ())
    return TensorSpec(name, oip_datatype(int(info.dtype())), tuple(int(s) for s in info.sizes()))


def signature_from_meta(method: str, meta: Any) -> MethodSignature:
    """Build a ``MethodSignature`` from an ExecuTorch ``MethodMeta``."""
    inputs = tuple(_tensor_spec(meta, i, input_name(i), True) for i in range(meta.num_inputs()))
    outputs = tuple(_tensor_spec(meta, i, output_name(i), False) for i in range(meta.num_outputs()))
    return MethodSignature(method, inputs, outputs)


def describe_program(program: Any) -> dict[str, MethodSignature]:
    """Signatures of every method of a loaded ``executorch.runtime.Program``."""
    return {
        name: signature_from_meta(name, program.metadata(name))
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
    return describe_program(program)
