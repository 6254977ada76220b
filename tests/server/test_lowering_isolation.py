"""The lowering child: out of memory or a crash fails that job only, with a clear error."""

from __future__ import annotations

from multiprocessing.context import ForkServerContext
from pathlib import Path

import pytest

from pteforge.contracts.jobs import LoweringRequest
from pteforge.server.jobs.runner import (
    StandbyLowering,
    Verdict,
    Watch,
    lowering_context,
    run_lowering,
)
from pteforge.server.programs.bundle import write_bundle


@pytest.fixture(scope="module")
def ctx() -> ForkServerContext:
    """The fork server a compile worker uses."""
    return lowering_context()


def _watch(stages: list[str]) -> Watch:
    return Watch(
        tick_seconds=0.2,
        timeout_seconds=180,
        heartbeat=lambda: Verdict.CONTINUE,
        on_stage=stages.append,
    )


def _request(seq2seq_files: dict[str, Path], tmp_path: Path, limit: int | None) -> LoweringRequest:
    bundle = tmp_path / "program.pt2"
    write_bundle(seq2seq_files, bundle)
    return LoweringRequest(
        program_path=str(bundle),
        plan={"methods": {"encode": {"partitioners": ["xnnpack"]}}},
        output_path=str(tmp_path / "out.pte"),
        memory_limit_bytes=limit,
    )


def test_out_of_memory_fails_the_job_not_the_worker(
    ctx: ForkServerContext, seq2seq_files: dict[str, Path], tmp_path: Path
) -> None:
    tiny = 64 * 1024 * 1024  # far below what torch already maps: every allocation fails
    standby = StandbyLowering.start(ctx, warm_up=False, scratch=tmp_path)
    outcome, verdict = run_lowering(standby, _request(seq2seq_files, tmp_path, tiny), _watch([]))
    assert verdict == Verdict.CONTINUE
    assert outcome.result is None
    assert outcome.error_code == "out_of_memory", outcome
    assert outcome.error_message
    assert not (tmp_path / "out.pte").exists()


def test_lowering_in_a_child_succeeds(
    ctx: ForkServerContext, seq2seq_files: dict[str, Path], tmp_path: Path
) -> None:
    """Also after the out-of-memory child above: the worker's fork server is unharmed. The
    standby warms up first (as in production), then lowers the job it is handed."""
    stages: list[str] = []
    standby = StandbyLowering.start(ctx, warm_up=True, scratch=tmp_path)
    request = _request(seq2seq_files, tmp_path, None)
    outcome, verdict = run_lowering(standby, request, _watch(stages))
    assert verdict == Verdict.CONTINUE
    assert outcome.error_code is None, outcome.error_message
    assert outcome.result is not None and {m.name for m in outcome.result.methods} == {
        "encode",
        "decode",
    }
    assert stages[0] == "to_edge" and stages[-2:] == ["emit", "verify"]
    numerics = outcome.result.numerics
    assert numerics is not None and numerics["status"] == "passed", numerics
    assert (tmp_path / "out.pte").stat().st_size > 0


def test_a_standby_that_died_while_idle_fails_the_job_clearly(
    ctx: ForkServerContext, seq2seq_files: dict[str, Path], tmp_path: Path
) -> None:
    standby = StandbyLowering.start(ctx, warm_up=False, scratch=tmp_path)
    standby.process.kill()
    standby.process.join()
    outcome, verdict = run_lowering(standby, _request(seq2seq_files, tmp_path, None), _watch([]))
    assert verdict == Verdict.CONTINUE
    assert outcome.result is None
    assert outcome.error_code == "compile_crashed"
    assert outcome.error_message == "the lowering process died with SIGKILL (likely out of memory)"


def test_a_discarded_standby_exits(ctx: ForkServerContext, tmp_path: Path) -> None:
    standby = StandbyLowering.start(ctx, warm_up=False, scratch=tmp_path)
    standby.discard()
    assert not standby.process.is_alive()
    assert standby.process.exitcode is not None


def test_a_lowering_process_killed_mid_job_fails_that_job_clearly(
    ctx: ForkServerContext, seq2seq_files: dict[str, Path], tmp_path: Path
) -> None:
    """A signal death during lowering (here SIGKILL as soon as to_edge starts, as the OOM
    killer would) becomes a ``compile_crashed`` failure naming the signal."""
    standby = StandbyLowering.start(ctx, warm_up=False, scratch=tmp_path)

    def kill_on_first_stage(stage: str) -> None:
        standby.process.kill()

    watch = Watch(
        tick_seconds=0.2,
        timeout_seconds=180,
        heartbeat=lambda: Verdict.CONTINUE,
        on_stage=kill_on_first_stage,
    )
    outcome, verdict = run_lowering(standby, _request(seq2seq_files, tmp_path, None), watch)
    assert verdict == Verdict.CONTINUE
    assert outcome.result is None
    assert outcome.error_code == "compile_crashed"
    assert "SIGKILL" in (outcome.error_message or "")
    assert not (tmp_path / "out.pte").exists()
