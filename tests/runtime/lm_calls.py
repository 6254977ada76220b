"""A whole generation through ``RuntimePool.generate_async`` on a tiny LM's files, for the
runtime's generation tests."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from pteforge.contracts.generation import GenerationEvent, GenerationRequest
from pteforge.runtime import RuntimePool
from tests.generation.lm_builder import LmFiles


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def generated(
    pool: RuntimePool, lm: LmFiles, config: Path | None = None, **fields: object
) -> list[GenerationEvent]:
    """Every event of the generation ``fields`` ask for (``config``: a tokenizer config),
    in project ``project-a``."""

    async def collect() -> list[GenerationEvent]:
        stream = pool.generate_async(
            sha256_of(lm.pte),
            lm.pte,
            GenerationRequest.model_validate(fields),
            tokenizer=(sha256_of(lm.tokenizer_json), lm.tokenizer_json),
            tokenizer_config=None if config is None else (sha256_of(config), config),
            scope="project-a",
        )
        return [event async for event in stream]

    return asyncio.run(collect())
