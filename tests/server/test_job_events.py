"""A compile job's server-sent events: every stage once, in order, for live and late readers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import torch

from tests.models import small_mlp_programs
from tests.server.helpers import assert_error, read_stream, submit, upload_methods, wait_job

ALL_STAGES = [
    ("running", stage)
    for stage in ("loading", "to_edge", "partition", "preprocess", "emit", "verify", "store")
]


def test_events_follow_the_stages(compiled: dict[str, Any]) -> None:
    """Read while the job runs: every change once, in order, then ``end``."""
    events = compiled["events"]
    assert events[-1] == ("end", {"status": "succeeded"})
    changes = [(data["status"], data["stage"]) for name, data in events if name == "job"]
    assert changes == [("queued", None), ("running", None), *ALL_STAGES, ("succeeded", "store")]


def test_a_late_reader_still_gets_every_stage(
    admin: httpx.Client, compiled: dict[str, Any]
) -> None:
    """Read after the job ended: the whole history, from the job's change log."""
    job = compiled["job"]
    messages = read_stream(admin, job["id"])
    changes = [(m["data"]["status"], m["data"]["stage"]) for m in messages if m["event"] == "job"]
    assert changes == [("queued", None), ("running", None), *ALL_STAGES, ("succeeded", "store")]
    running = [m["data"] for m in messages if m["event"] == "job"][:-1]
    assert all(d["artifact_id"] is None and d["finished_at"] is None for d in running)
    assert messages[-2]["data"]["artifact_id"] == job["artifact_id"]
    assert messages[-1] == {"id": None, "event": "end", "data": {"status": "succeeded"}}


def test_events_resume_after_last_event_id(admin: httpx.Client, compiled: dict[str, Any]) -> None:
    job_id = compiled["job"]["id"]
    whole = [m for m in read_stream(admin, job_id) if m["event"] == "job"]
    resumed = read_stream(admin, job_id, headers={"Last-Event-ID": whole[2]["id"]})
    assert [m["id"] for m in resumed if m["event"] == "job"] == [m["id"] for m in whole[3:]]
    bad = admin.get(f"/v1/jobs/{job_id}/events", headers={"Last-Event-ID": "soon"})
    assert_error(bad, 422)


def test_a_resume_id_past_any_event_is_422_not_a_broken_stream(
    admin: httpx.Client, tmp_path: Path
) -> None:
    """An id past 64 bits reached the query after the stream had started: SQLite refused to
    bind it (``OverflowError``) and the client got a cut stream; the largest one is taken."""
    path = tmp_path / "forward.pt2"
    torch.export.save(small_mlp_programs().programs["forward"], path)
    program = upload_methods(admin, {"forward": path}, name="events-resume")
    job_id = wait_job(admin, submit(admin, program["id"], {})["id"])["id"]
    far = admin.get(f"/v1/jobs/{job_id}/events", headers={"Last-Event-ID": str(2**70)})
    assert_error(far, 422)
    largest = read_stream(admin, job_id, headers={"Last-Event-ID": str(2**31 - 1)})
    assert [m["event"] for m in largest] == ["end"]
