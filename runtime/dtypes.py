"""Mappings between numpy dtypes and OIP datatypes, from the one dtype table.

The ExecuTorch ScalarType codes and their OIP datatypes live in
:mod:`pteforge.contracts.specs`; this module adds the numpy side the runtime feeds.
"""

from __future__ import annotations

import numpy as np

from pteforge.contracts.specs import OIP_DATATYPES
from pteforge.runtime.errors import InvalidInputError

# The OIP datatypes the runtime can feed, and their numpy dtypes (same names as torch's).
OIP_TO_NUMPY: dict[str, np.dtype] = {oip: np.dtype(name) for name, oip in OIP_DATATYPES.items()}
NUMPY_TO_OIP: dict[np.dtype, str] = {np_dt: oip for oip, np_dt in OIP_TO_NUMPY.items()}


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype of an OIP datatype; raises ``InvalidInputError`` if unsupported."""
    try:
        return OIP_TO_NUMPY[datatype]
    except KeyError:
        supported = ", ".join(sorted(OIP_TO_NUMPY))
        raise InvalidInputError(
            f"unsupported datatype {datatype!r} (supported: {supported})"
        ) from None
