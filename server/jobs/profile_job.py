"""Executes one claimed ``profile`` job: the artifact's ``.pte`` measured in a lowering child.

A profile job goes through the queue like a compile job (the same worker, standby child,
heartbeats, cancel and crash handling of :class:`CompileJobRunner`); only the request to the
child differs. The child is confined and fresh (see :mod:`profile_child`), since the
``.pte`` may be an upload. The profile is stored with the job (``Job.result``), and the job
names the artifact it profiled.
"""

from __future__ import annotations

from pathlib import Path

from pteforge.contracts.errors import ErrorCode
from pteforge.contracts.jobs import ProfilePayload, ProfileRequest
from pteforge.server.jobs.compile_job import CompileJobRunner
from pteforge.server.jobs.pipe import LoweringOutcome
from pteforge.server.jobs.runner import Verdict, run_lowering
from pteforge.storage.domain import Artifact, Job
from pteforge.storage.errors import NotFoundError


def _request(runner: CompileJobRunner, payload: ProfilePayload, artifact: Artifact,
             scratch: Path) -> ProfileRequest:  # fmt: skip
    """The child's request; the ``.pte`` and its ``.ptd`` (and, for the default inputs, the
    program archive)
    copied into the job's scratch directory, their sha256 verified on the way."""
    pte = scratch / "artifact.pte"
    runner.store.blobs.export_to_file(artifact.sha256, pte)
    if artifact.data is not None:  # loaded from beside the .pte (``data_beside``)
        runner.store.blobs.export_to_file(artifact.data.sha256, pte.with_suffix(".ptd"))
    program_path = None
    if payload.inputs is None and artifact.program_id is not None:
        with runner.store.transaction() as tx:
            program = tx.programs.get(artifact.project_id, artifact.program_id)
        if program is not None:
            program_path = scratch / "program.pt2"
            runner.store.blobs.export_to_file(program.sha256, program_path)
    (signature,) = [m for m in artifact.methods if m.name == payload.method]
    return ProfileRequest(
        pte_path=str(pte), method=payload.method, signature=signature,
        iterations=payload.iterations, inputs=payload.inputs,
        program_path=None if program_path is None else str(program_path),
        memory_limit_bytes=runner.settings.compile_memory_limit_bytes,
    )  # fmt: skip


def _missing(payload: ProfilePayload, artifact: Artifact | None) -> str | None:
    """Why the job cannot run (its artifact or method is gone), or None."""
    if artifact is None:
        return f"artifact {payload.artifact_id!r} no longer exists"
    if not any(m.name == payload.method for m in artifact.methods):
        return f"artifact {artifact.id!r} has no method {payload.method!r}"
    return None


def run_profile_job(runner: CompileJobRunner, job: Job, scratch: Path) -> None:
    """Take the profile ``job`` to a terminal state (or abandon it if the lease is lost)."""
    payload = ProfilePayload.model_validate(job.payload)
    with runner.store.transaction() as tx:
        artifact = tx.artifacts.get(job.project_id, payload.artifact_id)
    missing = _missing(payload, artifact)
    if missing is not None or artifact is None:
        runner.fail(job, ErrorCode.NOT_FOUND, missing or "")
        return
    runner.set_stage(job.id, "loading")
    request = _request(runner, payload, artifact, scratch)
    runner.set_stage(job.id, "profile")
    outcome, verdict = run_lowering(runner.take_standby(), request, runner.watch(job.id))
    _finish(runner, job, artifact.id, outcome, verdict)


def _finish(
    runner: CompileJobRunner, job: Job, artifact_id: str, outcome: LoweringOutcome, verdict: str
) -> None:
    if verdict != Verdict.CONTINUE or outcome.profile is None:
        runner.settle(job, outcome, verdict)
        return
    profile = outcome.profile.model_copy(update={"artifact_id": artifact_id})
    try:
        with runner.store.transaction() as tx:
            result = profile.model_dump(mode="json")
            tx.jobs.succeed(job.id, runner.worker_id, artifact_id, result)
    except NotFoundError:  # deleted while it was measured
        runner.fail(job, ErrorCode.NOT_FOUND, f"artifact {artifact_id!r} no longer exists")
