"""Routes of compile jobs: submit, status, cancel and the server-sent event stream."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, status
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from pteforge.server.auth.dependencies import CurrentPrincipal
from pteforge.server.common.services import ServicesDep
from pteforge.server.http.listing import DEFAULT_LIMIT, LimitQuery
from pteforge.server.jobs import service
from pteforge.server.jobs.events import job_event_stream
from pteforge.server.jobs.schemas import CompileJobRequest, JobList, JobOut
from pteforge.storage.domain import JobStatus

router = APIRouter(prefix="/v1", tags=["jobs"])


@router.post(
    "/compile-jobs",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobOut,
    summary="Queue a compile of a program with a plan",
)
def submit_compile_job(
    body: CompileJobRequest, services: ServicesDep, principal: CurrentPrincipal
) -> JobOut:
    """Answers at once; the same program and plan compiled before reuses that artifact."""
    job = service.submit_compile(services, principal.project_id, body.program_id, body.plan)
    return JobOut.of(job)


@router.get("/jobs", response_model=JobList, summary="The project's jobs")
async def list_jobs(
    services: ServicesDep,
    principal: CurrentPrincipal,
    job_status: Annotated[
        JobStatus | None, Query(alias="status", description="Only jobs in this status.")
    ] = None,
    limit: LimitQuery = DEFAULT_LIMIT,
) -> JobList:
    jobs = await run_in_threadpool(
        service.list_jobs, services, principal.project_id, job_status, limit
    )
    return JobList(jobs=[JobOut.of(j) for j in jobs])


@router.get("/jobs/{job_id}", response_model=JobOut, summary="A job's status and stage")
async def get_job(job_id: str, services: ServicesDep, principal: CurrentPrincipal) -> JobOut:
    return JobOut.of(
        await run_in_threadpool(service.get_job, services, principal.project_id, job_id)
    )


@router.post("/jobs/{job_id}/cancel", response_model=JobOut, summary="Cancel a job")
def cancel_job(job_id: str, services: ServicesDep, principal: CurrentPrincipal) -> JobOut:
    """A queued job is canceled at once; a running one as soon as its worker notices."""
    return JobOut.of(service.cancel_job(services, principal.project_id, job_id))


@router.get(
    "/jobs/{job_id}/events",
    summary="Server-sent events: one per status or stage change, until the job ends",
    response_class=StreamingResponse,
)
def job_events(
    job_id: str,
    request: Request,
    services: ServicesDep,
    principal: CurrentPrincipal,
    last_event_id: Annotated[
        int,
        Header(ge=0, description="Resume after this event id (an SSE client sends it)."),
    ] = 0,
) -> StreamingResponse:
    """Every change since the job was queued (or since ``Last-Event-ID``), in order, each
    with the job as it was then; then ``end``."""
    service.get_job(services, principal.project_id, job_id)  # 404 before the stream starts
    return StreamingResponse(
        job_event_stream(services, principal.project_id, job_id, request, last_event_id),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
