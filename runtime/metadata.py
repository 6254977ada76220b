"""Method signatures (input/output names, dtypes and shapes) read from ``.pte`` metadata.

The types are the shared contracts (:mod:`pteforge.contracts.specs`).
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Any

from pteforge.contracts.specs import (
    NON_TENSOR_DTYPE,
    MethodSignature,
    TensorNames,
    TensorSpec,
    et_dtype_name,
)
from pteforge.runtime.artifact_files import data_beside
from pteforge.runtime.errors import MalformedProgramError, ProgramLoadError
from pteforge.runtime.flatbuffer_readers import (
    PROGRAM_SCHEMA,
    FlatbufferReaderError,
    generated_reader,
)
from pteforge.runtime.program_reader import read_program

__all__ = [
    "MethodSignature",
    "ProgramFlatbuffer",
    "TensorNames",
    "TensorSpec",
    "describe_program",
    "describe_pte",
    "input_name",
    "output_name",
    "program_flatbuffer",
    "program_table",
    "read_dynamism",
    "signature_from_meta",
]

_log = logging.getLogger(__name__)

_READING_OUT_OF_BOUNDS: tuple[type[Exception], ...] = (
    ValueError,  # UnicodeDecodeError too
    TypeError,
    IndexError,
    OverflowError,
    struct.error,
)
_UNREADABLE: tuple[type[Exception], ...] = (FlatbufferReaderError, *_READING_OUT_OF_BOUNDS)
MALFORMED_FLATBUFFER: tuple[type[Exception], ...] = (MalformedProgramError, *_READING_OUT_OF_BOUNDS)
"""What :func:`program_table` (``MalformedProgramError``) or walking a table it read from a
malformed program (a vector it lacks: ``TypeError``) raise (found by truncating and flipping
bytes of a real ``.pte``). Anything else, an unreadable file (``OSError``) or a reader that
cannot be generated (``FlatbufferReaderError``) included, is not a malformed program and
propagates."""


def input_name(index: int) -> str:
    """The protocol name of positional input ``index`` (runtime metadata carries no names)."""
    return f"input_{index}"


def output_name(index: int) -> str:
    """The protocol name of positional output ``index``."""
    return f"output_{index}"


# Per method: which inputs and which outputs are dynamically shaped tensors.
Dynamism = dict[str, tuple[list[bool], list[bool]]]


def _tensor_spec(meta: Any, index: int, name: str, is_input: bool, dynamic: bool) -> TensorSpec:
    try:
        info = meta.input_tensor_meta(index) if is_input else meta.output_tensor_meta(index)
    except IndexError:  # what the binding raises for a non-tensor value (int, bool, ...)
        return TensorSpec(name, NON_TENSOR_DTYPE, ())
    sizes = tuple(int(s) for s in info.sizes())
    dtype = et_dtype_name(int(info.dtype()))
    if dynamic:
        return TensorSpec(name, dtype, tuple(-1 for _ in sizes), sizes)
    return TensorSpec(name, dtype, sizes)


def signature_from_meta(
    method: str, meta: Any, dynamic: tuple[list[bool], list[bool]] = ([], [])
) -> MethodSignature:
    """Build a ``MethodSignature`` from an ExecuTorch ``MethodMeta``."""
    dyn_in, dyn_out = dynamic
    inputs = tuple(
        _tensor_spec(meta, i, input_name(i), True, i < len(dyn_in) and dyn_in[i])
        for i in range(meta.num_inputs())
    )
    outputs = tuple(
        _tensor_spec(meta, i, output_name(i), False, i < len(dyn_out) and dyn_out[i])
        for i in range(meta.num_outputs())
    )
    return MethodSignature(method, inputs, outputs)


def _is_dynamic(value: Any) -> bool:
    dynamism = getattr(value.val, "shape_dynamism", None)  # None for non-tensor values
    return dynamism is not None and int(getattr(dynamism, "value", dynamism)) != 0


class ProgramFlatbuffer:
    """The flatbuffer of the ``.pte`` at ``path``, read at most once: the readers of one
    program's state, dynamism and guarded methods share it while a worker loads it (each
    read converts the whole table to Python objects: 14 ms for a 500-value language model)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._table: Any = None

    def __str__(self) -> str:  # the readers' warnings name the file
        return str(self.path)

    def table(self) -> Any:
        """The Program table (raises as :func:`program_table` does; not kept then)."""
        if self._table is None:
            self._table = _read_flatbuffer(self.path)
        return self._table


def program_table(source: Path | ProgramFlatbuffer) -> Any:
    """The Program table of a ``.pte`` (a path: read now; a :class:`ProgramFlatbuffer`:
    read once), reading only its flatbuffer (not the segments), untrusted: by the bounded
    reader :func:`pteforge.runtime.program_reader.read_program` (upstream's dataclasses,
    as ``_flatbuffer_to_program`` gives them). A malformed one raises
    ``MalformedProgramError`` (a header claiming more than the file too)."""
    return source.table() if isinstance(source, ProgramFlatbuffer) else _read_flatbuffer(source)


def program_flatbuffer(path: Path) -> bytes:
    """The program flatbuffer of the ``.pte`` at ``path``: the bytes its extended header
    says (the whole file without one), not the segments after them. Raises ``ValueError``
    where the header claims more than the file holds."""
    from executorch.exir._serialize._program import _get_extended_header

    with path.open("rb") as fh:
        head = fh.read(64)
        header = _get_extended_header(head)
        size = header.program_size if header is not None and header.is_valid() else None
        if size is not None and size > (actual := path.stat().st_size):
            raise ValueError(f"the header says {size} bytes of program, the file has {actual}")
        return head + (fh.read(size - len(head)) if size else fh.read())


def _read_flatbuffer(path: Path) -> Any:
    generated_reader(PROGRAM_SCHEMA)  # its failure is no malformed program
    try:
        return read_program(program_flatbuffer(path))
    except _UNREADABLE as exc:
        raise MalformedProgramError(f"malformed program ({type(exc).__name__}: {exc})") from exc


def read_dynamism(path: Path | ProgramFlatbuffer) -> Dynamism:
    """Which method inputs/outputs are dynamic tensors, from the program flatbuffer.

    The runtime's ``MethodMeta`` only reports the upper-bound sizes; the flatbuffer's
    per-tensor ``shape_dynamism`` says whether they may vary. A malformed flatbuffer ->
    all static, with a warning naming the file; a file that cannot be read raises ``OSError``.
    """
    try:
        return {
            plan.name: (
                [_is_dynamic(plan.values[i]) for i in plan.inputs],
                [_is_dynamic(plan.values[i]) for i in plan.outputs],
            )
            for plan in program_table(path).execution_plan
        }
    except MALFORMED_FLATBUFFER as exc:
        _log.warning(
            "cannot read the program flatbuffer of %s (%s: %s); its methods are described "
            "with static shapes",
            path,
            type(exc).__name__,
            exc,
        )
        return {}


def describe_program(program: Any, dynamism: Dynamism | None = None) -> dict[str, MethodSignature]:
    """Signatures of every method of a loaded ``executorch.runtime.Program``."""
    dynamism = dynamism or {}
    return {
        name: signature_from_meta(name, program.metadata(name), dynamism.get(name, ([], [])))
        for name in sorted(program.method_names)
    }


def describe_pte(path: str | Path) -> dict[str, MethodSignature]:
    """Per-method input and output specs of the ``.pte`` at ``path``, loaded in this process.

    Only call this on artifacts this service produced; for untrusted uploads use
    ``RuntimePool.describe``, which parses in an isolated worker process. Inputs the program
    holds a constant for are its ``constants``, as the pool's workers describe them.
    """
    from executorch.runtime import Runtime

    from pteforge.runtime.constant_inputs import held_apart, read_constants  # it imports us

    try:
        program = Runtime.get().load_program(Path(path), data_path=data_beside(Path(path)))
    except Exception as exc:
        raise ProgramLoadError(f"cannot load {path}: {exc}") from exc
    flatbuffer = ProgramFlatbuffer(Path(path))
    described = describe_program(program, read_dynamism(flatbuffer))
    return held_apart(described, read_constants(flatbuffer))
