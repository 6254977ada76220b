"""Mappings between ExecuTorch ScalarType codes, numpy dtypes and OIP datatypes."""

from __future__ import annotations

import numpy as np

from pteforge.runtime.errors import InvalidInputError

# ExecuTorch ScalarType code -> (numpy dtype, Open Inference Protocol datatype).
_SCALAR_TYPES: dict[int, tuple[np.dtype, str]] = {
    0: (np.dtype(np.uint8), "UINT8"),
    1: (np.dtype(np.int8), "INT8"),
    2: (np.dtype(np.int16), "INT16"),
    3: (np.dtype(np.int32), "INT32"),
    4: (np.dtype(np.int64), "INT64"),
    5: (np.dtype(np.float16), "FP16"),
    6: (np.dtype(np.float32), "FP32"),
    7: (np.dtype(np.float64), "FP64"),
    11: (np.dtype(np.bool_), "BOOL"),
}

OIP_TO_NUMPY: dict[str, np.dtype] = {oip: np_dt for np_dt, oip in _SCALAR_TYPES.values()}
NUMPY_TO_OIP: dict[np.dtype, str] = {np_dt: oip for np_dt, oip in _SCALAR_TYPES.values()}


def oip_datatype(scalar_type: int) -> str:
    """The OIP datatype of an ExecuTorch ScalarType code (``"UNSUPPORTED"`` if unmapped)."""
    entry = _SCALAR_TYPES.get(scalar_type)
    return entry[1] if entry else f"UNSUPPORTED({scalar_type})"


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype of an OIP datatype; raises ``InvalidInputError`` if unsupported."""
    try:
        return OIP_TO_NUMPY[datatype]
    except KeyError:
        supported = ", ".join(sorted(OIP_TO_NUMPY))
        raise InvalidInputError(
            f"unsupported datatype {datatype!r} (supported: {supported})"
        ) from None
