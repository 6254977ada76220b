"""Model use-cases: adding, reading and deleting versions, within the caller's project."""

from __future__ import annotations

from pteforge.contracts.names import InvalidModelNameError, check_model_name
from pteforge.server.common.services import Services
from pteforge.server.errors import InvalidRequestError, NotFoundError
from pteforge.storage.domain import Model, ModelVersion


def add_version(services: Services, project_id: str, name: str, artifact_id: str) -> ModelVersion:
    """The next version of ``name`` serving the project's artifact (422 for a name the
    model-name rule refuses, 404 for an artifact the project does not have)."""
    try:
        check_model_name(name)
    except InvalidModelNameError as exc:
        raise InvalidRequestError(str(exc)) from None
    with services.store.transaction() as tx:
        version = tx.models.add_version(project_id, name, artifact_id)
    services.model_changed(project_id, name, version.version)
    return version


def get_model(services: Services, project_id: str, name: str) -> tuple[Model, list[ModelVersion]]:
    """The model and its versions, oldest first, or 404."""
    with services.store.transaction(read_only=True) as tx:
        model = tx.models.get(project_id, name)
        versions = tx.models.versions(project_id, name)
    if model is None:
        raise NotFoundError(f"model {name!r} not found")
    return model, versions


def list_models(services: Services, project_id: str, limit: int) -> list[Model]:
    """The project's models, by name."""
    with services.store.transaction(read_only=True) as tx:
        return tx.models.list(project_id, limit)


def delete_version(services: Services, project_id: str, name: str, version: int) -> None:
    """Delete one version (its artifact stays), or 404."""
    with services.store.transaction() as tx:
        if not tx.models.delete_version(project_id, name, version):
            raise NotFoundError(f"model {name!r} has no version {version}")
    services.model_changed(project_id, name, version)
