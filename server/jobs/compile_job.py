"""Executes one claimed ``compile`` job: dedupe, lower in a child process, store the result
(a ``profile`` job goes to :mod:`profile_job`, on the same standby child and watch).

Each storage write is its own short transaction (the task boundary commits), so a crash
between steps leaves the job running with an expiring lease, never half-written. A lowering
process that dies without a result (killed by a signal) does not fail the job: the attempt
is requeued at once with the reason (``Jobs.retry``), and fails only when none is left.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from pteforge.contracts.errors import ErrorCode
from pteforge.contracts.jobs import (
    COMPILE_KIND,
    PROFILE_KIND,
    CompilePayload,
    LoweringRequest,
    LoweringResult,
)
from pteforge.contracts.json_types import JsonObject
from pteforge.server.artifacts.schemas import NUMERICS_KEY
from pteforge.server.common.blob_files import (
    StorageQuotaError,
    check_quota,
    store_project_files,
)
from pteforge.server.jobs.pipe import LoweringOutcome
from pteforge.server.jobs.runner import (
    StandbyLowering,
    Verdict,
    Watch,
    lowering_context,
    run_lowering,
)
from pteforge.server.settings import Settings
from pteforge.storage.domain import Artifact, Job, JobStatus
from pteforge.storage.errors import ConflictError
from pteforge.storage.store import Store

log = logging.getLogger(__name__)

__all__ = ["COMPILE_KIND", "CompileJobRunner", "stored_report"]


def stored_report(result: LoweringResult) -> JsonObject:
    """The artifact's stored report: the manager's report with the numerics check under
    ``numerics`` (the API shows it as the artifact's own ``numerics`` field)."""
    return {**result.report, NUMERICS_KEY: result.numerics}


class CompileJobRunner:
    """Runs compile jobs for one worker process."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        worker_id: str,
        stopping: Callable[[], bool],
        interrupt: threading.Event | None = None,  # set: check cancel/stopping now
        *,
        scratch_root: Path,  # the worker's own directory: jobs' scratch, all lowering writes
    ) -> None:
        self.store = store
        self.scratch_root = scratch_root
        self.interrupt = interrupt
        self.settings = settings
        self.worker_id = worker_id
        self.stopping = stopping
        self.lease = timedelta(seconds=settings.job_lease_seconds)
        self._standby: StandbyLowering | None = None
        # Warm-up off: nothing starts before the first job (a worker that never lowers
        # never imports the compiler).
        self._ctx = lowering_context(warm_up=True) if settings.compile_warmup else None
        self.prepare()

    def prepare(self) -> None:
        """Start the standby lowering process for the next job, unless one is waiting or
        no fork server runs yet (warm-up off, no job so far)."""
        if self._ctx is None:
            return
        if self._standby is not None and not self._standby.process.is_alive():
            log.warning(
                "standby lowering process died while idle (exit %s); replacing it",
                self._standby.process.exitcode,
            )
            self.close()
        if self._standby is None:
            # warm already: its fork server warmed up (with settings.compile_warmup)
            self._standby = StandbyLowering.start(self._ctx, False, self.scratch_root)

    def close(self) -> None:
        """Stop the waiting standby, if any (the worker is stopping, or it died)."""
        if self._standby is not None:
            self._standby.discard()
            self._standby = None

    def take_standby(self) -> StandbyLowering:
        if self._ctx is None:
            self._ctx = lowering_context()
        self.prepare()
        standby, self._standby = self._standby, None
        assert standby is not None
        return standby

    def run(self, job: Job, scratch: Path) -> None:
        """Take ``job`` to a terminal state (or abandon it if the lease is lost)."""
        if job.kind == PROFILE_KIND:
            from pteforge.server.jobs.profile_job import run_profile_job

            run_profile_job(self, job, scratch)
            return
        payload = CompilePayload.model_validate(job.payload)
        with self.store.transaction() as tx:
            existing = tx.artifacts.find_compiled(payload.program_id, payload.plan_hash)
            program = tx.programs.get(job.project_id, payload.program_id)
        if existing is not None:
            self._succeed(job, existing.id)
            return
        if program is None:
            self.fail(job, ErrorCode.NOT_FOUND, f"program {payload.program_id} no longer exists")
            return
        try:
            self._compile(job, payload, program.sha256, scratch)
        except Exception:
            with self.store.transaction() as tx:
                deleted = tx.programs.get(job.project_id, payload.program_id) is None
            if not deleted:
                raise
            # its content went with it (mid-read) or its artifact row cannot refer to it
            self.fail(job, ErrorCode.NOT_FOUND, f"program {payload.program_id} was deleted")

    def _compile(self, job: Job, payload: CompilePayload, sha256: str, scratch: Path) -> None:
        self.set_stage(job.id, "loading")
        program_path = scratch / "program.pt2"
        self.store.blobs.export_to_file(sha256, program_path)  # verifies sha256
        request = LoweringRequest(
            program_path=str(program_path),
            plan=payload.plan,
            output_path=str(scratch / "out.pte"),
            memory_limit_bytes=self.settings.compile_memory_limit_bytes,
            bundle_path=str(scratch / "out.bpte"),
        )
        outcome, verdict = run_lowering(self.take_standby(), request, self.watch(job.id))
        self._finish(job, payload, outcome, verdict, Path(request.output_path))

    def watch(self, job_id: str) -> Watch:
        def heartbeat() -> str:
            if self.stopping():
                return Verdict.ABANDON
            with self.store.transaction() as tx:
                if tx.jobs.heartbeat(job_id, self.worker_id, self.lease):
                    return Verdict.CONTINUE
                job = tx.jobs.get_any(job_id)
            # A refused heartbeat means the cancel was requested or the lease is gone.
            ours = job is not None and job.worker_id == self.worker_id and not job.status.terminal
            return Verdict.CANCEL if ours and job and job.cancel_requested else Verdict.ABANDON

        return Watch(
            tick_seconds=self.settings.heartbeat_seconds,
            timeout_seconds=self.settings.compile_timeout_seconds,
            heartbeat=heartbeat,
            on_stage=lambda stage: self.set_stage(job_id, stage),
            interrupt=self.interrupt,
        )

    def _finish(
        self, job: Job, payload: CompilePayload, outcome: LoweringOutcome, verdict: str, pte: Path
    ) -> None:
        if verdict != Verdict.CONTINUE or outcome.result is None:
            self.settle(job, outcome, verdict)
        else:
            self.set_stage(job.id, "store")
            try:
                artifact = self._store_artifact(job, payload, outcome.result, pte)
            except StorageQuotaError as exc:
                self.fail(job, exc.code, exc.message)
                return
            self._succeed(job, artifact.id)

    def settle(self, job: Job, outcome: LoweringOutcome, verdict: str) -> None:
        """End a job whose child produced nothing to store: abandoned, canceled, failed, or
        crashed (then retried, see :meth:`_end_attempt`)."""
        if verdict == Verdict.ABANDON:
            log.info("job %s abandoned (lease lost or worker stopping)", job.id)
        elif verdict == Verdict.CANCEL:
            with self.store.transaction() as tx:
                tx.jobs.acknowledge_cancel(job.id, self.worker_id)
        else:
            code = outcome.error_code or ErrorCode.COMPILE_FAILED
            self._end_attempt(job, code, outcome.error_message or code)

    def _end_attempt(self, job: Job, code: str, message: str) -> None:
        """Fail ``job``, unless its lowering process died without a verdict on the job (a
        signal, e.g. the OOM killer's SIGKILL): then it is retried at once while attempts
        remain, or handed back by the worker if it is stopping (its signal may have been
        meant for every process of the worker)."""
        if code != ErrorCode.COMPILE_CRASHED:
            self.fail(job, code, message)
        elif self.stopping():
            log.info("job %s: lowering process ended while stopping: %s", job.id, message)
        else:
            log.warning("job %s: %s; retrying", job.id, message)
            with self.store.transaction() as tx:
                retried = tx.jobs.retry(job.id, self.worker_id, code, message)
            if retried.status is JobStatus.QUEUED:
                log.info("job %s requeued: %s", job.id, retried.retry_reason)

    def _store_artifact(
        self, job: Job, payload: CompilePayload, result: LoweringResult, pte: Path
    ) -> Artifact:
        files = [pte, pte.with_suffix(".bpte")] if result.bundled else [pte]
        blob, *bundled = store_project_files(self.store, self.settings, job.project_id, files)
        bundle = bundled[0] if bundled else None
        try:
            with self.store.transaction() as tx:
                adding = sum(b.size for b in [blob, *bundled])
                check_quota(tx, self.settings, job.project_id, adding)
                return tx.artifacts.create(
                    job.project_id,
                    payload.program_id,
                    blob,
                    payload.plan,
                    payload.plan_hash,
                    stored_report(result),
                    result.methods,
                    bundle,
                )
        except ConflictError:  # an identical job finished first: share its artifact
            with self.store.transaction() as tx:
                found = tx.artifacts.find_compiled(payload.program_id, payload.plan_hash)
            if found is None:
                raise
            return found

    def set_stage(self, job_id: str, stage: str) -> None:
        log.info("job %s: %s", job_id, stage)
        with self.store.transaction() as tx:
            tx.jobs.set_stage(job_id, self.worker_id, stage)

    def _succeed(self, job: Job, artifact_id: str) -> None:
        with self.store.transaction() as tx:
            tx.jobs.succeed(job.id, self.worker_id, artifact_id)

    def fail_quietly(self, job: Job, code: str, message: str) -> None:
        """Fail ``job`` if this worker still holds it; never raises (used on worker errors)."""
        try:
            self.fail(job, code, message)
        except Exception:
            log.exception("job %s: could not record failure", job.id)

    def fail(self, job: Job, code: str, message: str) -> None:
        with self.store.transaction() as tx:
            tx.jobs.fail(job.id, self.worker_id, code, message)
