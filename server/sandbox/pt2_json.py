"""Allowlist checks of the JSON documents inside a pt2 archive, and spec extraction.

The ``dict[str, Any]`` here are parses of an untrusted upload, walked key by key in this
process; none of them crosses a process boundary (what leaves is a typed ``MethodSignature``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pteforge.contracts.specs import DYNAMIC_DIM, DynamicDim

from . import pt2_format as fmt
from .errors import UnsafeArchiveError
from .limits import ArchiveLimits
from .pt2_exprs import derived_dimension
from .pt2_schema import check_document
from .specs import MethodSignature, TensorSpec

_MODEL_KEYS = frozenset(
    {
        "graph_module",
        "opset_version",
        "range_constraints",
        "schema_version",
        "verifiers",
        "torch_version",
        "guards_code",
    }
)
_PAYLOAD_KEYS = frozenset({"path_name", "is_param", "use_pickle", "tensor_meta"})


def parse_json(data: bytes, entry: str) -> Any:
    """Decode a JSON entry; malformed or absurdly nested documents are rejected."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:
        raise UnsafeArchiveError("invalid_json", f"not valid JSON: {str(e)[:200]}", entry) from e


def check_model_json(doc: Any, entry: str, limits: ArchiveLimits) -> None:
    """Refuse a document that is not an ExportedProgram of the installed torch's schema, or
    whose strings do not fit their fields (:mod:`.pt2_schema`: names that become code,
    operators outside the allowlist, expressions and guards outside their grammars, custom
    objects)."""
    if not isinstance(doc, dict) or not set(doc) <= _MODEL_KEYS or "graph_module" not in doc:
        raise UnsafeArchiveError("invalid_program", "not a serialized ExportedProgram", entry)
    check_document(doc, entry, limits.max_expression_chars)


def check_payload_config(doc: Any, entry: str, directory: str, record_sizes: dict[str, int]) -> int:
    """Check a weights/constants config; return the bytes its tensors declare."""
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        raise UnsafeArchiveError("invalid_program", "payload config lacks 'config'", entry)
    prefix = (
        fmt.WEIGHT_FILENAME_PREFIX
        if directory == fmt.WEIGHTS_DIR
        else fmt.TENSOR_CONSTANT_FILENAME_PREFIX
    )
    declared = 0
    for fqn, meta in config.items():
        where = f"{entry} [{fqn}]"
        if not isinstance(meta, dict) or not set(meta) <= _PAYLOAD_KEYS:
            raise UnsafeArchiveError("invalid_program", "malformed payload entry", where)
        if meta.get("use_pickle") is not False:
            raise UnsafeArchiveError(
                "pickle_payload", "use_pickle payloads are not accepted", where
            )
        path_name = meta.get("path_name")
        if (
            not isinstance(path_name, str)
            or not path_name.startswith(prefix)
            or not path_name[len(prefix) :].isdigit()
        ):
            reason = (
                "custom_object"
                if str(path_name).startswith(("custom_obj_", "opaque_obj_"))
                else "invalid_program"
            )
            raise UnsafeArchiveError(
                reason, f"payload path {str(path_name)[:60]!r} is not allowed", where
            )
        record = directory + path_name
        if record not in record_sizes:
            raise UnsafeArchiveError("invalid_program", f"payload {record} is missing", where)
        declared += check_tensor_meta(meta.get("tensor_meta"), record_sizes[record], where)
    return declared


def _as_int(value: Any, where: str) -> int:
    if not isinstance(value, dict) or set(value) != {"as_int"} or type(value["as_int"]) is not int:
        raise UnsafeArchiveError(
            "unsafe_expression", "stored tensors need concrete integer sizes", where
        )
    number: int = value["as_int"]
    if number < 0:
        raise UnsafeArchiveError("invalid_program", "negative size, stride or offset", where)
    return number


def check_tensor_meta(meta: Any, record_bytes: int, where: str) -> int:
    """The bytes a strided view needs must be present in its payload record."""
    if not isinstance(meta, dict) or meta.get("dtype") not in fmt.SCALAR_TYPES:
        raise UnsafeArchiveError("invalid_program", "tensor_meta with an unknown dtype", where)
    if meta.get("layout") != fmt.LAYOUT_STRIDED or (meta.get("device") or {}).get("type") != "cpu":
        raise UnsafeArchiveError("invalid_program", "only strided CPU tensors are accepted", where)
    sizes = [_as_int(s, where) for s in meta.get("sizes", [])]
    strides = [_as_int(s, where) for s in meta.get("strides", [])]
    offset = _as_int(meta.get("storage_offset", {"as_int": 0}), where)
    if len(sizes) != len(strides) or len(sizes) > 64:
        raise UnsafeArchiveError("invalid_program", "sizes and strides disagree", where)
    element = fmt.SCALAR_TYPES[meta["dtype"]][1]
    needed = (
        0
        if 0 in sizes
        else (offset + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True)) + 1) * element
    )
    if needed > record_bytes:
        raise UnsafeArchiveError(
            "declared_size_mismatch",
            f"declares {needed} bytes but its payload holds {record_bytes}",
            where,
        )
    return needed


def method_spec(name: str, doc: dict[str, Any], entry: str) -> MethodSignature:
    """User inputs and outputs of one serialized program, read from its signature."""
    try:
        graph = doc["graph_module"]["graph"]
        signature = doc["graph_module"]["signature"]
        values = graph["tensor_values"]
        ranges = doc.get("range_constraints") or {}
        inputs = _specs(signature["input_specs"], "user_input", values, ranges)
        outputs = _specs(signature["output_specs"], "user_output", values, ranges)
    except (KeyError, TypeError, AttributeError) as e:
        raise UnsafeArchiveError("invalid_program", f"malformed signature: {e!r}", entry) from e
    return MethodSignature(name, inputs, outputs)


def _specs(
    specs: list[dict[str, Any]], kind: str, values: dict[str, Any], ranges: dict[str, Any]
) -> tuple[TensorSpec, ...]:
    found = []
    for spec in specs:
        arg = spec.get(kind, {}).get("arg", {})
        tensor = arg.get("as_tensor") if isinstance(arg, dict) else None
        if tensor is None:
            continue
        meta = values[tensor["name"]]
        dtype = fmt.SCALAR_TYPES.get(meta["dtype"], ("unknown", 0))[0]
        shape = tuple(d.get("as_int", DYNAMIC_DIM) for d in meta["sizes"])
        dims = _dynamic_dims(meta["sizes"], ranges)
        found.append(TensorSpec(tensor["name"], dtype, shape, None, dims))
    return tuple(found)


# A dimension that is one plain symbol, as torch.export writes it: Symbol('s27', positive=True, ...)
_PLAIN_SYMBOL = re.compile(r"Symbol\('([A-Za-z_][A-Za-z0-9_]*)'(?:, \w+=(?:True|False))*\)")


def _dynamic_dims(
    sizes: list[dict[str, Any]], ranges: dict[str, Any]
) -> tuple[DynamicDim, ...] | None:
    """The dimensions that are one symbol, with the range the archive records for it, and
    those that are an expression the archive records a range for (a derived ``Dim``:
    ``384*s69 - 256``): what ``manager.signature`` reads from a live program, read here from
    the document."""
    dims = []
    for axis, size in enumerate(sizes):
        expr = (size.get("as_expr") or {}).get("expr_str")
        found = _PLAIN_SYMBOL.fullmatch(expr) if isinstance(expr, str) else None
        name = found[1] if found is not None else derived_dimension(expr, ranges)
        if name is None:
            continue
        known = ranges.get(name)
        known = known if isinstance(known, dict) else {}
        low, high = known.get("min_val"), known.get("max_val")
        dims.append(DynamicDim(axis, name, _bound(low) or 0, _bound(high)))
    return tuple(dims) or None


def _bound(value: Any) -> int | None:
    """A recorded bound as an int; None for an unbounded (or malformed) one."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
