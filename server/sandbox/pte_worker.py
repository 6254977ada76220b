"""Worker process: verify and load a ``.pte`` with the ExecuTorch runtime, print JSON metadata."""

from __future__ import annotations

from typing import Any

from pteforge.contracts.specs import et_dtype_name

from .digests import read_verified
from .errors import InvalidPteError
from .specs import MethodSignature, ProgramDescription, TensorSpec
from .worker_io import WorkerJob, worker_main


def _tensor_specs(meta: Any, count: int, getter: str, prefix: str) -> tuple[TensorSpec, ...]:
    specs = []
    for i in range(count):
        try:
            info = getattr(meta, getter)(i)
        except (RuntimeError, ValueError, IndexError):
            continue  # a non-tensor value (int, bool, None) has no tensor metadata
        dtype = et_dtype_name(int(info.dtype()))
        specs.append(TensorSpec(f"{prefix}_{i}", dtype, tuple(int(d) for d in info.sizes())))
    return tuple(specs)


def _check_length(data: bytes) -> None:
    """Refuse a file shorter than its extended header says (a cut download or upload); a
    file without a valid header is left to the loader. The header is read by upstream's own
    reader, which knows its older, shorter form."""
    from executorch.exir._serialize._program import _get_extended_header

    header = _get_extended_header(data)
    if header is None:
        return
    segments = header.segment_data_size
    expected = max(header.program_size, header.segment_base_offset + segments if segments else 0)
    if len(data) < expected:
        raise InvalidPteError(
            "truncated_pte",
            f"the file is truncated: its header says {expected} bytes, it has {len(data)}",
        )


def _job(argv: list[str]) -> ProgramDescription:
    data = read_verified(argv[0], argv[1])
    _check_length(data)
    try:
        return _describe(data)
    except RuntimeError as exc:  # ExecuTorch's bindings quote only the error code's number
        from pteforge.contracts.et_errors import name_error_codes

        raise RuntimeError(name_error_codes(str(exc))) from exc


def _describe(data: bytes) -> ProgramDescription:
    from executorch.runtime import Runtime, Verification

    from pteforge.runtime.runner_metadata import describe_generation

    program = Runtime.get().load_program(data, verification=Verification.InternalConsistency)
    methods = []
    for name in sorted(program.method_names):
        meta = program.load_method(name).metadata
        methods.append(
            MethodSignature(
                name,
                _tensor_specs(meta, meta.num_inputs(), "input_tensor_meta", "input"),
                _tensor_specs(meta, meta.num_outputs(), "output_tensor_meta", "output"),
            )
        )
    return ProgramDescription(tuple(methods), describe_generation(program))


JOB = WorkerJob(_job, failure_reason="invalid_pte")

if __name__ == "__main__":
    worker_main(JOB)
