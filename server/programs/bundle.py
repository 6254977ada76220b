"""The stored form of a program uploaded as one part per method.

A pt2 archive with several programs is stored as uploaded. Per-method uploads (each a
``torch.export.save`` archive) are stored as a *bundle*: an uncompressed zip holding each
method's archive unchanged as ``methods/<name>.pt2`` plus a small manifest, so the exact
bytes that were validated are the bytes later loaded.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from pathlib import Path

BUNDLE_MANIFEST = "pteforge-bundle.json"
BUNDLE_FORMAT = "pteforge.methods.v1"


def write_bundle(method_files: Mapping[str, Path], dest: Path) -> None:
    """Write the per-method archives into one bundle file at ``dest``."""
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        manifest = {"format": BUNDLE_FORMAT, "methods": sorted(method_files)}
        zf.writestr(BUNDLE_MANIFEST, json.dumps(manifest))
        for name in sorted(method_files):
            zf.write(method_files[name], f"methods/{name}.pt2")


def is_bundle(path: Path) -> bool:
    """Whether ``path`` is a bundle written by :func:`write_bundle`."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as zf:
        return BUNDLE_MANIFEST in zf.namelist()


def extract_bundle(path: Path, directory: Path) -> dict[str, Path]:
    """Unpack a bundle's method archives into ``directory``; method name -> file."""
    out: dict[str, Path] = {}
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read(BUNDLE_MANIFEST))
        if manifest.get("format") != BUNDLE_FORMAT:
            raise ValueError(f"unknown program bundle format {manifest.get('format')!r}")
        for index, name in enumerate(manifest["methods"]):
            target = directory / f"method-{index}.pt2"
            with zf.open(f"methods/{name}.pt2") as src, target.open("wb") as dst:
                while chunk := src.read(1024 * 1024):
                    dst.write(chunk)
            out[str(name)] = target
    return out
