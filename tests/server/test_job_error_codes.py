"""A compile job fails with the code its exception declares, as an HTTP answer would: a plan
naming a method the program lacks is the caller's mistake, ``invalid_plan``, in both (the
service refuses such a plan at submit, ``test_api.test_bad_plan_is_422``; a job queued with
one anyway, e.g. by an older server, meets it in its lowering child)."""

from __future__ import annotations

from pathlib import Path

from pteforge.contracts.jobs import LoweringRequest
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
