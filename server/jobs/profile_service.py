"""Profile jobs behind the routes: queue one (its request checked now, so bad input is a 4xx
naming what is wrong rather than a failed job later), and read a finished one's profile."""

from __future__ import annotations

import json
from typing import Any

from pteforge.contracts.jobs import PROFILE_KIND, ProfilePayload, ProfileReport
from pteforge.server.artifacts.service import ARTIFACTS
from pteforge.server.common.services import Services
from pteforge.server.errors import ConflictError, InvalidRequestError, NotFoundError
from pteforge.server.jobs.schemas import ProfileJobRequest
from pteforge.server.jobs.service import get_job
from pteforge.storage.domain import Artifact, Job, JobStatus, MethodSignature


def _signature(artifact: Artifact, method: str) -> MethodSignature:
    for signature in artifact.methods:
        if signature.name == method:
            return signature
    known = ", ".join(sorted(m.name for m in artifact.methods)) or "none"
    raise NotFoundError(f"artifact {artifact.id!r} has no method {method!r} (methods: {known})")


def _check_inputs(inputs: list[dict[str, Any]], signature: MethodSignature) -> None:
    """Raise a 422 naming the input unless ``inputs`` decode as the method's inputs."""
    from pteforge.runtime.errors import RuntimeLayerError
    from pteforge.runtime.oip_codec import decode_infer_request

    try:
        decode_infer_request(json.dumps({"inputs": inputs}).encode(), None, signature)
    except RuntimeLayerError as exc:
        raise InvalidRequestError(f"inputs: {exc}") from exc


def _check_runnable(artifact: Artifact, method: str, given_inputs: bool) -> None:
    """Raise a 409 if the method cannot be profiled here, or has no default inputs."""
    numerics = artifact.report.get("numerics") or {}
    record = (numerics.get("methods") or {}).get(method) or {}
    if record.get("status") == "not_executable":
        raise ConflictError(f"method {method!r} cannot run on this host: {record.get('message')}")
    if not given_inputs and artifact.program_id is None:
        raise ConflictError(
            f"artifact {artifact.id!r} has no numerics check (an uploaded .pte, or its program "
            "was deleted), so it has no inputs to profile on: give 'inputs'"
        )


def submit_profile(services: Services, project_id: str, body: ProfileJobRequest) -> Job:
    """Queue a profile job of ``body.method`` of ``body.artifact_id``."""
    with services.store.transaction() as tx:
        artifact = ARTIFACTS.get_in(tx, project_id, body.artifact_id)
        signature = _signature(artifact, body.method)
        if body.inputs is not None:
            _check_inputs(body.inputs, signature)
        _check_runnable(artifact, body.method, body.inputs is not None)
        payload = ProfilePayload(
            artifact_id=artifact.id,
            method=body.method,
            iterations=body.iterations,
            inputs=body.inputs,
        )
        job = tx.jobs.enqueue(
            project_id,
            PROFILE_KIND,
            payload.model_dump(mode="json"),
            artifact_id=artifact.id,
            unfinished_limit=services.settings.unfinished_jobs_per_project,
        )
    services.job_queued()
    return job


def job_profile(services: Services, project_id: str, job_id: str) -> ProfileReport:
    """The profile of a profile job that succeeded; 404 for another kind, 409 before."""
    job = get_job(services, project_id, job_id)
    if job.kind != PROFILE_KIND:
        raise NotFoundError(f"job {job_id!r} is a {job.kind} job: it has no profile")
    if job.status is not JobStatus.SUCCEEDED or job.result is None:
        why = f" ({job.error_code}: {job.error_message})" if job.error_code else ""
        raise ConflictError(
            f"job {job_id!r} is {job.status.value}{why}: its profile is there once it succeeded"
        )
    return ProfileReport.model_validate(job.result)
