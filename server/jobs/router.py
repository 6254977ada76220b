"""Routes of jobs: submit a compile or a profile, status, cancel, the server-sent event
stream, and a profile job's profile."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, status
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from pteforge.contracts.jobs import ProfileReport
from pteforge.server.auth.dependencies import CurrentPrincipal, token_is_live
from pteforge.server.common.services import ServicesDep
from pteforge.server.http.bodies import CappedJsonRoute
from pteforge.server.http.listing import DEFAULT_LIMIT, LimitQuery
from pteforge.server.jobs import profile_service, service
from pteforge.server.jobs.events import job_event_stream
from pteforge.server.jobs.schemas import CompileJobRequest, JobList, JobOut, ProfileJobRequest
from pteforge.storage.domain import JobStatus

router = APIRouter(prefix="/v1", tags=["jobs"], route_class=CappedJsonRoute)


@router.post(
    "/compile-jobs",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Queue a compile of a program with a plan",
)
def submit_compile_job(
    body: CompileJobRequest, services: ServicesDep, principal: CurrentPrincipal
) -> JobOut:
    """Answers at once; the same program and plan compiled before reuses that artifact."""
    job = service.submit_compile(services, principal.project_id, body.program_id, body.plan)
    return JobOut.of(job)


@router.post(
    "/profile-jobs",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Queue a profile of one method of an artifact",
)
def submit_profile_job(
    body: ProfileJobRequest, services: ServicesDep, principal: CurrentPrincipal
) -> JobOut:
    """Answers at once with a job of kind `profile`, run by a compile worker in a confined
    child; `GET /v1/jobs/{id}/profile` has the profile once it succeeded. Without `inputs`
    the method runs on the inputs of the artifact's numerics check (an uploaded `.pte` has
    none: 409)."""
    return JobOut.of(profile_service.submit_profile(services, principal.project_id, body))


@router.get("/jobs/{job_id}/profile", summary="A succeeded profile job's profile")
async def get_job_profile(
    job_id: str, services: ServicesDep, principal: CurrentPrincipal
) -> ProfileReport:
    """Latency samples, load times, peak memory and per-operator time (409 until the job
    succeeded)."""
    return await run_in_threadpool(
        profile_service.job_profile, services, principal.project_id, job_id
    )


@router.get("/jobs", summary="The project's jobs")
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


@router.get("/jobs/{job_id}", summary="A job's status and stage")
async def get_job(job_id: str, services: ServicesDep, principal: CurrentPrincipal) -> JobOut:
    return JobOut.of(
        await run_in_threadpool(service.get_job, services, principal.project_id, job_id)
    )


@router.post("/jobs/{job_id}/cancel", summary="Cancel a job")
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
        # at most the event column's largest: SQLite refuses to bind past 64 bits (a broken
        # stream once it had started)
        Header(
            ge=0, le=2**31 - 1, description="Resume after this event id (an SSE client sends it)."
        ),
    ] = 0,
) -> StreamingResponse:
    """Every change since the job was queued (or since ``Last-Event-ID``), in order, each
    with the job as it was then; then ``end``."""
    service.get_job(services, principal.project_id, job_id)  # 404 before the stream starts
    authorization = request.headers.get("authorization")
    stream = job_event_stream(
        services,
        principal.project_id,
        job_id,
        request,
        last_event_id,
        authorized=lambda: token_is_live(services.store, authorization),
    )
    return services.event_streams.response(principal.project_id, stream)
