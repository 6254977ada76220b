"""Builders of valid and hostile pt2 archives for the sandbox tests.

Every hostile archive is a valid one with a single edit; the payloads, if they ever ran, would
create a marker file, so "the marker does not exist" proves nothing executed.
"""

from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

Entries = dict[str, bytes]


class MarkerPayload:
    """Unpickling this runs ``exec`` that writes ``path`` (a stand-in for any attacker code)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (exec, (f"open({self.path!r}, 'w').write('pwned')",))


def marker_pickle(marker: Path) -> bytes:
    return pickle.dumps(MarkerPayload(marker), protocol=2)


def torch_zip_holding(pickle_bytes: bytes) -> bytes:
    """A ``torch.save``-shaped zip whose data.pkl is ``pickle_bytes``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle_bytes)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


def read_archive(path: Path) -> tuple[str, Entries]:
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        root = names[0].split("/", 1)[0]
        return root, {n.split("/", 1)[1]: z.read(n) for n in names}


def write_archive(dst: Path, root: str, entries: Entries) -> Path:
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as z:
        for rel, data in entries.items():
            z.writestr(f"{root}/{rel}", data)
    return dst


def edit_archive(src: Path, dst: Path, edit: Callable[[Entries], None]) -> Path:
    root, entries = read_archive(src)
    edit(entries)
    return write_archive(dst, root, entries)


def edit_json(entries: Entries, rel: str, edit: Callable[[Any], None]) -> None:
    doc = json.loads(entries[rel])
    edit(doc)
    entries[rel] = json.dumps(doc).encode()


def model_name(entries: Entries) -> str:
    return next(r[len("models/") : -len(".json")] for r in entries if r.startswith("models/"))


# --- one hostile edit per code-executing path -------------------------------------------------


def pickled_weight(marker: Path) -> Callable[[Entries], None]:
    """A weight flagged ``use_pickle`` whose payload is a malicious pickle."""

    def edit(entries: Entries) -> None:
        name = model_name(entries)

        def flag(doc: Any) -> None:
            meta = next(iter(doc["config"].values()))
            meta["use_pickle"] = True
            entries["data/weights/" + meta["path_name"]] = marker_pickle(marker)

        edit_json(entries, f"data/weights/{name}_weights_config.json", flag)

    return edit


def _pickled_constant(
    marker: Path, entry: str, record: dict[str, Any]
) -> Callable[[Entries], None]:
    """A malicious pickle stored as constant ``entry``, declared in the constants config by
    ``record``."""

    def edit(entries: Entries) -> None:
        name = model_name(entries)
        entries["data/constants/" + entry] = marker_pickle(marker)

        def add(doc: Any) -> None:
            doc["config"]["evil"] = dict(record)

        edit_json(entries, f"data/constants/{name}_constants_config.json", add)

    return edit


def opaque_constant(marker: Path) -> Callable[[Entries], None]:
    """An ``opaque_obj_`` constant: torch unpickles it with plain ``pickle.loads``."""
    record = {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True}
    return _pickled_constant(marker, "opaque_obj_0", {**record, "tensor_meta": None})


def opaque_constant_config_only(marker: Path) -> Callable[[Entries], None]:
    """The same constant under an innocent entry name: caught by the config check."""
    record = {"path_name": "tensor_7", "is_param": False, "use_pickle": True}
    return _pickled_constant(marker, "tensor_7", record)


def pickled_sample_inputs(marker: Path) -> Callable[[Entries], None]:
    """Sample inputs failing ``weights_only=True``: torch retries with ``weights_only=False``."""

    def edit(entries: Entries) -> None:
        entries[f"data/sample_inputs/{model_name(entries)}.pt"] = torch_zip_holding(
            marker_pickle(marker)
        )

    return edit


def sympy_expression(marker: Path) -> Callable[[Entries], None]:
    """An ``expr_str`` that ``sympy.sympify`` would evaluate as Python."""

    def edit(entries: Entries) -> None:
        def inject(doc: Any) -> None:
            values = doc["graph_module"]["graph"]["sym_int_values"]
            first = next(iter(values.values()))
            first["as_expr"]["expr_str"] = f"__import__('os').system('touch {marker}')"

        edit_json(entries, f"models/{model_name(entries)}.json", inject)

    return edit


def guard_code(marker: Path) -> Callable[[Entries], None]:
    """``guards_code`` that ``ep.module()`` compiles with ``exec`` and runs on every call."""

    def edit(entries: Entries) -> None:
        def inject(doc: Any) -> None:
            doc["guards_code"] = [f"__import__('os').system('touch {marker}') == 0"]

        edit_json(entries, f"models/{model_name(entries)}.json", inject)

    return edit


def aoti_library(entries: Entries) -> None:
    """An AOTInductor package entry: a shared library torch would dlopen."""
    entries[f"data/aotinductor/{model_name(entries)}/{model_name(entries)}.so"] = b"\x7fELF"


def custom_object_value(entries: Entries) -> None:
    def inject(doc: Any) -> None:
        doc["graph_module"]["graph"]["custom_obj_values"] = {"obj": {"class_fqn": "x.Evil"}}

    edit_json(entries, f"models/{model_name(entries)}.json", inject)


def operator_edit(target: str) -> Callable[[Entries], None]:
    """The first node calls ``target`` instead of its aten op."""

    def edit(entries: Entries) -> None:
        def inject(doc: Any) -> None:
            doc["graph_module"]["graph"]["nodes"][0]["target"] = target

        edit_json(entries, f"models/{model_name(entries)}.json", inject)

    return edit


def huge_declared_tensor(entries: Entries) -> None:
    """An empty weight record that declares 40 GB: torch would allocate ``torch.zeros`` of it."""
    name = model_name(entries)

    def inflate(doc: Any) -> None:
        meta = next(iter(doc["config"].values()))
        meta["tensor_meta"]["sizes"] = [{"as_int": 100_000}, {"as_int": 100_000}]
        meta["tensor_meta"]["strides"] = [{"as_int": 100_000}, {"as_int": 1}]
        entries["data/weights/" + meta["path_name"]] = b""

    edit_json(entries, f"data/weights/{name}_weights_config.json", inflate)


def range_bounds(bounds: dict[str, int]) -> Callable[[Entries], None]:
    """Every dynamic dimension's recorded range replaced by ``bounds`` (min_val, max_val)."""

    def edit(entries: Entries) -> None:
        def rewrite(doc: Any) -> None:
            doc["range_constraints"] = {k: dict(bounds) for k in doc["range_constraints"]}

        edit_json(entries, f"models/{model_name(entries)}.json", rewrite)

    return edit


def legacy_pickled_weights(marker: Path) -> Callable[[Entries], None]:
    def edit(entries: Entries) -> None:
        entries[f"data/weights/{model_name(entries)}.pt"] = marker_pickle(marker)

    return edit


def zip_bomb(dst: Path, src: Path) -> Path:
    """A valid archive plus one highly compressible 64 MiB entry."""
    root, entries = read_archive(src)
    write_archive(dst, root, entries)
    with zipfile.ZipFile(dst, "a", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{root}/extra/padding", b"\0" * (64 * 1024 * 1024))
    return dst


def traversal(dst: Path, src: Path, name: str) -> Path:
    root, entries = read_archive(src)
    write_archive(dst, root, entries)
    with zipfile.ZipFile(dst, "a") as z:
        z.writestr(zipfile.ZipInfo(name), b"x")
    return dst


def save_programs(programs: dict[str, torch.export.ExportedProgram], path: Path) -> Path:
    from torch.export.pt2_archive._package import package_pt2

    package_pt2(str(path), exported_programs=dict(programs))
    return path


class DynamicPair(torch.nn.Module):
    """Dynamic batch: its archive carries ``expr_str`` symbols and guard code."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        half = x[: x.shape[0] // 2]
        return torch.cat([x, y]).sum(0) + half.mean()


def dynamic_program() -> torch.export.ExportedProgram:
    batch = 2 * torch.export.Dim("half", min=1, max=32)
    other = torch.export.Dim("other", min=1, max=64)
    return torch.export.export(
        DynamicPair(),
        (torch.randn(4, 3), torch.randn(5, 3)),
        dynamic_shapes=({0: batch}, {0: other}),
    )


def many_entries(dst: Path, count: int) -> Path:
    """A zip whose central directory lists ``count`` empty entries ``a/x`` (49 bytes each,
    all at one local header) and whose end record declares one: what costs a parser that
    builds every entry before it counts them."""
    name, crc = b"a/x", zlib.crc32(b"")
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, 0, 0, len(name), 0)
    entry = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, crc, 0, 0, len(name), 0, 0, 0, 0, 0, 0
    )
    directory = (entry + name) * count
    start = len(local) + len(name)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(directory), start, 0)
    dst.write_bytes(local + name + directory + end)
    return dst
