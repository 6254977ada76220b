"""One hostile archive per code-executing path of torch 2.13's pt2 loader.

Each is rejected by the static validator with a reason naming the path, before any torch code
reads it, and its marker file is never created.  ``test_payloads_are_real_exploits`` shows the
same archives DO run their payload in an unprotected ``torch.export.load``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from pteforge.server.sandbox import (
    ArchiveLimits,
    IsolatedLoadError,
    ProcessLimits,
    UnsafeArchiveError,
    UploadRejectedError,
    UploadTooLargeError,
    load_programs_isolated,
    validate_pt2_archive,
)
from pteforge.server.sandbox.isolation import Isolation
from pteforge.server.sandbox.pt2_validator import check_pt2_container

from . import archives as A
from .conftest import ValidArchives

REPO_ROOT = Path(__file__).resolve().parents[2]

# name -> (which valid archive to start from, payload edit, expected reason, entry named)
MARKER_CASES: dict[str, tuple[str, Callable[[Path], Callable[[A.Entries], None]], str, str]] = {
    "use_pickle_weight": ("single", A.pickled_weight, "pickle_payload", "weights_config.json"),
    "opaque_obj_constant": ("single", A.opaque_constant, "custom_object", "opaque_obj_0"),
    "pickled_constant": ("single", A.opaque_constant_config_only, "pickle_payload", "[evil]"),
    "pickled_sample_inputs": ("single", A.pickled_sample_inputs, "pickle_payload", "sample_inputs"),
    "sympy_expr_str": ("dynamic", A.sympy_expression, "unsafe_expression", "models/model.json"),
    "guards_code": ("dynamic", A.guard_code, "unsafe_guard_code", "models/model.json"),
    "legacy_pickled_weights": ("single", A.legacy_pickled_weights, "pickle_payload", "model.pt"),
}
# these reach attacker code in torch.export.load / ep.module() without the validator
EXPLOITS_WITHOUT_VALIDATOR = (
    "use_pickle_weight",
    "opaque_obj_constant",
    "pickled_sample_inputs",
    "sympy_expr_str",
    "guards_code",
    "legacy_pickled_weights",
)


def _hostile(valid: ValidArchives, case: str, directory: Path) -> tuple[Path, Path]:
    source, payload, _, _ = MARKER_CASES[case]
    marker = directory / f"{case}.marker"
    path = A.edit_archive(getattr(valid, source), directory / f"{case}.pt2", payload(marker))
    return path, marker


@pytest.mark.parametrize("case", sorted(MARKER_CASES))
def test_code_paths_are_rejected_and_never_run(
    case: str, valid_archives: ValidArchives, tmp_path: Path
) -> None:
    path, marker = _hostile(valid_archives, case, tmp_path)
    _, _, reason, entry = MARKER_CASES[case]
    with pytest.raises(UnsafeArchiveError) as info:
        validate_pt2_archive(path)
    assert info.value.reason == reason
    assert entry in info.value.message
    assert 400 <= info.value.http_status < 500
    with pytest.raises(UploadRejectedError) as isolated:
        load_programs_isolated(path)  # the child validates before it loads
    assert isolated.value.reason == reason
    assert not marker.exists()


def test_worker_revalidates_what_it_is_given(
    valid_archives: ValidArchives, tmp_path: Path, isolation: Isolation
) -> None:
    """Handing a hostile file straight to the loader worker still never runs its payload."""
    path, marker = _hostile(valid_archives, "pickled_sample_inputs", tmp_path)
    with pytest.raises(IsolatedLoadError) as info:
        isolation.run("pteforge.server.sandbox.pt2_worker", [str(path)], ProcessLimits())
    assert info.value.reason == "pickle_payload"
    assert not marker.exists()


def test_payloads_are_real_exploits(valid_archives: ValidArchives, tmp_path: Path) -> None:
    """Without the validator, unprotected torch.export.load runs every one of these payloads."""
    built = {case: _hostile(valid_archives, case, tmp_path) for case in EXPLOITS_WITHOUT_VALIDATOR}
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_WEIGHTS_ONLY_LOAD"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    paths = [str(path) for path, _ in built.values()]
    subprocess.run(
        [sys.executable, "-m", "tests.sandbox.proof_loader", *paths],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=300,
        check=False,
    )
    ran = {case for case, (_, marker) in built.items() if marker.exists()}
    assert ran == set(EXPLOITS_WITHOUT_VALIDATOR)


STRUCTURAL_CASES: dict[str, tuple[Callable[[A.Entries], None], str]] = {
    "aoti_so_entry": (A.aoti_library, "native_code"),
    "custom_obj_value": (A.custom_object_value, "custom_object"),
    "foreign_operator": (A.operator_edit("torch.load"), "unsafe_operator"),
    "file_reading_aten_op": (
        A.operator_edit("torch.ops.aten.from_file.default"),
        "unsafe_operator",
    ),
    "extension_operator": (A.operator_edit("#evil:op"), "unsafe_operator"),
    "dunder_operator": (A.operator_edit("torch.ops.aten.__class__"), "unsafe_operator"),
    "huge_declared_tensor": (A.huge_declared_tensor, "declared_size_mismatch"),
}


@pytest.mark.parametrize("case", sorted(STRUCTURAL_CASES))
def test_structural_attacks_are_rejected(
    case: str, valid_archives: ValidArchives, tmp_path: Path
) -> None:
    edit, reason = STRUCTURAL_CASES[case]
    path = A.edit_archive(valid_archives.single, tmp_path / "a.pt2", edit)
    with pytest.raises(UnsafeArchiveError) as info:
        validate_pt2_archive(path)
    assert info.value.reason == reason


def test_huge_tensor_message_names_sizes(valid_archives: ValidArchives, tmp_path: Path) -> None:
    path = A.edit_archive(valid_archives.single, tmp_path / "a.pt2", A.huge_declared_tensor)
    assert path.stat().st_size < 64 * 1024
    expected = "declares 40000000000 bytes but its payload holds 0"
    with pytest.raises(UnsafeArchiveError, match=expected):
        validate_pt2_archive(path)


@pytest.mark.parametrize("bound", [1 << 63, -(1 << 70)])
def test_a_range_bound_past_64_bits_is_refused(
    bound: int, valid_archives: ValidArchives, tmp_path: Path
) -> None:
    """torch never writes one; a compile of it failed as an internal error (memory planning)."""
    edit = A.range_bounds({"min_val": min(bound, 2), "max_val": max(bound, 64)})
    path = A.edit_archive(valid_archives.dynamic, tmp_path / "a.pt2", edit)
    with pytest.raises(UnsafeArchiveError, match="does not fit in 64 bits") as info:
        validate_pt2_archive(path)
    assert info.value.reason == "invalid_program"
    assert "range_constraints" in str(info.value)


def test_zip_bomb_is_rejected(valid_archives: ValidArchives, tmp_path: Path) -> None:
    path = A.zip_bomb(tmp_path / "bomb.pt2", valid_archives.single)
    with pytest.raises(UploadTooLargeError) as info:
        validate_pt2_archive(path)
    assert info.value.reason == "zip_bomb"
    assert info.value.http_status == 413


def test_total_size_limit(valid_archives: ValidArchives) -> None:
    with pytest.raises(UploadTooLargeError) as info:
        validate_pt2_archive(valid_archives.single, ArchiveLimits(max_total_uncompressed=1000))
    assert info.value.reason == "archive_too_large"


def test_entry_count_limit(valid_archives: ValidArchives) -> None:
    with pytest.raises(UnsafeArchiveError) as info:
        validate_pt2_archive(valid_archives.single, ArchiveLimits(max_entries=5))
    assert info.value.reason == "too_many_entries"


def test_entries_are_counted_before_any_is_built(tmp_path: Path) -> None:
    """A directory of 200,000 tiny entries (whose end record says 1) is refused before a
    ``ZipInfo`` is made of each: ``zipfile.ZipFile`` took ~90 MiB (and seconds) for it in
    the server process, ~20 GiB for the 2 GiB an upload may be."""
    path = A.many_entries(tmp_path / "many.pt2", 200_000)
    tracemalloc.start()
    try:
        with pytest.raises(UnsafeArchiveError) as info:
            check_pt2_container(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.reason == "too_many_entries"
    assert peak < 8 * 1024**2, peak


TRICKY_NAMES = ["single/../../etc/cron.d/x", "/etc/passwd", "single/data\\..\\x", "other/m.json"]
# an entry added to a valid archive -> the reason the archive is rejected with
ADDED_ENTRIES = [
    *((name, "unsafe_entry_name") for name in TRICKY_NAMES),
    ("single/data/notes.txt", "unknown_entry"),
    ("single/archive_version", "duplicate_entry"),
]


@pytest.mark.parametrize(("name", "reason"), ADDED_ENTRIES)
def test_added_entries_are_rejected(
    name: str, reason: str, valid_archives: ValidArchives, tmp_path: Path
) -> None:
    """Path tricks, entries outside the format and a second copy of an entry."""
    path = A.traversal(tmp_path / "t.pt2", valid_archives.single, name)
    with pytest.raises(UnsafeArchiveError) as info:
        validate_pt2_archive(path)
    assert info.value.reason == reason
    assert reason != "unknown_entry" or name in info.value.message


@pytest.mark.parametrize("content", [b"", b"not a zip at all", b"PK\x03\x04" + b"\0" * 100])
def test_non_zip_is_rejected(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "x.pt2"
    path.write_bytes(content)
    with pytest.raises(UploadRejectedError) as info:
        validate_pt2_archive(path)
    assert info.value.reason == "not_a_zip"


def test_pte_uploaded_as_program_says_so(tmp_path: Path) -> None:
    """A user who sends the .pte they downloaded as a program learns where it belongs."""
    path = tmp_path / "model.pt2"
    path.write_bytes(b"<\x00\x00\x00ET12eh00" + b"\0" * 64)  # a .pte's first bytes
    with pytest.raises(UnsafeArchiveError) as info:
        validate_pt2_archive(path)
    assert info.value.reason == "not_a_zip"
    assert ".pte" in info.value.message and "/v1/artifacts" in info.value.message


def test_overlapping_entries_are_rejected(valid_archives: ValidArchives, tmp_path: Path) -> None:
    """Two central-directory records pointing at the same bytes (overlap zip-bomb trick)."""
    data = bytearray(valid_archives.single.read_bytes())
    central = data.rfind(b"PK\x05\x06")
    first_record = data.rfind(b"PK\x01\x02", 0, central)
    data[first_record + 42 : first_record + 46] = (0).to_bytes(4, "little")  # local header offset
    path = tmp_path / "overlap.pt2"
    path.write_bytes(bytes(data))
    with pytest.raises(UnsafeArchiveError) as info:
        validate_pt2_archive(path)
    assert info.value.reason == "unsafe_zip"
