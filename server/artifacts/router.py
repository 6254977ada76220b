"""Routes of artifacts: metadata, listing, deletion, `.pte`, `.ptd` and `.bpte` download,
`.pte` (and `.ptd`) upload."""

from __future__ import annotations

from fastapi import APIRouter, Request, status
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from pteforge.server.artifacts import service
from pteforge.server.artifacts.download import (
    DOWNLOAD_ANSWERS,
    RANGE_ANSWERS,
    content_response,
    pte_response,
)
from pteforge.server.artifacts.schemas import ArtifactList, ArtifactOut
from pteforge.server.auth.dependencies import CurrentPrincipal
from pteforge.server.common.openapi_doc import multipart_body
from pteforge.server.common.services import ServicesDep
from pteforge.server.http.listing import DEFAULT_LIMIT, LimitQuery
from pteforge.server.http.uploads import store_upload

router = APIRouter(prefix="/v1", tags=["artifacts"])


@router.get("/artifacts/{artifact_id}", summary="Artifact metadata")
async def get_artifact(
    artifact_id: str, services: ServicesDep, principal: CurrentPrincipal
) -> ArtifactOut:
    """The artifact, or 404 (another project's is as absent as a missing one)."""
    found = await run_in_threadpool(
        service.ARTIFACTS.get, services, principal.project_id, artifact_id
    )
    return ArtifactOut.of(found)


@router.get(
    "/artifacts/{artifact_id}/pte",
    summary="Download the .pte (ETag = sha256, Range honoured)",
    response_class=Response,
    responses=DOWNLOAD_ANSWERS,
)
def download_pte(
    artifact_id: str, request: Request, services: ServicesDep, principal: CurrentPrincipal
) -> Response:
    artifact = service.ARTIFACTS.get(services, principal.project_id, artifact_id)
    return pte_response(request, services.store.blobs, artifact)


@router.get(
    "/artifacts/{artifact_id}/bpte",
    summary="Download the artifact as an ExecuTorch BundledProgram (.bpte)",
    response_class=Response,
    responses=DOWNLOAD_ANSWERS,
)
def download_bpte(
    artifact_id: str, request: Request, services: ServicesDep, principal: CurrentPrincipal
) -> Response:
    """The `.pte` with each method's numerics-check inputs and expected outputs (eager's),
    verifiable with ExecuTorch's bundled-program loader; 409 for an artifact without a test
    suite (an uploaded `.pte`, or one compiled before bundles were stored)."""
    artifact = service.ARTIFACTS.get(services, principal.project_id, artifact_id)
    ref = service.bundle_of(services, artifact)
    return content_response(request, services.store.blobs, ref, f"{artifact.id}.bpte")


@router.get(
    "/artifacts/{artifact_id}/ptd",
    summary="Download the .ptd holding the constants the .pte keeps outside",
    response_class=Response,
    responses=DOWNLOAD_ANSWERS,
)
def download_ptd(
    artifact_id: str, request: Request, services: ServicesDep, principal: CurrentPrincipal
) -> Response:
    """The FlatTensor file uploaded with the `.pte` (ExecuTorch's program-data separation;
    ETag = its sha256, Range honoured); 409 for an artifact whose `.pte` holds all its
    constants."""
    artifact = service.ARTIFACTS.get(services, principal.project_id, artifact_id)
    ref = service.data_of(artifact)
    return content_response(request, services.store.blobs, ref, f"{artifact.id}.ptd")


@router.head(
    "/artifacts/{artifact_id}/ptd",
    summary="The .ptd download's status and headers (size, ETag), without the body",
    response_class=Response,
    responses=RANGE_ANSWERS,
)
def head_ptd(
    artifact_id: str, request: Request, services: ServicesDep, principal: CurrentPrincipal
) -> Response:
    return download_ptd(artifact_id, request, services, principal)


@router.head(
    "/artifacts/{artifact_id}/pte",
    summary="The download's status and headers (size, ETag), without the body",
    response_class=Response,
    responses=RANGE_ANSWERS,
)
def head_pte(
    artifact_id: str, request: Request, services: ServicesDep, principal: CurrentPrincipal
) -> Response:
    return download_pte(artifact_id, request, services, principal)


@router.post(
    "/artifacts",
    status_code=status.HTTP_201_CREATED,
    summary="Upload a .pte built elsewhere (verified before it is stored)",
    openapi_extra=multipart_body(
        {
            "type": "object",
            "properties": {
                "pte": {"type": "string", "format": "binary"},
                "ptd": {"type": "string", "format": "binary"},
            },
            "required": ["pte"],
        }
    ),
)
async def upload_artifact(
    request: Request, services: ServicesDep, principal: CurrentPrincipal
) -> ArtifactOut:
    """The `.pte`, and (part `ptd`) the `.ptd` holding the constants it keeps outside
    (ExecuTorch's program-data separation) if it was exported so. Every method is loaded in
    a confined child first: 422 naming the file for a `.pte` or `.ptd` that does not load, a
    `.ptd` that does not fit the `.pte`, or a `.pte` that needs a `.ptd` sent without one (a
    `.ptd` sent with a `.pte` that loads with it is taken, even if no method reads it)."""
    artifact = await store_upload(
        request, services, principal.project_id, service.create_uploaded_artifact
    )
    return ArtifactOut.of(artifact)


@router.get("/artifacts", summary="The project's artifacts")
async def list_artifacts(
    services: ServicesDep, principal: CurrentPrincipal, limit: LimitQuery = DEFAULT_LIMIT
) -> ArtifactList:
    """The project's artifacts, newest first."""
    found = await run_in_threadpool(service.ARTIFACTS.list, services, principal.project_id, limit)
    return ArtifactList(artifacts=[ArtifactOut.of(artifact) for artifact in found])


@router.delete(
    "/artifacts/{artifact_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete an artifact",
)
def delete_artifact(artifact_id: str, services: ServicesDep, principal: CurrentPrincipal) -> None:
    """Its content goes too unless another row references it. Refused with 409, naming them,
    while versions of a model serve the artifact: delete those versions first."""
    service.ARTIFACTS.delete(services, principal.project_id, artifact_id)
