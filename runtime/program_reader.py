"""A ``.pte``'s Program table, read in place by the generated program reader
(:mod:`pteforge.runtime.flatbuffer_readers`) into upstream's dataclasses
(``executorch.exir.schema.Program``), equal to what upstream's reader
(``_flatbuffer_to_program``) gives for a well-formed program.

Upstream's reader unpacks the whole buffer through its object API with no bound on the work:
a hand-made flatbuffer whose vectors all point at one shared table (a 2.5 kB file holding
300 plans of 300 values each) unpacks to 90 000 objects, and one level more to millions.
This reader pays for each vector it reads, and for each string, from an
:class:`~pteforge.runtime.flatbuffer_readers.ElementBudget` of one element per 4 bytes of
the buffer, which a well-formed program (nothing shared) never exceeds: a malformed one
costs linear work, then raises ``FlatbufferReaderError`` or what reading out of bounds
raises (``MALFORMED_FLATBUFFER``).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable
from typing import Any

from pteforge.runtime.flatbuffer_readers import PROGRAM_SCHEMA, ElementBudget, generated_reader

Reader = Callable[[Any, ElementBudget], Any]
"""Reads one field of a generated table, paying from the budget."""
_UNION_ENUMS = {"val": "KernelTypes", "instr_args": "InstructionArguments"}
"""The generated enum naming the member of each union field of the schema."""
_SCALARS = (int, float, bool)


def read_program(data: bytes) -> Any:
    """The ``executorch.exir.schema.Program`` of the program flatbuffer ``data``."""
    from executorch.exir.schema import Program

    root = generated_reader(PROGRAM_SCHEMA).Program.GetRootAs(data, 0)
    return _table_reader(Program)(root, ElementBudget(data))


@functools.cache
def _table_reader(cls: type) -> Reader:
    hints = typing.get_type_hints(cls)
    fields = [(f.name, _field_reader(f.name, hints[f.name])) for f in dataclasses.fields(cls)]

    def read(table: Any, budget: ElementBudget) -> Any:
        return cls(**{name: reader(table, budget) for name, reader in fields})

    return read


def _accessor(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _optional(hint: Any) -> Any:
    """``T`` of ``Optional[T]`` (absence reads as None either way), else ``hint``."""
    members = [m for m in typing.get_args(hint) if m is not type(None)]
    is_union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    return members[0] if is_union and len(members) == 1 else hint


def _field_reader(name: str, hint: Any) -> Reader:
    hint, field = _optional(hint), _accessor(name)
    if typing.get_origin(hint) is list:
        return _list_reader(field, typing.get_args(hint)[0])
    if typing.get_origin(hint) is typing.Union:
        return _union_reader(name, field, typing.get_args(hint))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _table_field(field, hint)
    if hint is bytes:
        return _bytes_reader(field)
    if hint is str:
        return lambda table, budget: _text(getattr(table, field)(), budget)
    if hint in _SCALARS or (isinstance(hint, type) and issubclass(hint, enum.Enum)):
        return lambda table, _budget: hint(getattr(table, field)())
    raise TypeError(f"no reader for field {name} of type {hint}")


def _text(value: bytes | None, budget: ElementBudget) -> str | None:
    if value is None:
        return None
    budget.take_bytes(len(value), "string bytes")
    return value.decode()


def _table_field(field: str, cls: type) -> Reader:
    def read(table: Any, budget: ElementBudget) -> Any:
        value = getattr(table, field)()
        return None if value is None else _table_reader(cls)(value, budget)

    return read


def _bytes_reader(field: str) -> Reader:
    def read(table: Any, budget: ElementBudget) -> bytes | None:
        if getattr(table, f"{field}IsNone")():
            return None
        budget.take_bytes(getattr(table, f"{field}Length")(), f"{field} bytes")
        return bytes(getattr(table, f"{field}AsNumpy")().tobytes())

    return read


def _list_reader(field: str, item: Any) -> Reader:
    def read(table: Any, budget: ElementBudget) -> list[Any] | None:
        if getattr(table, f"{field}IsNone")():
            return None
        length = getattr(table, f"{field}Length")()
        if item in _SCALARS:
            values = getattr(table, f"{field}AsNumpy")()
            budget.take_bytes(length * values.itemsize, f"{field} bytes")
            return [item(v) for v in values.tolist()]
        at = getattr(table, field)
        budget.take(length, field)
        if item is str:
            return [_text(at(i), budget) for i in range(length)]
        return [_table_reader(item)(at(i), budget) for i in range(length)]

    return read


def _union_reader(name: str, field: str, members: tuple[Any, ...]) -> Reader:
    if not all(dataclasses.is_dataclass(m) for m in members):  # Double's Union[float, str]
        return lambda table, _budget: _scalar_member(getattr(table, field)(), members)
    module = generated_reader(PROGRAM_SCHEMA)
    codes = vars(getattr(module, _UNION_ENUMS[name]))
    by_code = {codes[m.__name__]: (getattr(module, m.__name__), m) for m in members}

    def read(table: Any, budget: ElementBudget) -> Any:
        value, chosen = getattr(table, field)(), by_code.get(getattr(table, f"{field}Type")())
        if value is None or chosen is None:  # NONE, or a type this schema does not know
            return None
        member = chosen[0]()
        member.Init(value.Bytes, value.Pos)
        return _table_reader(chosen[1])(member, budget)

    return read


def _scalar_member(value: Any, members: tuple[Any, ...]) -> Any:
    for member in members:
        if isinstance(member, type) and isinstance(value, member):
            return member(value)
    raise TypeError(f"{value!r} is none of {members}")
