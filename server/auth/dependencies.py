"""The FastAPI dependency that turns ``Authorization: Bearer`` into the caller's project."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pteforge.server.errors import UnauthorizedError
from pteforge.server.services import Services, get_services

_bearer = HTTPBearer(auto_error=False, description="A token from `pteforge tokens create`.")


@dataclass(frozen=True)
class Principal:
    """Who is calling: the token and the one project it may see."""

    project_id: str
    token_id: str


def resolve_bearer(
    services: Services, credentials: HTTPAuthorizationCredentials | None
) -> Principal:
    """The principal of a bearer credential; 401 when it is missing or unknown."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise UnauthorizedError("missing bearer token (Authorization: Bearer <token>)")
    with services.store.transaction() as tx:
        resolved = tx.tokens.resolve(credentials.credentials)
    if resolved is None:
        raise UnauthorizedError("invalid or revoked token")
    token, project = resolved
    return Principal(project_id=project.id, token_id=token.id)


def require_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Dependency: the authenticated caller (runs in the threadpool: it reads the database)."""
    return resolve_bearer(get_services(request), credentials)


CurrentPrincipal = Annotated[Principal, Depends(require_principal)]
