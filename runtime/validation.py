"""Checks that inputs match a method's signature, with errors naming the offending input."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from pteforge.contracts.oip import OIP_TO_NUMPY, oip_datatype
from pteforge.contracts.specs import DYNAMIC_DIM, DynamicDim
from pteforge.runtime.errors import InvalidInputError, ProtocolError
from pteforge.runtime.metadata import MethodSignature, TensorSpec


def _names(specs: Sequence[TensorSpec]) -> str:
    return ", ".join(s.name for s in specs) or "none"


def check_count(signature: MethodSignature, count: int) -> None:
    """Raise unless ``count`` inputs is what ``signature`` takes."""
    expected = len(signature.inputs)
    if count != expected:
        raise InvalidInputError(
            f"method {signature.name!r} expects {expected} input(s) "
            f"({_names(signature.inputs)}), got {count}"
        )


def check_input_names(names: list[str], signature: MethodSignature) -> None:
    """Raise unless ``names`` name each input of ``signature`` once, and nothing else."""
    known = {spec.name for spec in signature.inputs}
    for name in names:
        if name not in known:
            raise InvalidInputError(
                f"unknown input {name!r}; method {signature.name!r} takes "
                f"{', '.join(sorted(known)) or 'no inputs'}"
            )
        if names.count(name) > 1:
            raise InvalidInputError(f"input {name!r} is given more than once")
    check_count(signature, len(names))


SHARED_MEMORY_PARAMETERS = (
    "shared_memory_region",
    "shared_memory_offset",
    "shared_memory_byte_size",
)


def tensor_parameters(parameters: object, where: str) -> dict[str, Any]:
    """The ``parameters`` object of a request or a tensor (``where`` names it), ``{}`` when
    absent; refused when not an object, or when it names a shared-memory region: the
    shared-memory extensions are not served, so such a tensor would be ignored or unread."""
    if parameters is None:
        return {}
    if not isinstance(parameters, Mapping):
        raise ProtocolError(f"{where}: 'parameters' must be an object, got {parameters!r:.80}")
    shared = [key for key in SHARED_MEMORY_PARAMETERS if key in parameters]
    if shared:
        raise ProtocolError(
            f"{where}: {shared[0]!r}: shared memory is not supported (no shared-memory "
            "extension is served); tensors travel in the request and response bodies"
        )
    return dict(parameters)


def flag(parameters: Mapping[str, Any], name: str, default: bool = False) -> bool:
    """The boolean parameter ``name`` (``default`` when absent); a ProtocolError for any
    other value: the string "false" was true."""
    value = parameters.get(name, default)
    if not isinstance(value, bool):
        raise ProtocolError(f"parameter {name!r} must be true or false, got {value!r:.80}")
    return value


def check_output_names(names: Sequence[str], signature: MethodSignature) -> None:
    """Raise unless each of ``names`` is an output of ``signature``, asked for once: each
    asked for is sent, so one output named 300 times in a 17 KB request was sent 300 times
    (a 1 MiB output: 300 MiB built in the server, past what its memory ledger counts)."""
    known = {spec.name for spec in signature.outputs}
    seen: set[str] = set()
    for name in names:
        if name not in known:
            raise InvalidInputError(
                f"unknown output {name!r}; method {signature.name!r} has "
                f"{', '.join(sorted(known)) or 'no outputs'}"
            )
        if name in seen:
            raise InvalidInputError(f"output {name!r} is asked for more than once")
        seen.add(name)


def check_tensor(spec: TensorSpec, datatype: str, shape: Sequence[int]) -> None:
    """Raise unless a tensor of ``datatype`` and ``shape`` fits ``spec``."""
    if datatype != spec.datatype:
        raise InvalidInputError(
            f"input {spec.name!r}: expected datatype {spec.datatype}, got {datatype}"
        )
    # The program's own ranges first: they name the dimension, where the planned bound
    # (max_shape) would only say the whole shape missed it.
    for dim in spec.dynamic_dims or ():
        if dim.axis < len(shape) and not dim.allows(shape[dim.axis]):
            raise InvalidInputError(_outside(spec.name, dim, shape))
    if spec.max_shape is None:
        # no planned bound (a signature as stored, from the exported program): the fixed
        # sizes must match; a dynamic one is any size its range above allows
        if not _matches(shape, spec.shape):
            raise InvalidInputError(
                f"input {spec.name!r}: expected shape {list(spec.shape)}, got {list(shape)}"
            )
    elif not _fits(shape, spec.shape, spec.max_shape):
        raise InvalidInputError(_over_the_plan(spec, shape, spec.max_shape))


def _outside(name: str, dim: DynamicDim, shape: Sequence[int]) -> str:
    """Why ``shape`` misses ``dim``'s range: the program's, or (``min`` = ``max``) the one size
    lowering fixed a dynamic dimension at (:func:`pteforge.manager.signature.fixed_by_lowering`)."""
    size = shape[dim.axis]
    if dim.min == dim.max:
        return (
            f"input {name!r}: dimension {dim.axis} is {size}, but this .pte takes only "
            f"{dim.min} there: lowering fixed that dimension, which the program exported as "
            f"dynamic, at the example input's size; got {list(shape)}"
        )
    return (
        f"input {name!r}: dimension {dim.axis} is {size}, outside the range "
        f"{dim.range_text()} the program was exported with, got {list(shape)}"
    )


def _over_the_plan(spec: TensorSpec, shape: Sequence[int], bound: Sequence[int]) -> str:
    """Why ``shape`` misses the ``.pte``'s planned bound: a dimension whose exported range has
    no upper bound was planned for the example input's size, which the user never chose."""
    for dim in spec.dynamic_dims or ():
        if dim.max is None and len(shape) == len(bound) and shape[dim.axis] > bound[dim.axis]:
            return (
                f"input {spec.name!r}: dimension {dim.axis} is {shape[dim.axis]}, over the "
                f"{bound[dim.axis]} the .pte's memory was planned for: the program's range for it "
                "has no upper bound, so ExecuTorch planned for the example input; export with "
                "Dim(..., max=N) to take up to N"
            )
    fixed = "" if set(spec.shape) == {DYNAMIC_DIM} else f" matching {list(spec.shape)}"
    return (
        f"input {spec.name!r}: expected a shape within {list(bound)} "
        f"(dynamic){fixed}, got {list(shape)}"
    )


def check_shared_sizes(signature: MethodSignature, shapes: Sequence[Sequence[int]]) -> None:
    """Raise unless the dimensions that share one of the program's symbols (one ``Dim`` of
    ``torch.export``, such as a BERT's ``input_ids`` and ``attention_mask`` lengths) have
    one size; ``shapes`` are the positional inputs' shapes."""
    seen: dict[str, tuple[str, int, int]] = {}
    for spec, shape in zip(signature.inputs, shapes, strict=False):
        for dim in spec.dynamic_dims or ():
            if dim.axis >= len(shape):
                continue
            name, axis, size = seen.setdefault(dim.symbol, (spec.name, dim.axis, shape[dim.axis]))
            if size != shape[dim.axis]:
                raise InvalidInputError(
                    f"inputs {name!r} and {spec.name!r} must agree: dimension {axis} of "
                    f"{name!r} is {size} and dimension {dim.axis} of {spec.name!r} is "
                    f"{shape[dim.axis]}, one dynamic size in the program"
                )


def positional_inputs(
    signature: MethodSignature, by_name: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The inputs a request named, in ``signature``'s order, once the sizes they share agree
    (:func:`check_shared_sizes`)."""
    inputs = [by_name[spec.name] for spec in signature.inputs]
    check_shared_sizes(signature, [array.shape for array in inputs])
    return inputs


def _matches(shape: Sequence[int], fixed: Sequence[int]) -> bool:
    """Whether ``shape`` has the rank of ``fixed`` and its sizes where that is not ``-1``."""
    if len(shape) != len(fixed):
        return False
    return all(f in (DYNAMIC_DIM, d) for d, f in zip(shape, fixed, strict=True))


def _fits(shape: Sequence[int], fixed: Sequence[int], bound: Sequence[int]) -> bool:
    """Whether ``shape`` is within ``bound`` and equal to ``fixed`` where that is not ``-1``."""
    if not len(shape) == len(bound) == len(fixed):
        return False
    dims = zip(shape, fixed, bound, strict=True)
    return all(d <= b and f in (DYNAMIC_DIM, d) for d, f, b in dims)


def check_arrays(signature: MethodSignature, arrays: Sequence[np.ndarray]) -> None:
    """Validate positional numpy inputs against ``signature``."""
    check_count(signature, len(arrays))
    for spec, array in zip(signature.inputs, arrays, strict=True):
        check_tensor(spec, oip_datatype(array.dtype), array.shape)
    check_shared_sizes(signature, [array.shape for array in arrays])


def check_json_numbers(data: Any, listed: np.ndarray, dtype: np.dtype) -> None:
    """Raise a ValueError unless the JSON values ``data`` (``listed`` as numpy read them)
    become ``dtype`` unchanged: no fractions for an integer dtype, no true/false for a
    number dtype (numpy would take them as 1 and 0), no null (numpy would take it as NaN)."""
    if listed.dtype.kind == "O" and dtype.kind != "O":
        raise ValueError("it holds null or values that are not numbers; send numbers")
    if dtype.kind in "iu" and listed.dtype.kind == "f" and listed.size:
        raise ValueError(
            "it holds numbers with a fraction or exponent (or integers past int64's range, "
            "which are read as such); send integers"
        )
    if dtype.kind in "iu" and listed.dtype.kind in "iu" and listed.size:
        _check_range(listed, dtype)
    if dtype.kind == "f" and listed.dtype.kind in "iuf" and listed.size:
        _check_float_range(listed, dtype)
    if dtype.kind == "b" and listed.size and listed.dtype.kind != "b":
        raise ValueError("it holds numbers; BOOL takes true/false")
    if dtype.kind != "b" and (listed.dtype.kind == "b" or _holds_bool(data)):
        raise ValueError("it holds true/false; send numbers (BOOL takes true/false)")


def _check_range(listed: np.ndarray, dtype: np.dtype) -> None:
    """Raise a ValueError naming the first of the integers ``listed`` that ``dtype`` cannot
    hold: casting wrapped them (300 as INT8 was 44, 2**64-1 as INT64 was -1)."""
    info = np.iinfo(dtype)
    lowest, highest = int(listed.min()), int(listed.max())
    if lowest < info.min or highest > info.max:
        outside = lowest if lowest < info.min else highest
        raise ValueError(f"it holds {outside}, outside {dtype.name}'s [{info.min}, {info.max}]")


def _check_float_range(listed: np.ndarray, dtype: np.dtype) -> None:
    """Raise a ValueError for a number past ``dtype``'s largest: casting made it infinite
    (70000 as FP16, 1e39 as FP32)."""
    largest = float(np.finfo(dtype).max)
    outside = float(np.abs(listed).max())
    if outside > largest:
        raise ValueError(f"it holds {outside:g}, past {dtype.name}'s largest {largest:g}")


def _holds_bool(data: Any) -> bool:
    """Whether a JSON list (nested or flat) holds a boolean among its numbers: one pass
    over each list's element types."""
    if not isinstance(data, list):
        return isinstance(data, bool)
    types = set(map(type, data))
    return bool in types or (list in types and any(map(_holds_bool, data)))


JSON_BYTES_PER_ELEMENT = 48
"""What a legitimate JSON tensor spends per element at most: a 24-character float, its comma,
spaces and its share of the brackets of a nested form."""
JSON_OVERHEAD_BYTES = 64 * 1024


def json_request_budget(signature: MethodSignature) -> int | None:
    """The most bytes a JSON request for ``signature`` needs (None: an input has no bound):
    parsing JSON builds every value first, about 20 times the bytes of ``[[],[],...]``, so
    a body past what the inputs can hold is refused before it is parsed."""
    elements = 0
    for spec in signature.inputs:
        most = most_elements(spec)
        if most is None:
            return None
        elements += most
    return JSON_OVERHEAD_BYTES + JSON_BYTES_PER_ELEMENT * elements


def most_elements(spec: TensorSpec) -> int | None:
    """The most elements the tensor ``spec`` describes can hold (None: it has no bound)."""
    dims = spec.max_shape if spec.max_shape is not None else spec.shape
    return None if any(d < 0 for d in dims) else math.prod(dims)


def most_output_bytes(signature: MethodSignature, as_json: Collection[str] = ()) -> int:
    """The most bytes the method's outputs can take (an output without a bound counts
    nothing): what its answer holds, known before it runs. An output named in ``as_json``
    is answered as JSON text, :data:`JSON_BYTES_PER_ELEMENT` an element at most (a float32
    takes ~19 bytes of text where its array took 4: counted as 4, 40 unread JSON answers of
    a 1 MiB output held 195 MiB where the ledger counted 40)."""
    total = 0
    for spec in signature.outputs:
        dtype = OIP_TO_NUMPY.get(spec.datatype)
        itemsize = 8 if dtype is None else dtype.itemsize
        per_element = JSON_BYTES_PER_ELEMENT + itemsize if spec.name in as_json else itemsize
        total += (most_elements(spec) or 0) * per_element
    return total
