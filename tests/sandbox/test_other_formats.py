"""Files saved with another torch call than ``torch.export.save`` are refused naming what they
are and the call to use, not as an "unknown entry" or an "unsafe" name."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from pteforge.server.sandbox import UnsafeArchiveError, validate_pt2_archive
from pteforge.server.sandbox.pt2_validator import check_pt2_container

from . import archives as A
from .conftest import ValidArchives


def _pickled_module(path: Path) -> None:
    torch.save(torch.nn.Linear(4, 2), path)


def _state_dict(path: Path) -> None:
    torch.save(torch.nn.Linear(4, 2).state_dict(), path)


def _torchscript(path: Path) -> None:
    torch.jit.save(torch.jit.script(torch.nn.Linear(4, 2)), str(path))


def _older_torch_export(path: Path) -> None:
    """The layout ``torch.export.save`` wrote before the pt2 archive: no root folder."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("serialized_exported_program.json", "{}")
        for name in ("state_dict", "constants", "example_inputs"):
            z.writestr(f"serialized_{name}.pt", b"")
        z.writestr("version", "8.1")


CASES: list[tuple[Callable[[Path], None], str]] = [
    (_pickled_module, "a torch.save pickle"),
    (_state_dict, "a torch.save pickle"),
    (_torchscript, "a TorchScript archive (torch.jit.save)"),
    (_older_torch_export, "a torch.export archive in the format of older torch releases"),
]


@pytest.mark.parametrize(("save", "what"), CASES, ids=[save.__name__ for save, _ in CASES])
def test_another_save_format_is_named(
    save: Callable[[Path], None], what: str, tmp_path: Path
) -> None:
    path = tmp_path / "model.pt2"
    save(path)
    for check in (check_pt2_container, validate_pt2_archive):
        with pytest.raises(UnsafeArchiveError) as info:
            check(path)
        assert info.value.reason == "invalid_program"
        assert f"the file is {what}" in info.value.message
        assert "torch.export.save(torch.export.export(model, example_args)" in info.value.message


def test_an_archive_of_another_version_says_so(
    valid_archives: ValidArchives, tmp_path: Path
) -> None:
    path = A.edit_archive(
        valid_archives.single,
        tmp_path / "v1.pt2",
        lambda entries: entries.update({"archive_version": b"1"}),
    )
    with pytest.raises(UnsafeArchiveError) as info:
        check_pt2_container(path)
    assert info.value.message.startswith(
        "archive_version: expected '0', found b'1': the archive was written by another torch "
        "release's torch.export.save; save it again"
    )


def test_a_safetensors_file_is_named(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    path = tmp_path / "model.pt2"
    save_file(torch.nn.Linear(4, 2).state_dict(), str(path))
    with pytest.raises(UnsafeArchiveError) as info:
        check_pt2_container(path)
    assert info.value.reason == "not_a_zip"
    assert "a safetensors file? it holds weights only" in info.value.message


def test_an_aotinductor_package_says_to_upload_the_export(
    valid_archives: ValidArchives, tmp_path: Path
) -> None:
    path = A.edit_archive(valid_archives.single, tmp_path / "aoti.pt2", A.aoti_library)
    with pytest.raises(UnsafeArchiveError) as info:
        check_pt2_container(path)
    assert info.value.reason == "native_code"
    assert "upload the torch.export.save archive of the program instead" in info.value.message
