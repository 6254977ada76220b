"""The tensor spec and the method signature: one type each, shared by every layer.

The manager reads them from exported programs, the sandbox from pt2 archives and ``.pte``
files, the runtime from ExecuTorch method metadata; storage keeps them and both APIs show
them. ``dtype`` is always the torch/ExecuTorch dtype name (``float32``); the Open Inference
Protocol datatype (``FP32``) that ``/v2`` shows is derived from it (:attr:`TensorSpec.datatype`).

JSON forms, pinned by the API:

* ``/v1`` and storage: ``{"name", "dtype", "shape"[, "max_shape"][, "dynamic_dims"]}``
  (:meth:`TensorSpec.to_json`);
* ``/v2`` metadata: ``{"name", "datatype", "shape"[, "max_shape"]}`` (:meth:`TensorSpec.oip_json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated, Any, Self, TypeVar

from pydantic import ConfigDict, Strict, TypeAdapter
from pydantic.dataclasses import dataclass

from pteforge.contracts.json_types import JsonObject

DYNAMIC_DIM = -1
"""The size a spec reports for a dimension that may vary."""

# ExecuTorch (c10) ScalarType code -> dtype name, as ``TensorInfo.dtype()`` reports it.
ET_SCALAR_TYPES: dict[int, str] = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    7: "float64",
    11: "bool",
    15: "bfloat16",
    27: "uint16",
    28: "uint32",
    29: "uint64",
}
_ET_CODES = {name: code for code, name in ET_SCALAR_TYPES.items()}
_UNKNOWN_CODE_PREFIX = "scalar_type_"

# dtype name -> Open Inference Protocol datatype, for the dtypes the runtime can feed.
OIP_DATATYPES: dict[str, str] = {
    "uint8": "UINT8",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "float16": "FP16",
    "float32": "FP32",
    "float64": "FP64",
    "bool": "BOOL",
    "bfloat16": "BF16",
}

NON_TENSOR_DTYPE = "unknown"
"""The dtype of a value that has no tensor metadata (its OIP datatype is ``UNSUPPORTED``)."""


def et_dtype_name(scalar_type: int) -> str:
    """The dtype name of an ExecuTorch ScalarType code (``scalar_type_N`` if unmapped)."""
    return ET_SCALAR_TYPES.get(scalar_type, f"{_UNKNOWN_CODE_PREFIX}{scalar_type}")


def oip_datatype(dtype: str) -> str:
    """The OIP datatype of a dtype name; ``UNSUPPORTED(code)`` for an ExecuTorch dtype the
    runtime cannot feed, plain ``UNSUPPORTED`` for anything else."""
    if dtype in OIP_DATATYPES:
        return OIP_DATATYPES[dtype]
    code = _ET_CODES.get(dtype)
    if code is None and dtype.startswith(_UNKNOWN_CODE_PREFIX):
        code = int(dtype.removeprefix(_UNKNOWN_CODE_PREFIX))
    return "UNSUPPORTED" if code is None else f"UNSUPPORTED({code})"


Dims = tuple[Annotated[int, Strict()], ...]
_SPEC_CONFIG = ConfigDict(extra="ignore")
_T = TypeVar("_T")


class JsonForm:
    """``to_json`` and ``from_json`` for a spec class (a pydantic dataclass), through its
    ``TypeAdapter``: the base of every typed JSON form, pipes between processes included."""

    def to_json(self) -> JsonObject:
        """This spec's JSON form (``/v1``, storage, pipes); fields that are None left out."""
        dumped: JsonObject = _adapter(type(self)).dump_python(self, mode="json", exclude_none=True)
        return dumped

    @classmethod
    def from_json(cls, data: Any) -> Self:
        """Parse :meth:`to_json`'s form; raises ``pydantic.ValidationError`` (a ValueError)."""
        return _adapter(cls).validate_python(data)


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[_T]) -> TypeAdapter[_T]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:  # a race builds it twice, harmlessly
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


@dataclass(frozen=True, config=_SPEC_CONFIG)
class DynamicDim:
    """One dynamic dimension of an exported program's input: its ``axis``, the ``symbol``
    torch.export gave it (every dimension with the same symbol must have the same size, in
    every input of the method; a derived ``Dim``'s is its expression, ``384*s69 - 256``) and
    the range it was exported for (``max`` None: unbounded).
    A range of one size (``min`` = ``max``, which ``torch.export`` never gives a ``Dim``) is a
    dimension lowering fixed at that size (:func:`pteforge.manager.signature.fixed_by_lowering`)."""

    axis: Annotated[int, Strict()]
    symbol: Annotated[str, Strict()]
    min: Annotated[int, Strict()]
    max: Annotated[int, Strict()] | None = None

    def allows(self, size: int) -> bool:
        """Whether ``size`` is within this dimension's range."""
        return size >= self.min and (self.max is None or size <= self.max)

    def range_text(self) -> str:
        """The range in words: ``4..64``, or ``at least 4``."""
        return f"at least {self.min}" if self.max is None else f"{self.min}..{self.max}"


@dataclass(frozen=True, config=_SPEC_CONFIG)
class TensorSpec(JsonForm):
    """One input or output of a method: its name, dtype name and shape.

    ``shape`` has ``-1`` (:data:`DYNAMIC_DIM`) for dynamic dimensions. ``max_shape`` is the
    upper bound a ``.pte`` was planned for, when the runtime knows it (ExecuTorch records
    dynamism per tensor, so every dimension of a dynamic tensor is then ``-1``).
    ``dynamic_dims`` are the program's own dynamic dimensions (range and shared symbol), when
    it was read from an ExportedProgram (a ``.pte`` has no lower bound and no symbols).
    A pydantic dataclass: built positionally, validated on construction; its JSON form is
    ``{"name", "dtype", "shape"[, "max_shape"][, "dynamic_dims"]}``.
    """

    name: Annotated[str, Strict()]
    dtype: Annotated[str, Strict()]
    shape: Dims
    max_shape: Dims | None = None
    dynamic_dims: tuple[DynamicDim, ...] | None = None

    @property
    def datatype(self) -> str:
        """The Open Inference Protocol datatype (``FP32``), as ``/v2`` names it."""
        return oip_datatype(self.dtype)

    @property
    def dynamic(self) -> bool:
        """Whether the runtime knows this tensor's size may vary up to ``max_shape``."""
        return self.max_shape is not None

    def oip_json(self) -> JsonObject:
        """The ``/v2`` metadata form: ``{"name", "datatype", "shape"[, "max_shape"]}``."""
        data: JsonObject = {"name": self.name, "datatype": self.datatype, "shape": [*self.shape]}
        if self.max_shape is not None:
            data["max_shape"] = [*self.max_shape]
        return data


@dataclass(frozen=True, config=_SPEC_CONFIG)
class TensorNames:
    """A program's own names of a method's inputs and outputs, in positional order."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


ConstantValue = (
    Annotated[bool, Strict()]
    | Annotated[int, Strict()]
    | Annotated[float, Strict()]
    | Annotated[str, Strict()]
    | None
)
"""A non-tensor input's value: what ``torch.export`` records for a ``ConstantArgument``."""


@dataclass(frozen=True, config=_SPEC_CONFIG)
class ConstantInput:
    """A method input the program was exported with as a constant (a non-tensor keyword such
    as ``use_cache=False``): the method still takes it, at position ``index`` of its inputs,
    and pteforge passes ``value``, the one it was exported with; clients never send it."""

    index: Annotated[int, Strict()]
    name: Annotated[str, Strict()]
    value: ConstantValue = None


@dataclass(frozen=True, config=_SPEC_CONFIG)
class MethodSignature(JsonForm):
    """The inputs and outputs of one method, in positional order; its JSON form is
    ``{"name", "inputs": [...], "outputs": [...][, "constants": [...]]}`` with
    :meth:`TensorSpec.to_json`'s.

    ``inputs`` are what a caller sends; ``constants`` (None: there are none) the inputs the
    program holds a constant for, which :meth:`positional` puts back in their places.
    """

    name: Annotated[str, Strict()]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    constants: tuple[ConstantInput, ...] | None = None

    def positional(self, sent: Sequence[_T]) -> list[_T | ConstantValue]:
        """Every input the method takes, in order: ``sent`` (one per spec of ``inputs``)
        with each constant's value at its index."""
        values: list[_T | ConstantValue] = list(sent)
        for constant in self.constants or ():
            values.insert(constant.index, constant.value)
        return values

    def renamed(self, name: str) -> MethodSignature:
        """The same specs under another method name."""
        return replace(self, name=name)

    def named(self, names: TensorNames | None) -> MethodSignature:
        """This signature with the program's own tensor names.

        ``.pte`` metadata carries no names, so a method's specs are named ``input_0``, ...
        until the program's graph-signature names are applied. Names that do not match the
        method's arity one to one (or repeat) are ignored: positional names stay.
        """
        if names is None:
            return self
        inputs = _renamed(self.inputs, self.sent(names.inputs))
        outputs = _renamed(self.outputs, names.outputs)
        return replace(self, inputs=inputs, outputs=outputs)

    def pinned_by(self, stored: MethodSignature | None) -> MethodSignature:
        """This runtime signature with the static dimensions of its dynamic tensors.

        A ``.pte`` records dynamism per tensor (every dimension ``-1``, bounded by
        ``max_shape``); ``stored``, the artifact's signature from its program, has ``-1`` only
        where a dimension is dynamic. Where the two agree on an input, the input takes the
        stored shape and dynamic dimensions (ranges, shared symbols), so a wrong static
        dimension, or a dynamic one out of its range, is refused before it runs; an output
        likewise (a classifier's ``[-1, 10]``, not ``[-1, -1]``, in ``/v2`` metadata).
        """
        known = () if stored is None else self.sent(stored.inputs)
        if stored is None or len(known) != len(self.inputs):
            return self
        inputs = tuple(_pinned(spec, k) for spec, k in zip(self.inputs, known, strict=True))
        outputs = self.outputs
        if len(stored.outputs) == len(outputs):
            outputs = tuple(_pinned(s, k) for s, k in zip(outputs, stored.outputs, strict=True))
        return replace(self, inputs=inputs, outputs=outputs).constants_named(stored.constants)

    def sent(self, every: Sequence[_T]) -> Sequence[_T]:
        """Of one entry per input the method takes (constants in their places, as an
        artifact compiled before ``constants`` existed stores them), those a client sends."""
        held = {constant.index for constant in self.constants or ()}
        if not held or len(every) != len(self.inputs) + len(held):
            return every
        return [entry for index, entry in enumerate(every) if index not in held]

    def constants_named(self, stored: Sequence[ConstantInput] | None) -> MethodSignature:
        """This signature with the names ``stored`` (the program's constants, which a
        ``.pte`` does not name) gives the constants at the same indexes."""
        names = {constant.index: constant.name for constant in stored or ()}
        if not self.constants or not names:
            return self
        constants = tuple(replace(c, name=names.get(c.index, c.name)) for c in self.constants)
        return replace(self, constants=constants)


def _pinned(spec: TensorSpec, known: TensorSpec) -> TensorSpec:
    bound = spec.max_shape
    if bound is None or len(known.shape) != len(bound) or DYNAMIC_DIM not in known.shape:
        return spec  # an uploaded .pte's stored shape is its bound: no dimension is known
    if any(d not in (DYNAMIC_DIM, b) for d, b in zip(known.shape, bound, strict=True)):
        return spec  # not the same tensor: keep what the runtime says
    return replace(spec, shape=known.shape, dynamic_dims=known.dynamic_dims)


def _renamed(specs: tuple[TensorSpec, ...], names: Sequence[str]) -> tuple[TensorSpec, ...]:
    if len(names) != len(specs) or len(set(names)) != len(names) or not all(names):
        return specs
    return tuple(replace(spec, name=name) for spec, name in zip(specs, names, strict=True))


def methods_to_json(methods: Sequence[MethodSignature]) -> list[JsonObject]:
    """The JSON list form of several method signatures."""
    return [m.to_json() for m in methods]


def methods_from_json(objs: Sequence[Any]) -> tuple[MethodSignature, ...]:
    """Parse a JSON list of method signatures; raises a ValueError naming the bad entry."""
    return tuple(MethodSignature.from_json(o) for o in objs)
