"""The Open Inference Protocol v2 on the wire, as client and runtime both speak it: the
binary-data header and the numpy dtype of each OIP datatype (from the one dtype table in
:mod:`pteforge.contracts.specs`)."""

from __future__ import annotations

import numpy as np

from pteforge.contracts.specs import OIP_DATATYPES

HEADER_LENGTH = "Inference-Header-Content-Length"
"""The header that says how many bytes of a binary-extension body are its JSON header."""

# The OIP datatypes the runtime can feed, and their numpy dtypes (same names as torch's).
OIP_TO_NUMPY: dict[str, np.dtype] = {oip: np.dtype(name) for name, oip in OIP_DATATYPES.items()}
NUMPY_TO_OIP: dict[np.dtype, str] = {np_dt: oip for oip, np_dt in OIP_TO_NUMPY.items()}


def oip_datatype(dtype: np.dtype) -> str:
    """The OIP datatype of numpy ``dtype`` (its numpy name where OIP has none)."""
    return NUMPY_TO_OIP.get(dtype, str(dtype))
