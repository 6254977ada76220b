"""Worker process: verify and load a ``.pte`` with the ExecuTorch runtime, print JSON metadata."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pteforge.contracts.specs import et_dtype_name

from .digests import read_verified
from .errors import InvalidPteError
from .specs import MethodSignature, ProgramDescription, TensorSpec
from .worker_io import WorkerJob, worker_main

if TYPE_CHECKING:
    from pteforge.runtime.metadata import Dynamism


def _tensor_specs(
    meta: Any, count: int, getter: str, prefix: str, dynamic: list[bool]
) -> tuple[TensorSpec, ...]:
    """The tensors' specs; a dynamic one (by the program flatbuffer) as the runtime workers
    describe it: ``-1`` sizes under the planned bound (``max_shape``), not that bound as if
    it were the only size taken."""
    specs = []
    for i in range(count):
        try:
            info = getattr(meta, getter)(i)
        except (RuntimeError, ValueError, IndexError):
            continue  # a non-tensor value (int, bool, None) has no tensor metadata
        dtype = et_dtype_name(int(info.dtype()))
        sizes = tuple(int(d) for d in info.sizes())
        if i < len(dynamic) and dynamic[i]:
            specs.append(TensorSpec(f"{prefix}_{i}", dtype, tuple(-1 for _ in sizes), sizes))
        else:
            specs.append(TensorSpec(f"{prefix}_{i}", dtype, sizes))
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


def _dynamism(path: Path) -> Dynamism:
    """Which tensors of each method are dynamic, from the program flatbuffer; none (static
    shapes) in a child that cannot load the flatbuffer reader: a fresh confined interpreter
    may not run ``flatc``, and only a fork server preloads the reader for its children."""
    from subprocess import SubprocessError

    from pteforge.runtime.flatbuffer_readers import FlatbufferReaderError
    from pteforge.runtime.metadata import read_dynamism

    try:
        return read_dynamism(path)
    except (OSError, SubprocessError, FlatbufferReaderError):
        return {}


_EXTERNAL_DATA = (
    ": the program keeps its constants in a separate .ptd file (ExecuTorch's program-data "
    "separation: external_constants, or an exporter's external-weights option); send that "
    "file with it, as the upload's 'ptd' part (`pteforge deploy model.pte NAME --ptd model.ptd`)"
)
_WRONG_DATA = "the .pte does not load with the .ptd (part 'ptd') sent with it: "


def _job(argv: list[str]) -> ProgramDescription:
    """``argv``: the ``.pte``'s path and sha256, then those of its ``.ptd`` if it has one."""
    from pteforge.contracts.et_errors import log_suffix, name_error_codes
    from pteforge.runtime.native_log import LOG_FILE, NativeLog

    data = read_verified(argv[0], argv[1])
    _check_length(data)
    ptd = _private_copy(argv[2], argv[3]) if len(argv) > 2 else None
    log = NativeLog(Path(tempfile.gettempdir()) / LOG_FILE)  # the child's scratch directory
    try:
        return _describe(data, _dynamism(Path(argv[0])), ptd)
    except RuntimeError as exc:  # ExecuTorch's bindings quote only the error code's number
        said = log.take()  # why, in the runtime's words
        if ptd is not None:
            raise InvalidPteError(
                "invalid_ptd", _WRONG_DATA + name_error_codes(str(exc)) + log_suffix(said)
            ) from exc
        hint = _EXTERNAL_DATA if "external_data_map is null" in said else ""
        raise RuntimeError(name_error_codes(str(exc)) + hint + log_suffix(said)) from exc
    finally:
        log.close()


def _private_copy(path: str, sha256: str) -> Path:
    """The ``.ptd``, once it hashes to ``sha256``, copied into the child's scratch directory:
    the runtime reads it by path, and this copy cannot change after the check."""
    copy = Path(tempfile.gettempdir()) / "program.ptd"
    copy.write_bytes(read_verified(path, sha256))
    return copy


def _describe(data: bytes, dynamism: Dynamism, ptd: Path | None = None) -> ProgramDescription:
    from executorch.runtime import Runtime, Verification

    from pteforge.runtime.runner_metadata import describe_generation

    program = Runtime.get().load_program(
        data, verification=Verification.InternalConsistency, data_path=ptd
    )
    methods = []
    for name in sorted(program.method_names):
        meta = program.load_method(name).metadata
        ins, outs = dynamism.get(name, ([], []))
        methods.append(
            MethodSignature(
                name,
                _tensor_specs(meta, meta.num_inputs(), "input_tensor_meta", "input", ins),
                _tensor_specs(meta, meta.num_outputs(), "output_tensor_meta", "output", outs),
            )
        )
    return ProgramDescription(tuple(methods), describe_generation(program))


JOB = WorkerJob(_job, failure_reason="invalid_pte")

if __name__ == "__main__":
    worker_main(JOB)
