"""The asyncio client over the same real server: the calls of the sync client, awaited."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import numpy as np
import pytest

from pteforge.client import Artifact, AsyncClient, Job, NotFoundError, Program
from tests.client.conftest import MIXED_PLAN
from tests.models import MultiMethod
from tests.server.service import ServiceProcess


def test_async_flow(
    service: ServiceProcess,
    token: str,
    program: Program,
    artifact: Artifact,
    seq2seq: MultiMethod,
    tmp_path: Path,
) -> None:
    async def flow() -> None:
        async with AsyncClient(service.url, token) as client:
            assert await client.get_program(program.id) == program
            seen: list[Job] = []
            again = await client.compile(program, MIXED_PLAN, on_stage=seen.append)
            assert again == artifact and seen[-1].status == "succeeded"
            path = await client.download(again, tmp_path / "async.pte")
            assert hashlib.sha256(path.read_bytes()).hexdigest() == artifact.sha256
            inputs = list(seq2seq.inputs["encode"])
            calls = [client.infer(artifact, "encode", inputs) for _ in range(4)]
            results = await asyncio.gather(*calls)  # four requests in flight at once
            expected = seq2seq.eager["encode"](*seq2seq.inputs["encode"]).detach().numpy()
            for result in results:
                np.testing.assert_allclose(result[0], expected, rtol=1e-4, atol=1e-4)
            assert artifact.id in [a.id for a in await client.list_artifacts()]
            with pytest.raises(NotFoundError):
                await client.get_job("job_missing")

    asyncio.run(flow())


def test_async_upload_from_paths(
    service: ServiceProcess, token: str, seq2seq_files: dict[str, Path]
) -> None:
    async def upload() -> Program:
        async with AsyncClient(service.url, token) as client:
            return await client.upload_program(seq2seq_files, name="async")

    uploaded = asyncio.run(upload())
    assert uploaded.name == "async" and {m.name for m in uploaded.methods} == {"encode", "decode"}
