"""Mutable buffers: shared across methods on request, initial values kept, state never leaks."""

from __future__ import annotations

import pytest
import torch
from executorch.runtime import Runtime
from torch import nn

from pteforge.backends import BackendCatalog
from pteforge.manager import compile_programs, verify_numerics
from tests.manager.stateful import (
    cached_programs,
    eager_prefill_then_decode,
    runtime_prefill_then_decode,
)
from tests.models import MultiMethod, export_methods


class Counter(nn.Module):
    """Adds one to a buffer that starts at 5 and returns ``x + n``."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("n", torch.full((1,), 5.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.n.add_(1)
        return x + self.n


@pytest.fixture(scope="module")
def cached() -> MultiMethod:
    return cached_programs()


@pytest.mark.parametrize("target", [{}, {"partitioners": ["xnnpack"]}], ids=["portable", "xnnpack"])
def test_shared_buffers_let_decode_read_what_prefill_wrote(
    cached: MultiMethod, catalog: BackendCatalog, target: dict[str, object]
) -> None:
    want = eager_prefill_then_decode(cached)
    plan = {"all": target, "share_mutable_buffers": True}
    for _ in range(2):  # a second job in the same process plans its own arena
        compiled = compile_programs(cached.programs, plan, catalog)
        got = runtime_prefill_then_decode(compiled.pte, cached)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_without_sharing_each_method_has_its_own_buffer(
    cached: MultiMethod, catalog: BackendCatalog
) -> None:
    compiled = compile_programs(cached.programs, {}, catalog)
    got = runtime_prefill_then_decode(compiled.pte, cached)
    assert not torch.allclose(got, eager_prefill_then_decode(cached), atol=1e-3)
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
