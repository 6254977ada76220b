"""An LM exported as ExecuTorch's LLM runner expects, compiled by pteforge's manager with
the runner's metadata as the plan's ``constant_methods``: the ``.pte`` has them, its greedy
tokens equal eager ``generate``, and the compile report describes it (``generation``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pteforge.backends import default_catalog
from pteforge.manager import compile_programs
from pteforge.manager.errors import PlanError
from pteforge.server.sandbox import validate_pte_isolated
from tests.generation import lm_export
from tests.generation.lm_builder import build_tiny_lm, eager_greedy, pte_greedy

pytestmark = pytest.mark.zoo


def test_compiled_lm_follows_the_runner_convention(tmp_path: Path) -> None:
    lm = build_tiny_lm("llama")
    program = lm_export.export_lm(lm.eager, lm.max_seq_len, dynamic=True)
    # planned for the example's 2 tokens: the runner prefills token by token
    constants = {**lm.metadata, "enable_dynamic_shape": False}
    plan = {"all": {"partitioners": ["xnnpack"]}, "constant_methods": constants}
    compiled = compile_programs({"forward": program}, plan, default_catalog())
    compiled.write(tmp_path / "lm.pte")
    prompt = lm.encode("Hello, world!")
    want = eager_greedy(lm, prompt, 16)
    assert pte_greedy(tmp_path / "lm.pte", prompt, 16, lm.eos_ids) == want
    generation = compiled.report["generation"]
    assert (generation["max_seq_len"], generation["eos_ids"]) == (64, lm.eos_ids)
    assert generation["metadata"] == constants
    described = validate_pte_isolated(tmp_path / "lm.pte").generation
    assert described is not None and described.model_dump(mode="json") == generation


def test_a_constant_method_may_not_replace_a_method() -> None:
    from tests.models import small_mlp_programs

    programs = small_mlp_programs().programs
    plan = {"constant_methods": {"forward": 1}}
    with pytest.raises(PlanError, match=r"constant_methods\.forward"):
        compile_programs(programs, plan, default_catalog())
