"""``.pte`` uploads: verified and loaded only in a disposable worker, digests checked first."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pteforge.server.sandbox import (
    InvalidPteError,
    Isolation,
    ProcessLimits,
    PteDescription,
    SubprocessIsolation,
    UploadRejectedError,
    read_verified,
    sha256_file,
    validate_pte_isolated,
)
from tests.models import small_mlp_programs
from tests.program_data import SeparatedProgram

from .conftest import ValidArchives

MUTATION_SEEDS = (10, 161, 5, 1)  # crash, crash, loads, rejected
# The fixture's .pte as torch 2.13 / executorch 1.5.1 build it; for these bytes seeds 10 and 161
# make the runtime abort (SIGABRT) even with InternalConsistency verification.
KNOWN_PTE_SHA256 = "d8b516fd35e2813c73fc926500b10c80329e45bf9d281ddde3da8cba6c50a54e"


def test_valid_pte_is_described(mlp_pte: Path, isolation: Isolation) -> None:
    description = validate_pte_isolated(mlp_pte, sha256_file(mlp_pte), isolation=isolation)
    assert description.method_names == ("forward",)
    [method] = description.methods
    assert [(t.dtype, t.shape) for t in method.inputs] == [("float32", (1, 16))]
    assert [(t.dtype, t.shape) for t in method.outputs] == [("float32", (1, 4))]
    assert description.size_bytes == mlp_pte.stat().st_size


class _MustNotLoad:
    def run(self, module: str, args: list[str], limits: ProcessLimits) -> dict[str, Any]:
        raise AssertionError("loaded before the digest was checked")


def test_sha_mismatch_is_rejected_before_loading(mlp_pte: Path) -> None:
    with pytest.raises(InvalidPteError) as info:
        validate_pte_isolated(mlp_pte, "0" * 64, isolation=_MustNotLoad())
    assert info.value.reason == "sha256_mismatch"


def test_read_verified_checks_the_bytes_it_returns(mlp_pte: Path) -> None:
    assert read_verified(mlp_pte, sha256_file(mlp_pte)) == mlp_pte.read_bytes()
    with pytest.raises(UploadRejectedError):
        read_verified(mlp_pte, "f" * 64)


def test_a_method_name_the_rule_refuses_is_rejected(
    mlp_pte: Path, tmp_path: Path, isolation: Isolation
) -> None:
    """Only programs' method names were checked: a .pte whose method is named
    'f ESC ]0;X BEL' (a terminal's set-title sequence) was stored and listed as it is, and
    became /v2 model names (attack pass, item 4)."""
    data = mlp_pte.read_bytes()
    assert data.count(b"forward") == 1  # a flatbuffer string: same length, same layout
    hostile = tmp_path / "hostile.pte"
    hostile.write_bytes(data.replace(b"forward", b"f\x1b]0;X\x07"))
    with pytest.raises(InvalidPteError) as refused:
        validate_pte_isolated(hostile, isolation=isolation)
    assert refused.value.reason == "invalid_pte"
    assert str(refused.value.message).startswith("invalid method name 'f\\x1b]0;X\\x07': a ")


def test_truncated_pte_is_rejected(mlp_pte: Path, tmp_path: Path) -> None:
    data = mlp_pte.read_bytes()
    bad = tmp_path / "t.pte"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(InvalidPteError) as info:
        validate_pte_isolated(bad)
    assert info.value.reason == "invalid_pte"
    assert f"header says {len(data)} bytes, it has {len(data) // 2}" in str(info.value)


def test_not_a_pte_is_rejected_without_a_worker(tmp_path: Path) -> None:
    bad = tmp_path / "x.pte"
    bad.write_bytes(b"hello world, not a program")
    with pytest.raises(InvalidPteError, match="ET12") as info:
        validate_pte_isolated(bad)
    assert "zip" not in str(info.value)


def test_a_pt2_sent_as_a_pte_is_pointed_to_the_programs_route(
    valid_archives: ValidArchives,
) -> None:
    with pytest.raises(InvalidPteError) as info:
        validate_pte_isolated(valid_archives.single, isolation=_MustNotLoad())
    assert "a torch.export .pt2 program is: upload a program (POST /v1/programs" in str(info.value)


def test_a_pte_whose_weights_are_in_a_ptd_file_says_so(
    tmp_path: Path, isolation: Isolation
) -> None:
    """ExecuTorch's program-data separation puts a program's constants in a ``.ptd`` file
    beside it: the upload answered only "Failed to load method forward, error: 0x02"."""
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    exported = small_mlp_programs().programs
    config = ExecutorchBackendConfig(external_constants=True)
    path = tmp_path / "external.pte"
    path.write_bytes(to_edge_transform_and_lower(exported).to_executorch(config).buffer)
    with pytest.raises(InvalidPteError) as info:
        validate_pte_isolated(path, isolation=isolation)
    message = str(info.value)
    assert "keeps its constants in a separate .ptd file" in message
    assert "send that file with it, as the upload's 'ptd' part" in message
    assert "runtime log:" in message and "external_data_map is null" in message


def test_bit_flips_never_take_the_caller_down(
    mlp_pte: Path, tmp_path: Path, isolation: Isolation
) -> None:
    """Random mutations either verify or are rejected; crashes stay in the worker."""
    data = mlp_pte.read_bytes()
    paths = [_mutate(data, seed, tmp_path / f"m{seed}.pte") for seed in MUTATION_SEEDS]
    with ThreadPoolExecutor(max_workers=2) as pool:  # also shows concurrent callers are safe
        outcomes = list(pool.map(lambda path: _outcome(path, isolation), paths))
    assert len(outcomes) == len(MUTATION_SEEDS)
    assert any(o != "loaded" for o in outcomes)
    if sha256_file(mlp_pte) == KNOWN_PTE_SHA256:
        assert outcomes[:2] == ["worker_crashed", "worker_crashed"]


def _mutate(data: bytes, seed: int, path: Path) -> Path:
    rng = random.Random(seed)
    mutated = bytearray(data)
    for _ in range(4):
        i = rng.randrange(len(mutated))
        mutated[i] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(mutated))
    return path


def _outcome(path: Path, isolation: Isolation) -> str:
    try:
        assert isinstance(validate_pte_isolated(path, isolation=isolation), PteDescription)
        return "loaded"
    except InvalidPteError as e:
        assert e.reason == "invalid_pte"
        return e.message.split(":", 1)[0]  # the worker's reason, e.g. worker_crashed


def test_a_dynamic_dimension_is_described_as_the_runtime_does(
    tmp_path: Path, isolation: Isolation
) -> None:
    """An uploaded ``.pte`` exported with ``Dim("batch", max=4)`` was stored as taking only
    batches of 4 (its planned bound as its shape), while ``/v2`` took 1 to 4: a profile job
    on a batch of 1 was refused 'expected shape [4, 16], got [1, 16]'. The server's sandbox
    children fork from a fork server that preloads the flatbuffer reader; a fresh confined
    interpreter cannot load it and describes the planned bound, as before."""
    import torch
    from executorch.exir import to_edge

    batch = torch.export.Dim("batch", min=1, max=4)
    linear = torch.nn.Linear(16, 2)
    program = torch.export.export(linear, (torch.ones(2, 16),), dynamic_shapes=({0: batch},))
    path = tmp_path / "dynamic.pte"
    path.write_bytes(to_edge(program).to_executorch().buffer)
    description = validate_pte_isolated(path, sha256_file(path), isolation=isolation)
    [method] = description.methods
    [given], [answered] = method.inputs, method.outputs
    if isinstance(isolation, SubprocessIsolation):
        assert (given.shape, given.max_shape) == ((4, 16), None)
        return
    assert (given.shape, given.max_shape) == ((-1, -1), (4, 16))
    assert (answered.shape, answered.max_shape) == ((-1, -1), (4, 2))


@pytest.fixture(scope="module")
def separated(tmp_path_factory: pytest.TempPathFactory) -> tuple[SeparatedProgram, Path]:
    """A two-method program with its constants in a .ptd, and another architecture's .ptd."""
    from tests.program_data import separated_program

    root = tmp_path_factory.mktemp("ptd")
    other = separated_program(root / "other", seed=1, features=6)
    return separated_program(root / "first", seed=0), other.ptd


def test_a_pte_loads_with_its_ptd(
    separated: tuple[SeparatedProgram, Path], isolation: Isolation
) -> None:
    program, _ = separated
    description = validate_pte_isolated(program.pte, isolation=isolation, data=program.ptd)
    assert description.method_names == ("decode", "encode")


@pytest.mark.parametrize("isolation", ["forkserver"], indirect=True)  # as served
def test_a_ptd_that_does_not_fit_is_named(
    separated: tuple[SeparatedProgram, Path], isolation: Isolation, tmp_path: Path
) -> None:
    """Another architecture's .ptd, a cut one, and a file that is no .ptd at all."""
    program, other = separated
    cut = tmp_path / "cut.ptd"
    cut.write_bytes(program.ptd.read_bytes()[:-40])
    for wrong in (other, cut):
        with pytest.raises(InvalidPteError) as info:
            validate_pte_isolated(program.pte, isolation=isolation, data=wrong)
        assert info.value.reason == "invalid_ptd"
        assert "the .pte does not load with the .ptd (part 'ptd') sent with it" in str(info.value)
        assert "runtime log:" in str(info.value)
    with pytest.raises(InvalidPteError) as info:
        validate_pte_isolated(program.pte, isolation=isolation, data=program.pte)
    assert "is not an ExecuTorch data file (no FT01 identifier)" in str(info.value)


@pytest.mark.parametrize("isolation", ["forkserver"], indirect=True)  # as served
def test_a_ptd_sent_with_a_self_contained_pte_is_taken(
    separated: tuple[SeparatedProgram, Path], mlp_pte: Path, isolation: Isolation
) -> None:
    """Whether a program needs data cannot be probed safely (an XNNPACK program loaded
    without its external weights crashes the runtime): a .ptd it loads with is taken."""
    program, _ = separated
    description = validate_pte_isolated(mlp_pte, isolation=isolation, data=program.ptd)
    assert description.method_names == ("forward",)


@pytest.mark.parametrize("isolation", ["forkserver"], indirect=True)  # as served
def test_xnnpack_external_weights_load_with_their_ptd(tmp_path: Path, isolation: Isolation) -> None:
    """Without its .ptd such a program crashes ExecuTorch 1.5.1's loader (in the child):
    the refusal says what may be missing."""
    from tests.program_data import separated_program

    program = separated_program(tmp_path, seed=0, xnnpack=True)
    description = validate_pte_isolated(program.pte, isolation=isolation, data=program.ptd)
    assert description.method_names == ("decode", "encode")
    with pytest.raises(InvalidPteError) as info:
        validate_pte_isolated(program.pte, isolation=isolation)
    assert "send that file with it, as the upload's 'ptd' part (`pteforge deploy" in str(info.value)
