"""A profile job inside a lowering child: its inputs, then the measurement.

The child is confined before it gets the job (see :mod:`lowering_child`), and fresh: the
``.pte`` it profiles was never loaded in it, so the first load is a cold one. The inputs are
the job's own (``/v2`` JSON tensors, checked against the method's signature) or, by default,
the inputs the artifact's numerics check used: the program archive's example inputs, else
inputs generated from its specs (:func:`pteforge.manager.example_inputs.method_inputs`),
never zeros.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.contracts.errors import ErrorCode
from pteforge.contracts.jobs import ProfileReport, ProfileRequest
from pteforge.runtime.errors import InvalidInputError
from pteforge.runtime.kernel_guards import check_inputs, kernel_guards
from pteforge.runtime.validation import check_arrays

ProgramLoader = Callable[[Path, Path], dict[str, Any]]
"""Loads a validated program archive (path, scratch directory) into exported programs."""


def numerics_inputs(program_path: Path, method: str, load: ProgramLoader) -> list[np.ndarray]:
    """The inputs the numerics check ran ``method`` on, as numpy arrays."""
    import torch

    from pteforge.manager.example_inputs import method_inputs

    with tempfile.TemporaryDirectory(prefix="pteforge-profile-") as scratch:
        programs = load(program_path, Path(scratch))
    if method not in programs:
        raise InvalidInputError(f"the artifact's program has no method {method!r}")
    flat, _source = method_inputs(programs[method])
    # its constants (non-tensor inputs) are the signature's, which the runtime fills in
    return [np.ascontiguousarray(v.detach().numpy()) for v in flat if isinstance(v, torch.Tensor)]


def given_inputs(request: ProfileRequest) -> list[np.ndarray]:
    """The request's ``/v2`` JSON tensors, decoded and checked against its signature."""
    from pteforge.runtime.oip_codec import decode_infer_request

    body = json.dumps({"inputs": request.inputs}).encode()
    return decode_infer_request(body, None, request.signature).inputs


class ProfileInputError(Exception):
    """The job's inputs do not fit its method: the caller's mistake, not the server's."""

    code = ErrorCode.INVALID_REQUEST


def profile(request: ProfileRequest, load: ProgramLoader) -> ProfileReport:
    """Measure the request's method (:func:`pteforge.runtime.profile_run.profile_program`);
    inputs that do not fit it fail the job as ``invalid_request``, naming the input."""
    try:
        return _profile(request, load)
    except InvalidInputError as exc:
        raise ProfileInputError(str(exc)) from None


def _profile(request: ProfileRequest, load: ProgramLoader) -> ProfileReport:
    from pteforge.runtime.profile_run import profile_program

    if request.inputs is not None:
        inputs = given_inputs(request)
    elif request.program_path is not None:
        inputs = numerics_inputs(Path(request.program_path), request.method, load)
    else:
        raise InvalidInputError("the profile job has neither inputs nor a program to take them")
    check_arrays(request.signature, inputs)
    guards = kernel_guards(Path(request.pte_path))  # as the runtime workers do
    check_inputs(guards, request.method, request.signature.inputs, inputs)
    return profile_program(
        Path(request.pte_path), request.method, inputs, request.iterations, request.signature
    )
