"""The numpy dtype the runtime feeds for an OIP datatype (the mappings themselves are
shared with the client in :mod:`pteforge.contracts.oip`)."""

from __future__ import annotations

import numpy as np

from pteforge.contracts.oip import BFLOAT16, OIP_TO_NUMPY
from pteforge.runtime.errors import InvalidInputError


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype of an OIP datatype; raises ``InvalidInputError`` if unsupported."""
    try:
        return OIP_TO_NUMPY[datatype]
    except KeyError:
        supported = ", ".join(sorted(OIP_TO_NUMPY))
        raise InvalidInputError(
            f"unsupported datatype {datatype!r} (supported: {supported})"
        ) from None


def listed_as(listed: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A JSON tensor's values (as ``np.asarray`` read them) as ``dtype``; BF16's by way of
    float32, the one way ml_dtypes takes ``"NaN"``-style strings (rounded to nearest)."""
    if dtype == BFLOAT16:
        listed = listed.astype(np.float32)
    return listed.astype(dtype, copy=False)
