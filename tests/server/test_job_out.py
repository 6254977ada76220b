"""``JobOut``: a compile job names its program and plan, and each event says when it began."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from pteforge.contracts.json_types import JsonObject
from pteforge.server.jobs.schemas import JobOut
from pteforge.storage.domain import Job, JobEvent, JobStatus

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
PLAN: JsonObject = {"methods": {"forward": {}}, "all": {"partitioners": ["xnnpack"]}}


def _job(payload: JsonObject) -> Job:
    return Job(
        id="job1",
        project_id="p",
        kind="compile",
        status=JobStatus.RUNNING,
        stage="to_edge",
        payload=payload,
        error_code=None,
        error_message=None,
        artifact_id=None,
        attempts=1,
        max_attempts=3,
        worker_id="w",
        lease_expires_at=None,
        cancel_requested=False,
        created_at=T0,
        started_at=T0,
        finished_at=None,
        updated_at=T0,
        version=3,
    )


def test_a_compile_job_names_its_program_and_plan_as_written() -> None:
    shown = JobOut.of(_job({"program_id": "prog1", "plan": PLAN, "plan_hash": "h"}))
    dumped = shown.model_dump(mode="json")
    assert dumped["program_id"] == "prog1"
    assert dumped["plan"] == PLAN
    assert dumped["changed_at"] is None


def test_a_payload_without_a_plan_shows_none() -> None:
    payloads: list[JsonObject] = [{}, {"program_id": 7, "plan": "nope"}, {"plan": {"unknown": 1}}]
    for payload in payloads:
        dumped = JobOut.of(_job(payload)).model_dump(mode="json")
        assert dumped["program_id"] is None and dumped["plan"] is None, payload


def test_an_event_says_when_it_began() -> None:
    job = replace(_job({"program_id": "prog1", "plan": PLAN, "plan_hash": "h"}), version=5)
    at = T0 + timedelta(seconds=2)
    event = JobEvent(4, JobStatus.RUNNING, "partition", at, attempt=1, started_at=T0)
    shown = JobOut.at(job, event)
    assert shown.changed_at == at
    assert shown.stage == "partition" and shown.program_id == "prog1"
