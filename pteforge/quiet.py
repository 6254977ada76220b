"""Third-party noise kept out of pteforge's output, set once at each entry point.

Importing torch, torchao and ExecuTorch prints lines that say nothing about the user's work:
torchao's optional CUDA kernels that cannot load on a CPU host, torch's deprecation notice
about an Enum registered by torchao, ``FutureWarning``/``DeprecationWarning``s from their
internals. They are filtered by origin only, so pteforge's own warnings and real errors of
these libraries still show. Forked children inherit the filters; entry points of freshly
started interpreters (fork servers, ``pteforge`` itself) call :func:`quiet_third_party`.
"""

from __future__ import annotations

import logging
import warnings

_NOISY_LOGGERS = {
    "torchao": logging.ERROR,  # "Failed to load .../_C_mxfp8...so" on every CPU-only import
    "torch.utils._pytree": logging.ERROR,  # "... Enum subclass ... register_constant()"
}
_NOISY_WARNING_MODULES = r"^(torch|torchao|executorch|transformers|coremltools)(\.|$)"
_NOISY_WARNING_MESSAGES = (r"`isinstance\(treespec, LeafSpec\)` is deprecated",)


def quiet_third_party() -> None:
    """Silence the known import-time noise of torch, torchao and ExecuTorch (idempotent)."""
    for name, level in _NOISY_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    for category in (FutureWarning, DeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category, module=_NOISY_WARNING_MODULES)
    for message in _NOISY_WARNING_MESSAGES:  # raised with a stack level outside torch
        warnings.filterwarnings("ignore", message=message)
