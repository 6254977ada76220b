"""JSON shapes of the model routes (``GET /v1/models`` is the OpenAI list shape, with
pteforge's fields added)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from pteforge.server.common.schemas import FromAttributes
from pteforge.storage.domain import BlobRef, Model, ModelTokenizer, ModelVersion


class ModelVersionIn(BaseModel):
    """``POST /v1/models/{name}/versions``: the artifact the new version serves."""

    artifact_id: str


class ModelVersionCreated(BaseModel):
    """A new version of a model (the first one created the model)."""

    name: str
    version: int
    artifact_id: str
    created_at: datetime

    @classmethod
    def of(cls, name: str, version: ModelVersion) -> ModelVersionCreated:
        return cls(name=name, **ModelVersionOut.of(version).model_dump())


class ModelVersionOut(FromAttributes):
    """One version of a model."""

    version: int
    artifact_id: str
    created_at: datetime


class ModelOut(BaseModel):
    """A model as ``GET /v1/models`` lists it."""

    id: str = Field(description="The model's name.")
    object: Literal["model"] = "model"
    created: int = Field(description="When the model was created, Unix seconds.")
    owned_by: str = Field(description="The name of the project that owns the model.")
    latest_version: int | None = Field(
        description="The version `/v2/models/{name}.{method}` serves; null when every "
        "version was deleted."
    )

    @classmethod
    def of(cls, model: Model) -> ModelOut:
        return cls(**_fields(model))


class ModelDetail(ModelOut):
    """A model with its versions, oldest first."""

    versions: list[ModelVersionOut]

    @classmethod
    def with_versions(cls, model: Model, versions: list[ModelVersion]) -> ModelDetail:
        return cls(**_fields(model), versions=[ModelVersionOut.of(v) for v in versions])


def _fields(model: Model) -> dict[str, Any]:
    return {
        "id": model.name,
        "created": int(model.created_at.timestamp()),
        "owned_by": model.project_name,
        "latest_version": model.latest_version,
    }


class ModelList(BaseModel):
    """``GET /v1/models``: the project's models, by name."""

    object: Literal["list"] = "list"
    data: list[ModelOut]


class StoredFile(BaseModel):
    """A stored file: its content hash and size."""

    sha256: str
    size_bytes: int

    @classmethod
    def of(cls, blob: BlobRef) -> StoredFile:
        return cls(sha256=blob.sha256, size_bytes=blob.size)


class TokenizerOut(BaseModel):
    """The tokenizer attached to a model version."""

    model: str
    version: int
    tokenizer: StoredFile = Field(description="The `tokenizer.json`.")
    tokenizer_config: StoredFile | None = Field(
        description="The `tokenizer_config.json` (whose `chat_template` chats use), or null."
    )
    created_at: datetime

    @classmethod
    def of(cls, name: str, version: int, found: ModelTokenizer) -> TokenizerOut:
        config = None if found.config is None else StoredFile.of(found.config)
        return cls(
            model=name,
            version=version,
            tokenizer=StoredFile.of(found.tokenizer),
            tokenizer_config=config,
            created_at=found.created_at,
        )
