"""OpenVINO's usage telemetry, kept off before anything imports ``openvino``.

``import openvino`` (and ``nncf``) start ``openvino_telemetry``, which is on unless the user
opted out: it writes ``~/intel/openvino_ga_cid`` and ``~/intel/stats`` and sends usage events
to Google Analytics. A lowering child may write only its scratch directory, so that write
fails the job (``PermissionError: '/root/intel/openvino_ga_cid'``), and a compile service
has no business phoning home. Both libraries fall back to their own no-op stubs when
``openvino_telemetry`` cannot be imported, so the import is blocked here, once per process.
"""

from __future__ import annotations

import sys

TELEMETRY_MODULE = "openvino_telemetry"


def block_openvino_telemetry() -> None:
    """Make ``import openvino_telemetry`` fail in this process (idempotent).

    Call before the first ``import openvino``; a module already imported stays as it is.
    """
    sys.modules.setdefault(TELEMETRY_MODULE, None)  # type: ignore[arg-type]
