"""Worker process: load a validated pt2 archive and print its description as JSON."""

from __future__ import annotations

from .pt2_loader import describe_programs, load_validated_programs
from .specs import ProgramDescription
from .worker_io import WorkerJob, worker_main


def _job(argv: list[str]) -> ProgramDescription:
    return describe_programs(load_validated_programs(argv[0]))


JOB = WorkerJob(_job, failure_reason="invalid_program")

if __name__ == "__main__":
    worker_main(JOB)
