"""A compiled program as an ExecuTorch BundledProgram (``.bpte``): the ``.pte`` with, per
method, one test case: the inputs its numerics check ran on and the exported program's
outputs on them (the eager reference the check compared with).

A device verifies itself with ExecuTorch's own loader (in ExecuTorch 1.5.1's pybindings:
``_load_bundled_program_from_buffer(data).verify_result_with_bundled_expected_output(method,
0, rtol, atol)``; on a device, the ``bundled_program`` runtime library), with tolerances that
fit the method: the expected outputs are eager's, so a quantized method needs looser ones
than an fp32 one.
Methods the check could not run (a backend this host cannot execute) have no test case.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from pteforge.manager.verify import NumericsCase


def bundled_program(pte_path: Path, cases: Mapping[str, NumericsCase]) -> bytes | None:
    """The ``.pte`` at ``pte_path`` bundled with ``cases`` (method -> inputs, expected
    outputs), serialized; None when no method has a case. The ``.pte`` bytes are copied
    as they are, not parsed."""
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    suites = [
        MethodTestSuite(
            method_name=method,
            test_cases=[
                MethodTestCase(
                    inputs=list(inputs),
                    expected_outputs=[o for o in outputs if isinstance(o, torch.Tensor)],
                )
            ],
        )
        for method, (inputs, outputs) in sorted(cases.items())
    ]
    if not suites:
        return None
    bundle = BundledProgram(None, suites, pte_file_path=str(pte_path))
    return bytes(serialize_from_bundled_program_to_flatbuffer(bundle))
