"""Mutable buffers: shared across methods on request, initial values kept, state never leaks."""

from __future__ import annotations

import pytest
import torch
from executorch.runtime import Runtime
from torch import nn

from pteforge.backends import BackendCatalog, default_catalog
from pteforge.manager import compile_programs, verify_numerics
from tests.models import MultiMethod, export_methods


class CachedProjection(nn.Module):
    """``prefill`` writes a cache buffer, ``decode`` reads it (a KV cache in miniature)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.register_buffer("cache", torch.full((2, 8), 0.5))

    def prefill(self, x: torch.Tensor) -> torch.Tensor:
        self.cache.copy_(self.proj(x))
        return x * 2

    def decode(self, y: torch.Tensor) -> torch.Tensor:
        return self.proj(self.cache) + y  # type: ignore[no-any-return]


class Counter(nn.Module):
    """Adds one to a buffer that starts at 5 and returns ``x + n``."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("n", torch.full((1,), 5.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.n.add_(1)
        return x + self.n


@pytest.fixture(scope="module")
def catalog() -> BackendCatalog:
    return default_catalog()


@pytest.fixture(scope="module")
def cached() -> MultiMethod:
    torch.manual_seed(0)
    return export_methods(
        CachedProjection(), {"prefill": (torch.randn(2, 8),), "decode": (torch.randn(2, 8),)}
    )


def _eager_prefill_then_decode(model: MultiMethod) -> torch.Tensor:
    eager = CachedProjection()
    eager.load_state_dict(model.eager["prefill"].model.state_dict())
    with torch.no_grad():
        eager.prefill(*model.inputs["prefill"])
        return eager.decode(*model.inputs["decode"])  # type: ignore[no-any-return]


def _runtime_prefill_then_decode(pte: bytes, model: MultiMethod) -> torch.Tensor:
    """Both methods of one loaded program: every method is loaded before any runs, since
    loading a method writes the buffers' initial values."""
    program = Runtime.get().load_program(pte)
    prefill, decode = program.load_method("prefill"), program.load_method("decode")
    prefill.execute(list(model.inputs["prefill"]))
    return decode.execute(list(model.inputs["decode"]))[0]  # type: ignore[no-any-return]


@pytest.mark.parametrize("target", [{}, {"partitioners": ["xnnpack"]}], ids=["portable", "xnnpack"])
def test_shared_buffers_let_decode_read_what_prefill_wrote(
    cached: MultiMethod, catalog: BackendCatalog, target: dict[str, object]
) -> None:
    want = _eager_prefill_then_decode(cached)
    plan = {"all": target, "share_mutable_buffers": True}
    for _ in range(2):  # a second job in the same process plans its own arena
        compiled = compile_programs(cached.programs, plan, catalog)
        got = _runtime_prefill_then_decode(compiled.pte, cached)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_without_sharing_each_method_has_its_own_buffer(
    cached: MultiMethod, catalog: BackendCatalog
) -> None:
    compiled = compile_programs(cached.programs, {}, catalog)
    got = _runtime_prefill_then_decode(compiled.pte, cached)
    assert not torch.allclose(got, _eager_prefill_then_decode(cached), atol=1e-3)
    with torch.no_grad():  # decode saw the cache's initial value, not prefill's write
        expected = cached.eager["decode"](*cached.inputs["decode"])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_a_buffer_starts_from_its_initial_value(catalog: BackendCatalog) -> None:
    model = export_methods(Counter(), {"forward": (torch.zeros(1),)})
    compiled = compile_programs(model.programs, {}, catalog)
    method = Runtime.get().load_program(compiled.pte).load_method("forward")
    assert [float(method.execute([torch.zeros(1)])[0]) for _ in range(2)] == [6.0, 7.0]


def test_verify_runs_stateful_methods_from_the_initial_state(
    cached: MultiMethod, catalog: BackendCatalog
) -> None:
    before = {k: v.clone() for k, v in cached.programs["prefill"].state_dict.items()}
    compiled = compile_programs(cached.programs, {"share_mutable_buffers": True}, catalog)
    numerics = verify_numerics(cached.programs, compiled)
    assert numerics["status"] == "passed", numerics
    after = cached.programs["prefill"].state_dict
    assert all(torch.equal(before[k], after[k]) for k in before)  # the caller's program
