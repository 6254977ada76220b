"""Importing this module loads ExecuTorch's native runtime and nothing of its compiler: for
the preload list of the fork server whose children run or validate programs.

Upstream's ``portable_lib`` imports ``executorch.exir._warnings``, and so the package
``executorch.exir``, whose ``__init__`` imports the whole compiler: about 5 s of CPU and
60 MB per fork server (measured with the sandbox's imports), and code a process that handles
uploads never needs. Here ``executorch.exir`` is registered with its ``__init__``
deferred (:func:`pteforge.lazy.defer_package_init`): the runtime's imports of its
submodules (warnings, the flatbuffer schema) load only those, and anything that asks for a
name of the compiler still gets the real package. ``executorch.devtools`` likewise: a
profile's ETDump reader loads in under a second, without the inspector, which needs the
compiler.

The LLM custom operators' kernels (``llama::custom_sdpa``, ``llama::update_cache``, for
programs from ``export_llama``) load from upstream's library directly: its Python module
also registers inductor lowerings, for tracing only, and importing inductor costs seconds.
So do the portable kernels of the ``quantized_decomposed`` operators, which an int8 program
calls where its partitioner left a quantize or dequantize outside the delegate (SigLIP's
pooling head under XNNPACK): the runtime's own registry lacks them (``OperatorMissing``).
"""

import importlib.util
from pathlib import Path

import torch

from pteforge.lazy import defer_package_init

defer_package_init("executorch.exir")
defer_package_init("executorch.devtools")  # a profile's ETDump reader, without the inspector

import executorch.exir._serialize._program  # noqa: E402  (the workers' flatbuffer reader)
import executorch.runtime  # noqa: E402, F401


def _load_library(package: str, pattern: str) -> None:
    """Load upstream's native library ``pattern`` found beside ``package`` (not imported)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ImportError(f"{package} is not installed")
    torch.ops.load_library(next(Path(spec.origin).parent.glob(pattern)))


_load_library("executorch.extension.llm.custom_ops", "libcustom_ops_aot_lib.*")
_load_library("executorch.kernels.quantized", "libquantized_ops_aot_lib.*")
