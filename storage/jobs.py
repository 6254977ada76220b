"""The store's contract for jobs (``tx.jobs``): a queue of rows with leases, worked by
compile workers (see :mod:`pteforge.storage.store` for the rest of the contract)."""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from pteforge.storage.domain import Job, JobEvent, JobStatus

DEFAULT_MAX_ATTEMPTS = 3


class JobRepository(ABC):
    """Jobs as rows with an explicit state machine (see :mod:`pteforge.storage.jobstate`).

    A running job goes back to the queue three ways: its lease expired (its worker vanished:
    :meth:`reap_expired`) or its attempt crashed (:meth:`retry`), both counting the attempt;
    or its worker was stopped (:meth:`release`), which does not count it.

    Worker-side calls name the worker; acting on a job the worker no longer holds raises
    :class:`LeaseLostError`, any other illegal move :class:`IllegalTransitionError`.
    """

    @abstractmethod
    def enqueue(
        self,
        project_id: str,
        kind: str,
        payload: Mapping[str, Any],
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        artifact_id: str | None = None,
        unfinished_limit: int | None = None,
    ) -> Job:
        """A new queued job with no attempts made; ``artifact_id``: the artifact it works
        on, where that is known from the start (a profile job's). With ``unfinished_limit``,
        raises :class:`QueueFullError` instead when the project already has that many
        queued or running jobs (counted under a lock on the project, so concurrent calls
        cannot both pass)."""

    @abstractmethod
    def get(self, project_id: str, job_id: str) -> Job | None:
        """The job, or None when absent or owned by another project."""

    @abstractmethod
    def get_any(self, job_id: str) -> Job | None:
        """The job whatever its project (for workers)."""

    @abstractmethod
    def list(self, project_id: str, status: JobStatus | None = None, limit: int = 100) -> list[Job]:
        """Newest first."""

    @abstractmethod
    def events(
        self, project_id: str, job_id: str, after_version: int = 0
    ) -> builtins.list[JobEvent]:
        """The job's status and stage changes after ``after_version``, oldest first (empty
        when the project has no such job). Every change is kept, so a reader that polls
        less often than stages change still sees each one."""

    @abstractmethod
    def claim_next(
        self, worker_id: str, lease: timedelta, kinds: Sequence[str] | None = None
    ) -> Job | None:
        """Atomically take the next queued job: running, held by ``worker_id``, attempt+1.
        The next is the oldest of the project a worker served longest ago (never: first),
        so projects take turns however many jobs one of them queued."""

    @abstractmethod
    def heartbeat(self, job_id: str, worker_id: str, lease: timedelta) -> bool:
        """Extend the lease; False if the job is no longer held or its cancel was requested."""

    @abstractmethod
    def set_stage(self, job_id: str, worker_id: str, stage: str) -> Job:
        """Record the running job's current stage (bumps ``version``)."""

    @abstractmethod
    def succeed(
        self,
        job_id: str,
        worker_id: str,
        artifact_id: str | None,
        result: Mapping[str, Any] | None = None,
    ) -> Job:
        """Running -> succeeded, naming the artifact it produced (or worked on) and what
        else it produced (``result``: a profile job's profile)."""

    @abstractmethod
    def fail(self, job_id: str, worker_id: str, code: str, message: str) -> Job:
        """Running -> failed with an error code and a human-readable message."""

    @abstractmethod
    def acknowledge_cancel(self, job_id: str, worker_id: str) -> Job:
        """The worker stopped a job whose cancel was requested: running -> canceled."""

    @abstractmethod
    def cancel(self, project_id: str, job_id: str) -> Job | None:
        """Queued -> canceled at once; running -> cancel requested (the worker or the reaper
        finishes it). Canceling a canceled job is a no-op; a finished one raises
        IllegalTransitionError. None when the project has no such job."""

    @abstractmethod
    def delete_finished(self, older_than: timedelta, limit: int = 1000) -> int:
        """Delete up to ``limit`` jobs that ended more than ``older_than`` ago, oldest first,
        with their change logs (their artifacts stay). Returns how many were deleted."""

    @abstractmethod
    def reap_expired(self) -> builtins.list[Job]:
        """Running jobs whose lease expired (their worker stopped heartbeating): requeued
        while attempts remain, with ``retry_reason`` saying why, else failed with error code
        ``lease_expired`` (canceled if a cancel was requested). Returns them."""

    @abstractmethod
    def retry(self, job_id: str, worker_id: str, code: str, reason: str) -> Job:
        """The worker's attempt at a job it holds ended without a verdict on the job (its
        lowering process was killed, e.g. by the OOM killer): requeued at once while
        attempts remain, the attempt counted and ``retry_reason`` saying why (``attempt N of
        M abandoned: <reason>``), else failed with ``code`` and ``reason`` (canceled if a
        cancel was requested). Raises LeaseLostError if the worker no longer holds it."""

    @abstractmethod
    def release(self, job_id: str, worker_id: str, reason: str) -> Job | None:
        """A stopping worker (SIGTERM, its parent gone) hands a job it holds back now,
        through no fault of the job: requeued with ``retry_reason`` saying why and the
        attempt *not* counted (``attempts`` back to its value before the claim), or canceled
        if a cancel was requested. None when the worker no longer holds it."""
