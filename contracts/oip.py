"""The Open Inference Protocol v2 on the wire, as client and runtime both speak it: the
binary-data header and the numpy dtype of each OIP datatype (from the one dtype table in
:mod:`pteforge.contracts.specs`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pteforge.contracts.specs import OIP_DATATYPES

HEADER_LENGTH = "Inference-Header-Content-Length"
STALE_HEADER_LENGTH = (
    "left from an earlier request? tritonclient.http writes it into the headers dict it is "
    "given: pass a new dict to each call"
)
"""Why a request's ``HEADER_LENGTH`` most often misses its body."""
"""The header that says how many bytes of a binary-extension body are its JSON header."""

# The OIP datatypes the runtime can feed, and their numpy dtypes (same names as torch's).
OIP_TO_NUMPY: dict[str, np.dtype] = {oip: np.dtype(name) for name, oip in OIP_DATATYPES.items()}
NUMPY_TO_OIP: dict[np.dtype, str] = {np_dt: oip for oip, np_dt in OIP_TO_NUMPY.items()}


def oip_datatype(dtype: np.dtype) -> str:
    """The OIP datatype of numpy ``dtype`` (its numpy name where OIP has none)."""
    # Not .get(dtype, str(dtype)): numpy's dtype str is Python code (~4 us), paid on every
    # call although the table answers for every dtype a request can hold.
    return NUMPY_TO_OIP.get(dtype) or str(dtype)


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def json_values(array: np.ndarray) -> list[Any]:
    """The flat values of ``array`` for a JSON tensor's ``data``. JSON has no NaN or
    Infinity: those floats are the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, so
    the body stays valid JSON for strict parsers; ``tritonclient``'s ``as_numpy`` (numpy's
    float parse) and ``pteforge.client`` read them back as the floats they were."""
    values: list[Any] = array.reshape(-1).tolist()
    if array.dtype.kind != "f" or bool(np.isfinite(array).all()):
        return values
    return [v if math.isfinite(v) else _NON_FINITE[str(v)] for v in values]
