"""What a file that should be a ``torch.export`` ``.pt2`` archive is instead, told by the
names of its zip entries alone (nothing is read): the service's upload check and the local
``pteforge compile`` both name the save call that was used and the one to use."""

from __future__ import annotations

from collections.abc import Iterable

SAVE_CALL = "torch.export.save(torch.export.export(model, example_args), 'model.pt2')"
"""How a program is saved as the ``.pt2`` archive pteforge takes."""

_OTHER_FORMATS: tuple[tuple[str, str], ...] = (
    (
        "serialized_exported_program.json",
        "a torch.export archive in the format of older torch releases "
        "(serialized_exported_program.json), not a pt2 archive",
    ),
    ("constants.pkl", "a TorchScript archive (torch.jit.save), not a torch.export program"),
    ("data.pkl", "a torch.save pickle (a module or a state_dict), not a torch.export program"),
)


def other_format(names: Iterable[str], older_export: bool = True) -> str | None:
    """``the file is ...`` for a zip whose entries (as listed, or below its root folder) are
    another torch save format's and not a pt2 archive's; None when they are not recognized.
    ``older_export=False`` lets the older ``torch.export.save`` layout pass: the service takes
    pt2 archives only, while ``torch.export.load`` still reads that layout."""
    listed = set(names)
    entries = listed | {name.split("/", 1)[-1] for name in listed}
    if "archive_format" in entries:
        return None
    formats = _OTHER_FORMATS if older_export else _OTHER_FORMATS[1:]
    what = next((what for entry, what in formats if entry in entries), None)
    return None if what is None else f"the file is {what}"
