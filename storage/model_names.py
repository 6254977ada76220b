"""The store's contract for model names: a project's stable names for series of artifact
versions (``tx.models``; see :mod:`pteforge.storage.store` for the rest of the contract)."""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod

from pteforge.storage.domain import BlobRef, Model, ModelTokenizer, ModelVersion, ServedVersion

MAX_VERSION = 2**31 - 1
"""The largest number a version can have (its column is a 32-bit integer): a larger one
names no version."""


class ModelRepository(ABC):
    """Models and their versions, seen within one project (another project's model is as
    absent as a missing one). Version numbers count from 1 and are never reused."""

    @abstractmethod
    def add_version(self, project_id: str, name: str, artifact_id: str) -> ModelVersion:
        """The next version of model ``name`` (created with its first version), serving the
        project's artifact ``artifact_id``; NotFoundError if the project has no such artifact.
        Concurrent calls never hand out one number twice."""

    @abstractmethod
    def get(self, project_id: str, name: str) -> Model | None:
        """The model, or None."""

    @abstractmethod
    def list(self, project_id: str, limit: int = 100) -> builtins.list[Model]:
        """The project's models, by name."""

    @abstractmethod
    def versions(self, project_id: str, name: str) -> builtins.list[ModelVersion]:
        """The model's versions, oldest first (empty when it has none or does not exist)."""

    @abstractmethod
    def all_versions(self, project_id: str, limit: int) -> builtins.list[tuple[str, ModelVersion]]:
        """The project's model versions with their model's name, by name then version, at
        most ``limit`` of them (one query, however many models)."""

    @abstractmethod
    def artifact_id(self, project_id: str, name: str, version: int | None = None) -> str | None:
        """The artifact of that version of the model (its latest when ``version`` is None),
        or None when there is no such version."""

    @abstractmethod
    def served(
        self, project_id: str, name: str, version: int | None = None
    ) -> ServedVersion | None:
        """That version of the model (its latest when ``version`` is None) with its artifact's
        content and its tokenizer, in one query; None when there is no such version."""

    @abstractmethod
    def delete_version(self, project_id: str, name: str, version: int) -> bool:
        """Delete one version (its artifact stays); False if there is no such version."""

    @abstractmethod
    def set_tokenizer(
        self, project_id: str, name: str, version: int, tokenizer: BlobRef, config: BlobRef | None
    ) -> ModelTokenizer:
        """Attach a tokenizer (content already in the blob store) to the version, replacing
        the one it had; NotFoundError if the project has no such version."""

    @abstractmethod
    def tokenizer(self, project_id: str, name: str, version: int) -> ModelTokenizer | None:
        """The tokenizer attached to that version, or None."""
