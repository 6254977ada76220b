"""Real archives written by torch pass the validator and describe the right methods."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pteforge.server.sandbox import (
    ArchiveLimits,
    UnsafeArchiveError,
    load_programs_isolated,
    load_validated_programs,
    validate_pt2_archive,
)
from pteforge.server.sandbox import pt2_format as fmt
from pteforge.server.sandbox.pt2_loader import exported_method_spec

from .conftest import ValidArchives


def test_single_program_archive(valid_archives: ValidArchives) -> None:
    manifest = validate_pt2_archive(valid_archives.single)
    assert manifest.method_names == ("model",)
    [method] = manifest.methods
    assert [(t.dtype, t.shape) for t in method.inputs] == [("float32", (1, 16))]
    assert [(t.dtype, t.shape) for t in method.outputs] == [("float32", (1, 4))]
    assert manifest.payload_bytes == sum(
        p.numel() * p.element_size()
        for p in valid_archives.single_source.programs["forward"].state_dict.values()
    )


def test_multi_program_archive(valid_archives: ValidArchives) -> None:
    manifest = validate_pt2_archive(valid_archives.multi)
    source = valid_archives.multi_source.programs
    assert manifest.method_names == tuple(sorted(source))
    for method in manifest.methods:
        assert method == exported_method_spec(method.name, source[method.name])


def test_dynamic_dims_are_minus_one(valid_archives: ValidArchives) -> None:
    [method] = validate_pt2_archive(valid_archives.dynamic).methods
    assert [t.shape for t in method.inputs] == [(-1, 3), (-1, 3)]
    assert method == exported_method_spec("model", valid_archives.dynamic_source)


class _Frames(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, 4:] * 2


def test_a_derived_dimension_has_its_range_read_alike(tmp_path: Path) -> None:
    """A derived Dim (4 * n - 4 samples) had no range, so /v2 ran sizes outside it (a
    Moonshine encoder crashed XNNPACK at 200 samples): both readings now give its range."""
    n = torch.export.Dim("n", min=2, max=64)
    program = torch.export.export(
        _Frames(), (torch.randn(1, 32),), dynamic_shapes=({1: 4 * n - 4},)
    )
    torch.export.save(program, tmp_path / "frames.pt2")
    [method] = validate_pt2_archive(tmp_path / "frames.pt2").methods
    [dim] = method.inputs[0].dynamic_dims or ()
    assert (dim.axis, dim.min, dim.max, dim.symbol.endswith(" - 4")) == (1, 4, 252, True)
    assert method == exported_method_spec("model", program)


@pytest.mark.parametrize(
    "expr",
    [
        "Add(" * 40 + "Integer(1)" + ")" * 40,  # deeper than the reader goes
        "Add(Integer(1), __import__('os'))",
        "Add(Integer(1), Integer(2)",  # unclosed
        "Pow(Symbol('s0'), Integer(2))",  # not a form a derived Dim takes
    ],
)
def test_an_expression_the_reader_does_not_take_is_no_dimension(expr: str) -> None:
    from pteforge.server.sandbox.pt2_exprs import derived_dimension

    assert derived_dimension(expr, {"3": {}, "s0**2": {}}) is None


def test_isolated_load_matches_in_process_export(valid_archives: ValidArchives) -> None:
    described = load_programs_isolated(valid_archives.multi)
    source = valid_archives.multi_source
    assert described.methods == tuple(
        exported_method_spec(name, ep) for name, ep in sorted(source.programs.items())
    )


def test_isolated_load_of_dynamic_program(valid_archives: ValidArchives) -> None:
    described = load_programs_isolated(valid_archives.dynamic)
    assert described.methods == (exported_method_spec("model", valid_archives.dynamic_source),)
    assert described.to_json()["methods"][0]["inputs"][0]["shape"] == [-1, 3]


def test_layout_constants_match_torch() -> None:
    """Our torch-free restatement of the archive layout must agree with torch's own constants."""
    from torch.export.pt2_archive import constants as c

    for name in (
        "ARCHIVE_FORMAT_PATH", "ARCHIVE_FORMAT_VALUE", "ARCHIVE_VERSION_PATH",
        "ARCHIVE_VERSION_VALUE", "MODELS_FILENAME_FORMAT", "WEIGHTS_DIR", "CONSTANTS_DIR",
        "WEIGHTS_CONFIG_FILENAME_FORMAT", "CONSTANTS_CONFIG_FILENAME_FORMAT",
        "SAMPLE_INPUTS_FILENAME_FORMAT", "WEIGHT_FILENAME_PREFIX",
        "TENSOR_CONSTANT_FILENAME_PREFIX", "CUSTOM_OBJ_FILENAME_PREFIX",
        "OPAQUE_OBJ_FILENAME_PREFIX", "AOTINDUCTOR_DIR",
    ):  # fmt: skip
        assert getattr(fmt, name) == getattr(c, name), name


def test_scalar_type_table_matches_torch() -> None:
    from torch._export.serde.schema import ScalarType
    from torch._export.serde.serialize import _SERIALIZE_TO_TORCH_DTYPE

    for code, (name, size) in fmt.SCALAR_TYPES.items():
        dtype = _SERIALIZE_TO_TORCH_DTYPE[ScalarType(code)]
        assert (str(dtype).removeprefix("torch."), dtype.itemsize) == (name, size)


def test_method_count_limit(valid_archives: ValidArchives) -> None:
    with pytest.raises(UnsafeArchiveError) as info:
        validate_pt2_archive(valid_archives.multi, ArchiveLimits(max_methods=1))
    assert info.value.reason == "too_many_methods"


def test_validator_does_not_import_torch_code_paths() -> None:
    """The validator module graph is torch-free (it must run before torch touches a file)."""
    import subprocess
    import sys

    code = (
        "import sys, pteforge.server; before = set(sys.modules); "
        "import pteforge.server.sandbox; added = set(sys.modules) - before; "
        "bad = {m for m in added if m.split('.')[0] in ('torch', 'fastapi', 'starlette')}; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert torch.__version__.startswith("2.13")


def test_loaded_programs_match_eager(valid_archives: ValidArchives) -> None:
    """What the compile worker gets from load_validated_programs computes what eager does."""
    programs = load_validated_programs(valid_archives.multi)
    source = valid_archives.multi_source
    assert set(programs) == set(source.programs)
    for name, ep in programs.items():
        inputs = source.inputs[name]
        torch.testing.assert_close(ep.module()(*inputs), source.eager[name](*inputs))


class _MaskedScores(torch.nn.Module):
    """What attention with a padding mask exports (``nn.MultiheadAttention``'s
    ``key_padding_mask``, DETR): ``masked_fill`` with ``-inf``, which torch writes as the
    string ``"-Infinity"`` (``"Infinity"``, ``"NaN"`` likewise) where a float belongs."""

    def forward(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        low = scores.masked_fill(mask, float("-inf")).softmax(-1)
        return low.masked_fill(mask, float("nan")).clamp(max=float("inf"))


def test_non_finite_float_arguments_are_accepted(tmp_path: Path) -> None:
    inputs = (torch.randn(1, 3), torch.tensor([[False, False, True]]))
    torch.export.save(torch.export.export(_MaskedScores(), inputs), tmp_path / "masked.pt2")
    [method] = validate_pt2_archive(tmp_path / "masked.pt2").methods
    assert [t.dtype for t in method.inputs] == ["float32", "bool"]
    loaded = load_validated_programs(tmp_path / "masked.pt2")["model"]
    torch.testing.assert_close(loaded.module()(*inputs), _MaskedScores()(*inputs), equal_nan=True)
