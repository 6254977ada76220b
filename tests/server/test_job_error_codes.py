"""A compile job fails with the code its exception declares, as an HTTP answer would: a plan
naming a method the program lacks is the caller's mistake, ``invalid_plan``, in both (the
service refuses such a plan at submit, ``test_api.test_bad_plan_is_422``; a job queued with
one anyway, e.g. by an older server, meets it in its lowering child)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pteforge.contracts.errors import ErrorCode, code_of
from pteforge.contracts.jobs import LoweringRequest, ProfileRequest
from pteforge.contracts.specs import MethodSignature, TensorSpec
from pteforge.server.jobs.profile_child import profile
from pteforge.server.jobs.runner import (
    StandbyLowering,
    Verdict,
    Watch,
    lowering_context,
    run_lowering,
)
from pteforge.server.programs.bundle import write_bundle
from tests.models import save_programs, small_mlp_programs


def test_a_job_whose_plan_names_an_unknown_method_fails_with_invalid_plan(
    tmp_path: Path,
) -> None:
    bundle = tmp_path / "program.pt2"
    write_bundle(save_programs(small_mlp_programs().programs, tmp_path / "methods"), bundle)
    request = LoweringRequest(
        program_path=str(bundle),
        plan={"methods": {"nope": {"partitioners": ["xnnpack"]}}},
        output_path=str(tmp_path / "out.pte"),
        memory_limit_bytes=None,
    )
    watch = Watch(
        tick_seconds=0.2, timeout_seconds=180, heartbeat=lambda: Verdict.CONTINUE, on_stage=print
    )
    standby = StandbyLowering.start(lowering_context(), warm_up=False, scratch=tmp_path)
    outcome, verdict = run_lowering(standby, request, watch)
    assert verdict == Verdict.CONTINUE
    assert outcome.result is None
    assert outcome.error_code == "invalid_plan", outcome
    assert outcome.error_message is not None and "'nope'" in outcome.error_message


def test_profile_inputs_that_do_not_fit_fail_as_the_callers_mistake(tmp_path: Path) -> None:
    """A profile job's inputs that miss its method failed as ``internal_error``, a bug of the
    server's by the codes' own table; they are ``invalid_request`` naming the input."""
    spec = TensorSpec(name="x", dtype="float32", shape=(-1, 4))
    request = ProfileRequest(
        pte_path=str(tmp_path / "never-read.pte"),
        method="forward",
        signature=MethodSignature(name="forward", inputs=(spec,), outputs=(spec,)),
        iterations=1,
        inputs=[{"name": "x", "datatype": "INT64", "shape": [1, 4], "data": [1, 2, 3, 4]}],
    )
    with pytest.raises(Exception) as caught:
        profile(request, load=lambda path, scratch: {})
    assert code_of(caught.value) == ErrorCode.INVALID_REQUEST
    assert "input 'x': expected datatype FP32, got INT64" in str(caught.value)
