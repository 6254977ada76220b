"""The Open Inference Protocol v2 on the wire, as client and runtime both speak it: the
binary-data header, the numpy dtype of each OIP datatype and its name in Triton's model
configuration (from the one dtype table in :mod:`pteforge.contracts.specs`)."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from pteforge.contracts.specs import OIP_DATATYPES

HEADER_LENGTH = "Inference-Header-Content-Length"
"""The header that says how many bytes of a binary-extension body are its JSON header."""
STALE_HEADER_LENGTH = (
    "left from an earlier request? tritonclient.http and KServe's InferenceRESTClient write "
    "it into the headers dict they are given: pass a new dict to each call"
)
"""Why a request's ``HEADER_LENGTH`` most often misses its body."""

# The OIP datatypes the runtime can feed, and their numpy dtypes (same names as torch's).
# numpy has no bfloat16: ml_dtypes' (a tritonclient dependency) holds BF16's 2-byte values
# as they are, and ``np.dtype("bfloat16")`` names it once ml_dtypes is imported.
OIP_TO_NUMPY: dict[str, np.dtype] = {oip: np.dtype(name) for name, oip in OIP_DATATYPES.items()}
NUMPY_TO_OIP: dict[np.dtype, str] = {np_dt: oip for oip, np_dt in OIP_TO_NUMPY.items()}
BFLOAT16: np.dtype = np.dtype(ml_dtypes.bfloat16)
"""BF16's numpy dtype: torch reads its bytes through int16 (``torch.from_numpy`` refuses it)."""


def is_float(dtype: np.dtype) -> bool:
    """Whether ``dtype`` holds floats, BF16 included (ml_dtypes' bfloat16 is no subtype of
    ``np.floating``: ``np.issubdtype`` answers False for it)."""
    return dtype.kind == "f" or dtype == BFLOAT16


def config_data_type(datatype: str) -> str:
    """Triton's model configuration ``DataType`` name (``TYPE_FP32``) of an OIP datatype
    (``FP32``): the same names, prefixed; ``TYPE_INVALID`` for one the runtime cannot feed."""
    return f"TYPE_{datatype}" if datatype in OIP_TO_NUMPY else "TYPE_INVALID"


def oip_datatype(dtype: np.dtype) -> str:
    """The OIP datatype of numpy ``dtype`` (its numpy name where OIP has none)."""
    # Not .get(dtype, str(dtype)): numpy's dtype str is Python code (~4 us), paid on every
    # call although the table answers for every dtype a request can hold.
    return NUMPY_TO_OIP.get(dtype) or str(dtype)


def tensor_numpy(tensor: Any) -> np.ndarray:
    """``tensor.numpy()`` of a detached CPU torch tensor; a bfloat16 one's as :data:`BFLOAT16`,
    its values as they are (torch has no numpy bfloat16: its bytes are read as int16)."""
    try:
        array: np.ndarray = tensor.numpy()
        return array
    except TypeError:
        import torch  # loaded already: ``tensor`` is one of its tensors

        if tensor.dtype != torch.bfloat16:
            raise
        return np.asarray(tensor.contiguous().view(torch.int16).numpy()).view(BFLOAT16)


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def json_values(array: np.ndarray) -> list[Any]:
    """The flat values of ``array`` for a JSON tensor's ``data``. JSON has no NaN or
    Infinity: those floats are the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, so
    the body stays valid JSON for strict parsers; ``tritonclient``'s ``as_numpy`` (numpy's
    float parse) and ``pteforge.client`` read them back as the floats they were."""
    values: list[Any] = array.reshape(-1).tolist()  # BF16's as Python floats too
    if not is_float(array.dtype) or bool(np.isfinite(array).all()):
        return values
    return [v if math.isfinite(v) else _NON_FINITE[str(v)] for v in values]
