"""Routes of programs: multipart upload, lookup, listing and deletion."""

from __future__ import annotations

from fastapi import APIRouter, Request, status
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from pteforge.contracts import METHOD_NAME_RULE
from pteforge.server.auth.dependencies import CurrentPrincipal
from pteforge.server.common.openapi_doc import multipart_body
from pteforge.server.common.services import ServicesDep
from pteforge.server.http.listing import DEFAULT_LIMIT, LimitQuery
from pteforge.server.http.uploads import store_upload
from pteforge.server.programs import service
from pteforge.server.programs.schemas import ProgramList, ProgramOut

router = APIRouter(prefix="/v1", tags=["programs"])

_UPLOAD_DOC = multipart_body(
    {
        "type": "object",
        "description": "One file part per method (field name = method name, a "
        "torch.export.save archive) or one 'program' part (a pt2 archive with "
        f"several programs); optional text field 'name'. Method names: {METHOD_NAME_RULE}.",
        "additionalProperties": {"type": "string", "format": "binary"},
    }
)


@router.post(
    "/programs",
    status_code=status.HTTP_201_CREATED,
    summary="Upload a multi-method program",
    openapi_extra=_UPLOAD_DOC,
)
async def upload_program(
    request: Request, services: ServicesDep, principal: CurrentPrincipal
) -> ProgramOut:
    """Streams each part to disk (413 over the size limit), validates, describes, stores."""
    program = await store_upload(
        request,
        services,
        principal.project_id,
        service.create_program,
        check_name=service.check_part_name,
    )
    return ProgramOut.of(program)


@router.get("/programs/{program_id}", summary="An uploaded program")
async def get_program(
    program_id: str, services: ServicesDep, principal: CurrentPrincipal
) -> ProgramOut:
    """The program, or 404 (another project's is as absent as a missing one)."""
    found = await run_in_threadpool(
        service.PROGRAMS.get, services, principal.project_id, program_id
    )
    return ProgramOut.of(found)


@router.get("/programs", summary="The project's programs")
async def list_programs(
    services: ServicesDep, principal: CurrentPrincipal, limit: LimitQuery = DEFAULT_LIMIT
) -> ProgramList:
    """The project's programs, newest first."""
    found = await run_in_threadpool(service.PROGRAMS.list, services, principal.project_id, limit)
    return ProgramList(programs=[ProgramOut.of(program) for program in found])


@router.delete(
    "/programs/{program_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a program (its artifacts stay)",
)
def delete_program(program_id: str, services: ServicesDep, principal: CurrentPrincipal) -> None:
    service.PROGRAMS.delete(services, principal.project_id, program_id)
