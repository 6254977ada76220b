"""The job state machine: the one table of allowed status transitions."""

from __future__ import annotations

from pteforge.storage.domain import JobStatus
from pteforge.storage.errors import IllegalTransitionError

ALLOWED_TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    # claimed by a worker, or canceled before anyone started it
    JobStatus.QUEUED: frozenset({JobStatus.RUNNING, JobStatus.CANCELED}),
    # finished, canceled on request, or returned to the queue: its lease expired, its
    # attempt crashed (both count the attempt) or its worker was stopped (not counted)
    JobStatus.RUNNING: frozenset(
        {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELED, JobStatus.QUEUED}
    ),
    JobStatus.SUCCEEDED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELED: frozenset(),
}


def check_transition(job_id: str, current: JobStatus, target: JobStatus) -> None:
    """Raise :class:`IllegalTransitionError` unless ``current -> target`` is allowed."""
    if target not in ALLOWED_TRANSITIONS[current]:
        raise IllegalTransitionError(
            f"job {job_id} cannot go from {current.value} to {target.value}"
        )
