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
# pteforge lowers with to_edge + to_backend on purpose (a DelegationSpec per method needs it);
# XNNPACK's partitioner logs a deprecation notice about that workflow on every partition.
_XNNPACK_PARTITIONER_LOGGER = "executorch.backends.xnnpack.partition.xnnpack_partitioner"
_WORKFLOW_NOTICE = "deprecated 'to_edge() + to_backend()' workflow"


class _DropWorkflowNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return _WORKFLOW_NOTICE not in record.getMessage()


def quiet_third_party() -> None:
    """Silence the known import-time noise of torch, torchao and ExecuTorch (idempotent)."""
    for name, level in _NOISY_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    for category in (FutureWarning, DeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category, module=_NOISY_WARNING_MODULES)
    for message in _NOISY_WARNING_MESSAGES:  # raised with a stack level outside torch
        warnings.filterwarnings("ignore", message=message)
    partitioner_log = logging.getLogger(_XNNPACK_PARTITIONER_LOGGER)
    if not any(isinstance(f, _DropWorkflowNotice) for f in partitioner_log.filters):
        partitioner_log.addFilter(_DropWorkflowNotice())
