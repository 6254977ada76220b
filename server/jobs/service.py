"""Job use-cases behind the routes: each function is one committed unit of work."""

from __future__ import annotations

from pteforge.contracts.jobs import COMPILE_KIND, CompilePayload
from pteforge.contracts.plan import PlanSpec, canonical_plan
from pteforge.manager.plan_check import check_plan
from pteforge.server.common.services import Services
from pteforge.server.errors import ConflictError, NotFoundError
from pteforge.server.programs.service import PROGRAMS
from pteforge.storage.domain import Job, JobEvent, JobStatus
from pteforge.storage.errors import IllegalTransitionError


def submit_compile(services: Services, project_id: str, program_id: str, plan: PlanSpec) -> Job:
    """Queue a compile job (a worker reuses an existing artifact for the same plan); the
    plan is checked against the program and the catalog as the library checks it, so a bad
    plan is a 422 now, naming the field as written, rather than a failed job later."""
    canonical, plan_hash = canonical_plan(plan)
    with services.store.transaction() as tx:
        program = PROGRAMS.get_in(tx, project_id, program_id)
        check_plan(plan, sorted(m.name for m in program.methods), services.catalog)
        payload = CompilePayload(program_id=program.id, plan=canonical, plan_hash=plan_hash)
        job = tx.jobs.enqueue(
            project_id,
            COMPILE_KIND,
            payload.model_dump(mode="json"),
            unfinished_limit=services.settings.unfinished_jobs_per_project,
        )
    services.job_queued()
    return job


def list_jobs(
    services: Services, project_id: str, status: JobStatus | None, limit: int
) -> list[Job]:
    """The project's jobs, newest first, optionally only those in ``status``."""
    with services.store.transaction(read_only=True) as tx:
        return tx.jobs.list(project_id, status, limit)


def get_job(services: Services, project_id: str, job_id: str) -> Job:
    with services.store.transaction(read_only=True) as tx:
        return _found(tx.jobs.get(project_id, job_id), job_id)


def job_events(
    services: Services, project_id: str, job_id: str, after_version: int
) -> tuple[Job, list[JobEvent]]:
    """The job and its changes after ``after_version``, read in one transaction: once the
    job is terminal, its last change is among them."""
    with services.store.transaction(read_only=True) as tx:
        job = tx.jobs.get(project_id, job_id)
        events = tx.jobs.events(project_id, job_id, after_version)
    return _found(job, job_id), events


def cancel_job(services: Services, project_id: str, job_id: str) -> Job:
    """Cancel a queued or running job; a finished job answers 409."""
    try:
        with services.store.transaction() as tx:
            job = _found(tx.jobs.cancel(project_id, job_id), job_id)
    except IllegalTransitionError as exc:
        raise ConflictError(f"job {job_id!r} already finished: {exc}") from exc
    if job.status is JobStatus.RUNNING:
        services.job_canceled()  # the lowering stops now rather than at its next heartbeat
    return job


def _found(job: Job | None, job_id: str) -> Job:
    """``job``, or 404 naming ``job_id`` (another project's job is as absent as a missing one)."""
    if job is None:
        raise NotFoundError(f"job {job_id!r} not found")
    return job
