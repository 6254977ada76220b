"""JSON shapes of the artifact routes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from pteforge.contracts.artifact_report import AS_WRITTEN, CompileReport, Numerics
from pteforge.contracts.json_types import JsonValue
from pteforge.contracts.llm_runner import GenerationInfo
from pteforge.contracts.plan import PlanSpec
from pteforge.server.programs.schemas import Methods
from pteforge.server.startup.toolchain import Toolchain, toolchain
from pteforge.storage.domain import Artifact

NUMERICS_KEY = "numerics"  # where a compile job stores the numerics check in the report
GENERATION_KEY = "generation"  # where the runner metadata of a language model is stored


class DataFileOut(BaseModel):
    """The `.ptd` (FlatTensor) holding the constants an artifact's `.pte` keeps outside."""

    sha256: str
    size_bytes: int


class ArtifactOut(BaseModel):
    """An artifact: the `.pte` digest, what it was built from, the manager's report and the
    numerics check of the compiled methods against the exported program."""

    id: str
    sha256: str
    size_bytes: int
    program_id: str | None
    plan: Annotated[PlanSpec, AS_WRITTEN] = Field(
        description="The plan as submitted, without parts that mean the same as leaving them "
        "out; {} for uploaded .pte files."
    )
    methods: Methods
    report: Annotated[CompileReport, AS_WRITTEN]
    numerics: Annotated[Numerics | None, AS_WRITTEN] = Field(
        description=(
            "Each method run in the native runtime on the program's example inputs against "
            "the exported program: per output max_abs_error, max_rel_error (max|a-b| / "
            "max|b|), sqnr_db; status passed, over_tolerance, not_executable or error, and "
            "flagged. Null for uploaded .pte files and artifacts compiled before the check."
        )
    )
    generation: GenerationInfo | None = Field(
        default=None,
        description=(
            "For a language model in ExecuTorch's LLM runner convention (a forward(tokens, "
            "input_pos) method and the runner's metadata methods): the generating method and "
            "what get_max_seq_len, get_bos_id, get_eos_ids, use_kv_cache, get_vocab_size, ... "
            "answered, read in a confined child. Null for any other program."
        ),
    )
    data: DataFileOut | None = Field(
        default=None,
        description=(
            "The .ptd holding the constants the .pte keeps outside (ExecuTorch's program-data "
            "separation), uploaded with it and loaded with it everywhere; download it from "
            "/v1/artifacts/{id}/ptd. Null for a self-contained .pte."
        ),
    )
    created_at: datetime
    toolchain: Toolchain = Field(
        default_factory=toolchain, description="torch and executorch versions of this server."
    )

    @classmethod
    def of(cls, artifact: Artifact) -> ArtifactOut:
        report = {
            k: v for k, v in artifact.report.items() if k not in (NUMERICS_KEY, GENERATION_KEY)
        }
        return cls(
            id=artifact.id,
            sha256=artifact.sha256,
            size_bytes=artifact.size_bytes,
            program_id=artifact.program_id,
            plan=PlanSpec.model_validate(artifact.plan),
            methods=list(artifact.methods),
            report=CompileReport.model_validate(report),
            numerics=_numerics(artifact.report.get(NUMERICS_KEY)),
            generation=_generation(artifact.report.get(GENERATION_KEY)),
            data=None
            if artifact.data is None
            else DataFileOut(sha256=artifact.data.sha256, size_bytes=artifact.data.size),
            created_at=artifact.created_at,
        )


def _numerics(stored: JsonValue) -> Numerics | None:
    return None if stored is None else Numerics.model_validate(stored)


def _generation(stored: JsonValue) -> GenerationInfo | None:
    return None if stored is None else GenerationInfo.model_validate(stored)


class ArtifactList(BaseModel):
    """``GET /v1/artifacts``: newest first."""

    artifacts: list[ArtifactOut]
