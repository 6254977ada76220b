"""Profile jobs from the client: ``Client.profile`` / ``AsyncClient.profile`` run
:func:`profile` (one sans-IO operation for both, like every call of :mod:`operations`)."""

from __future__ import annotations

from typing import Any, Literal, overload

from pteforge.client.calls import Call
from pteforge.client.errors import raise_for_job
from pteforge.client.models import Job
from pteforge.client.operations import Op, Operations, Ref, ref
from pteforge.client.sinks import StageCallback
from pteforge.client.tensors import Inputs, json_tensors
from pteforge.contracts.jobs import ProfileReport

__all__ = ["ProfileReport", "profile", "profile_report"]


@overload
def profile(
    ops: Operations,
    artifact: Ref,
    method: str,
    iterations: int = 20,
    inputs: Inputs | None = None,
    wait: Literal[True] = True,
    on_stage: StageCallback | None = None,
) -> Op[ProfileReport]: ...
@overload
def profile(
    ops: Operations,
    artifact: Ref,
    method: str,
    iterations: int = 20,
    inputs: Inputs | None = None,
    *,
    wait: Literal[False],
    on_stage: StageCallback | None = None,
) -> Op[Job]: ...
def profile(
    ops: Operations,
    artifact: Ref,
    method: str,
    iterations: int = 20,
    inputs: Inputs | None = None,
    wait: bool = True,
    on_stage: StageCallback | None = None,
) -> Op[ProfileReport] | Op[Job]:
    """Queue a profile of ``method`` of ``artifact`` (``iterations`` timed runs after a
    warm-up) on ``inputs`` (numpy arrays or torch tensors, in order or by name; default:
    the inputs of the artifact's numerics check). With ``wait``, follow the job and return
    its profile (latency samples, load times, peak memory, per-operator rows), or raise the
    error it failed with; else return the queued job."""
    body: dict[str, Any] = {"artifact_id": ref(artifact), "method": method}
    body["iterations"] = iterations
    if inputs is not None:
        arrays = yield from ops.by_name(artifact, method, f"{ref(artifact)}.{method}", inputs)
        body["inputs"] = json_tensors(arrays)
    reply = yield Call("POST", "/v1/profile-jobs", ok=(202,), json=body)
    job = Job.from_json(reply.json())
    if not wait:
        return job
    final = yield from ops.follow(job, on_stage)
    raise_for_job(final)
    answer = yield Call("GET", f"/v1/jobs/{job.id}/profile", idempotent=True)
    return profile_report(answer.json())


def profile_report(body: Any) -> ProfileReport:
    """The profile ``GET /v1/jobs/{id}/profile`` answered. Fields this client does not know
    (a newer server's, as ``operator_runs`` was) are ignored, not refused: the contract
    refuses unknown fields where it checks what a caller sends, not what a server answers."""
    return ProfileReport.model_validate(body, extra="ignore")
