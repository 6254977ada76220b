"""The runtime pool against real ExecuTorch: numerics, metadata, integrity, profiling, LRU."""

from __future__ import annotations

import hashlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

from pteforge.runtime import (
    ArtifactIntegrityError,
    InvalidInputError,
    RuntimePool,
    UnknownMethodError,
    WorkerCrashedError,
    describe_pte,
)
from pteforge.runtime.kernel_guards import check_inputs, kernel_guards
from pteforge.runtime.lru import ByteLRU
from pteforge.runtime.metadata import TensorSpec
from tests.models import INT8_XNNPACK, attention_pool_programs
from tests.runtime.helpers import Compiled
from tests.runtime.mutations import crashing_flips, flip


def _eager(compiled: Compiled, method: str) -> np.ndarray:
    with torch.no_grad():
        out = compiled.model.eager[method](*compiled.model.inputs[method])
    return out.numpy()


def _inputs(compiled: Compiled, method: str) -> list[np.ndarray]:
    return [t.numpy() for t in compiled.model.inputs[method]]


CASES = [("mlp", "forward"), ("seq2seq", "encode"), ("seq2seq", "decode"), ("shared", "decode")]


@pytest.mark.parametrize(("name", "method"), CASES)
def test_outputs_match_eager(
    pool: RuntimePool, artifacts: dict[str, Compiled], name: str, method: str
) -> None:
    compiled = artifacts[name]
    result = pool.infer(compiled.sha256, method, _inputs(compiled, method), compiled.path)
    np.testing.assert_allclose(result.outputs[0], _eager(compiled, method), rtol=1e-4, atol=1e-4)
    assert set(result.timings) == {"queue_ms", "load_ms", "execute_ms", "total_ms"}


def test_metadata_in_process_and_in_worker_agree(
    pool: RuntimePool, artifacts: dict[str, Compiled]
) -> None:
    compiled = artifacts["seq2seq"]
    local = describe_pte(compiled.path)
    assert local == pool.describe(compiled.sha256, compiled.path)
    decode = local["decode"]
    assert [(s.name, s.datatype, s.shape) for s in decode.inputs] == [
        ("input_0", "INT64", (1, 4)),
        ("input_1", "FP32", (1, 8, 32)),
    ]
    assert [(s.datatype, s.shape) for s in decode.outputs] == [("FP32", (1, 4, 64))]


def test_unknown_method(pool: RuntimePool, artifacts: dict[str, Compiled]) -> None:
    compiled = artifacts["mlp"]
    with pytest.raises(UnknownMethodError, match="'backward'"):
        pool.method_metadata(compiled.sha256, "backward", compiled.path)


def test_sha256_mismatch_is_refused_before_loading(
    artifacts: dict[str, Compiled], tmp_path: Path
) -> None:
    original = artifacts["mlp"]
    data = original.path.read_bytes()
    crashing = tmp_path / "crashing.pte"
    crashing.write_bytes(flip(data, *crashing_flips(data, 1)[0]))
    x = _inputs(original, "forward")
    with RuntimePool(1, 1 << 20, tmp_path / "cache") as fresh:
        with pytest.raises(ArtifactIntegrityError, match="refusing to load"):
            fresh.infer(original.sha256, "forward", x, crashing)
        assert fresh.stats.worker_crashes == 0
        # the same bytes under their true hash are loaded, and do crash the worker
        true_sha = hashlib.sha256(crashing.read_bytes()).hexdigest()
        with pytest.raises(WorkerCrashedError):
            fresh.infer(true_sha, "forward", x, crashing)


def test_materialized_artifacts_are_written_once(
    pool: RuntimePool, artifacts: dict[str, Compiled], tmp_path: Path
) -> None:
    compiled = artifacts["mlp"]
    calls = []

    def materialize(dest: Path) -> None:
        calls.append(dest)
        dest.write_bytes(compiled.path.read_bytes())

    fresh = RuntimePool(1, 1 << 20, tmp_path / "cache")
    with fresh:
        for _ in range(3):
            fresh.infer(compiled.sha256, "forward", _inputs(compiled, "forward"), materialize)
    assert len(calls) == 1
    assert (
        tmp_path / "cache" / f"{compiled.sha256}.pte"
    ).read_bytes() == compiled.path.read_bytes()


def test_profile_mode_reports_delegate_times(
    pool: RuntimePool, artifacts: dict[str, Compiled]
) -> None:
    compiled = artifacts["seq2seq"]
    result = pool.infer(
        compiled.sha256, "encode", _inputs(compiled, "encode"), compiled.path, profile=True
    )
    assert result.profile is not None
    assert result.profile["delegate_calls"], result.profile
    assert any("Fully Connected" in d["name"] for d in result.profile["delegates"])
    assert any(op["name"].startswith("embedding") for op in result.profile["operators"])
    np.testing.assert_allclose(result.outputs[0], _eager(compiled, "encode"), rtol=1e-4, atol=1e-4)


def test_byte_lru_evicts_least_recently_used() -> None:
    evicted: list[str] = []
    lru: ByteLRU[str, int] = ByteLRU(100, on_evict=lambda k, v: evicted.append(k))
    lru.put("a", 1, 40)
    lru.put("b", 2, 40)
    assert lru.get("a") == 1  # b is now the least recently used
    lru.put("c", 3, 40)
    assert evicted == ["b"] and lru.keys() == ["a", "c"] and lru.total_bytes == 80
    lru.put("huge", 4, 500)  # an oversized entry alone is still kept
    assert lru.keys() == ["huge"]


def test_worker_cache_is_bounded_by_bytes(artifacts: dict[str, Compiled], tmp_path: Path) -> None:
    mlp, s2s = artifacts["mlp"], artifacts["seq2seq"]
    capacity = s2s.path.stat().st_size + mlp.path.stat().st_size // 2  # one program at a time
    with RuntimePool(1, capacity, tmp_path) as single:
        hits = []
        for compiled, method in [(mlp, "forward"), (mlp, "forward"), (s2s, "encode"),
                                 (s2s, "encode"), (mlp, "forward")]:  # fmt: skip
            result = single.infer(compiled.sha256, method, _inputs(compiled, method), compiled.path)
            hits.append(result.cache_hit)
    # describe() loads the program first, so its first infer is already a hit
    assert hits == [True, True, True, True, False]


def test_dynamic_dimensions(pool: RuntimePool, artifacts: dict[str, Compiled]) -> None:
    compiled = artifacts["dynamic"]
    signature = pool.method_metadata(compiled.sha256, "forward", compiled.path)
    assert signature.inputs[0].shape == (-1, -1)
    assert signature.inputs[0].max_shape == (8, 16)
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    result = pool.infer(compiled.sha256, "forward", [x], compiled.path)
    with torch.no_grad():
        expected = compiled.model.eager["forward"](torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(result.outputs[0], expected, rtol=1e-4, atol=1e-4)
    too_big = np.zeros((9, 16), np.float32)
    with pytest.raises(InvalidInputError, match=r"input 'input_0': expected a shape within"):
        pool.infer(compiled.sha256, "forward", [too_big], compiled.path)


@pytest.fixture(scope="module")
def attention_pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """An int8 program whose partitioner left dynamic quantization to the portable kernels
    (``tests.models.AttentionPool``): its path and digest."""
    from pteforge.backends import default_catalog
    from pteforge.manager import compile_programs

    pte = compile_programs(attention_pool_programs().programs, INT8_XNNPACK, default_catalog()).pte
    path = tmp_path_factory.mktemp("int8") / "attention-pool.pte"
    path.write_bytes(pte)
    return path, hashlib.sha256(pte).hexdigest()


def test_portable_quantize_kernels_run_in_a_worker(
    pool: RuntimePool, attention_pool: tuple[Path, str]
) -> None:
    """The confined worker has their kernels (upstream's quantized ops library, preloaded):
    it failed to load the method with OperatorMissing."""
    path, sha256 = attention_pool
    model = attention_pool_programs()
    (tokens,) = model.inputs["forward"]
    result = pool.infer(sha256, "forward", [tokens.numpy()], path)
    expected = model.eager["forward"](tokens).detach().numpy()
    assert np.abs(result.outputs[0] - expected).max() <= 0.05 * np.abs(expected).max()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_nan_for_dynamic_quantization_is_refused_not_a_crash(
    pool: RuntimePool, attention_pool: tuple[Path, str], value: float
) -> None:
    """Upstream's portable choose_qparams aborts the worker (SIGABRT, its sessions lost, the
    request retried on a second worker) on a NaN scale: such inputs get a 400 first."""
    path, sha256 = attention_pool
    hostile = np.full((1, 8, 16), value, np.float32)
    with pytest.raises(InvalidInputError, match="input 'input_0': NaN or infinity refused"):
        pool.infer(sha256, "forward", [hostile], path)
    tokens = attention_pool_programs().inputs["forward"][0].numpy()
    assert pool.infer(sha256, "forward", [tokens], path).outputs[0].shape == (1, 4)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_bf16_nan_for_dynamic_quantization_is_refused_too(
    attention_pool: tuple[Path, str], value: float
) -> None:
    """BF16 is no ``np.floating`` subtype: a bf16 NaN passed the check, and a method casting
    its bf16 input to float before quantizing aborted two workers on it over ``/v2``."""
    guards = kernel_guards(attention_pool[0])
    spec = TensorSpec("tokens", "bfloat16", (1, 8, 16))
    hostile = np.full((1, 8, 16), value, ml_dtypes.bfloat16)
    with pytest.raises(InvalidInputError, match="input 'tokens': NaN or infinity refused"):
        check_inputs(guards, "forward", [spec], [hostile])
