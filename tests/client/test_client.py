"""The sync client against a real server: upload, compile with live stages, infer, list,
delete, cancel, and the error classes of the service's codes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pteforge.client import (
    Artifact,
    Client,
    InvalidInputError,
    InvalidPlanError,
    Job,
    LoweringFailedError,
    NotFoundError,
    NumericsWarning,
    Program,
    UnauthorizedError,
    UploadRejectedError,
)
from tests.client.conftest import MIXED_PLAN, OVER_TOLERANCE_PLAN
from tests.models import MultiMethod, unsupported_op_programs
from tests.server.service import ServiceProcess


def test_upload_from_exported_programs_and_paths_agree(
    client: Client, program: Program, seq2seq_files: dict[str, Path]
) -> None:
    from_paths = client.upload_program(seq2seq_files, name="from-paths")
    assert from_paths.name == "from-paths"
    assert {m.name for m in program.methods} == {"encode", "decode"}
    assert from_paths.methods == program.methods
    decode = next(m for m in program.methods if m.name == "decode")
    assert [t.shape for t in decode.inputs] == [(1, 4), (1, 8, 32)]
    assert client.get_program(program.id) == program


def test_a_lone_exported_program_is_forward(client: Client) -> None:
    """``upload_program(ep)``, as upstream's ``to_edge(ep)``, names the method ``forward``
    (it raised ``AttributeError: 'ExportedProgram' object has no attribute 'items'``)."""
    exported = torch.export.export(torch.nn.Linear(4, 2), (torch.randn(1, 4),))
    lone = client.upload_program(exported, name="lone")
    assert [m.name for m in lone.methods] == ["forward"]


def test_compiling_again_reuses_the_artifact(
    client: Client, program: Program, artifact: Artifact
) -> None:
    seen: list[Job] = []
    again = client.compile(program, MIXED_PLAN, on_stage=seen.append)
    assert again == artifact
    assert seen[0].status in {"queued", "succeeded"} and seen[-1].status == "succeeded"
    assert seen[-1].artifact_id == artifact.id and seen[-1].done
    assert all(job.id == seen[0].id for job in seen)


def test_first_compile_streamed_every_stage(artifact: Artifact, compile_events: list[Job]) -> None:
    stages = [job.stage for job in compile_events if job.status == "running" and job.stage]
    expected = ["loading", "to_edge", "partition", "preprocess", "emit", "store"]
    assert [s for s in stages if s in expected] == expected
    assert compile_events[0].status == "queued" and compile_events[-1].status == "succeeded"


def test_infer_matches_eager(client: Client, artifact: Artifact, seq2seq: MultiMethod) -> None:
    tokens, memory = seq2seq.inputs["decode"]
    expected = seq2seq.eager["decode"](tokens, memory).detach().numpy()
    by_position = client.infer(artifact, "decode", [tokens, memory.numpy()])  # torch and numpy
    (logits,) = by_position
    assert isinstance(logits, np.ndarray) and logits.flags.writeable
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4)
    names = [t.name for t in artifact.method("decode").inputs]  # type: ignore[union-attr]
    by_name = client.infer(artifact.id, "decode", dict(zip(names, [tokens, memory], strict=True)))
    np.testing.assert_array_equal(by_name[0], logits)
    assert by_name.parameters["execute_ms"] >= 0


def test_infer_by_id_asks_for_the_input_names(
    service: ServiceProcess, token: str, artifact: Artifact, seq2seq: MultiMethod
) -> None:
    with Client(service.url, token) as fresh:  # nothing cached: GET /v2/models/{model} first
        (encoded,) = fresh.infer(artifact.id, "encode", list(seq2seq.inputs["encode"]))
    expected = seq2seq.eager["encode"](*seq2seq.inputs["encode"]).detach().numpy()
    np.testing.assert_allclose(encoded, expected, rtol=1e-4, atol=1e-4)


def test_bad_tensors_raise_invalid_input(client: Client, artifact: Artifact) -> None:
    with pytest.raises(InvalidInputError) as info:
        client.infer(artifact, "encode", [np.zeros((1, 8), dtype=np.float32)])
    assert info.value.status == 400 and info.value.message
    with pytest.raises(InvalidInputError, match="2 inputs"):
        client.infer(artifact, "decode", [np.zeros((1, 4), dtype=np.int64)])


def test_errors_carry_the_service_codes(
    client: Client, service: ServiceProcess, program: Program, tmp_path: Path
) -> None:
    with pytest.raises(NotFoundError) as missing:
        client.get_program("prog_missing")
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    with Client(service.url, "ptf_not-a-token") as stranger, pytest.raises(UnauthorizedError):
        stranger.list_programs()
    with pytest.raises(InvalidPlanError) as bad_plan:
        client.compile(program, {"all": {"partitioners": 5}})
    assert bad_plan.value.code == "invalid_plan" and bad_plan.value.status == 422
    with pytest.raises(InvalidPlanError, match="must be an object, not a string"):
        client.compile(program, "xnnpack")  # type: ignore[call-overload]
    junk = tmp_path / "junk.pt2"
    junk.write_bytes(b"not a zip archive")
    with pytest.raises(UploadRejectedError) as rejected:
        client.upload_program({"forward": junk})
    assert rejected.value.code == "not_a_zip"


def test_an_artifact_over_its_tolerance_warns(client: Client, program: Program) -> None:
    """The artifact comes back as ever, with a ``NumericsWarning`` naming the method, the
    measured error and the limit."""
    said = r"method '\w+' is over its numerics tolerance: max_rel_error \S+ > limit 1e-30 \("
    with pytest.warns(NumericsWarning, match=said):
        artifact = client.compile(program, OVER_TOLERANCE_PLAN)
    assert isinstance(artifact, Artifact)
    assert artifact.numerics is not None and artifact.numerics["status"] == "over_tolerance"


def test_a_failed_job_raises_its_code_with_the_job(client: Client) -> None:
    model = unsupported_op_programs()
    program = client.upload_program(model.programs, name="unsupported")
    plan = {"all": {"delegate": {"backend_id": "XnnpackBackend", "compile_specs": []}}}
    with pytest.raises(LoweringFailedError) as info:
        client.compile(program, plan)
    job = info.value.job
    assert job is not None and job.status == "failed" and job.error is not None
    assert job.error.code == "lowering_failed" and "embedding" in info.value.message


def test_list_delete_and_cancel(client: Client, seq2seq_files: dict[str, Path]) -> None:
    program = client.upload_program(seq2seq_files, name="to-delete")
    assert program.id in [p.id for p in client.list_programs()]
    job = client.compile(program, {}, wait=False)
    assert isinstance(job, Job) and job.id in [j.id for j in client.list_jobs()]
    canceled = client.cancel_job(job)
    assert canceled.id == job.id and canceled.status in {"canceled", "running", "failed"}
    client.delete_program(program)
    with pytest.raises(NotFoundError):
        client.get_program(program)
    with pytest.raises(NotFoundError):  # a second delete is not "retried" into success
        client.delete_program(program.id)


def test_tensors_numpy_cannot_hold_are_refused(client: Client, artifact: Artifact) -> None:
    with pytest.raises(InvalidInputError, match="ComplexHalf"):
        client.infer(artifact, "encode", [torch.zeros(1, 8, dtype=torch.complex32)])
