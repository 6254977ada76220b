"""The FastAPI dependency that turns ``Authorization: Bearer`` into the caller's project."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from starlette.concurrency import run_in_threadpool

from pteforge.server.auth.cache import TtlCache
from pteforge.server.common.services import Services, get_services
from pteforge.server.errors import UnauthorizedError
from pteforge.storage.store import Store

DEFAULT_TOKEN_TTL_S = 1.0
"""How long ``cached_principal`` trusts a resolved token: a revoked token may still be
accepted for up to this many seconds on the routes that use it (``/v2``)."""

_bearer = HTTPBearer(auto_error=False, description="A token from `pteforge tokens create`.")


class HasHeaders(Protocol):
    """What token auth reads of a call: its headers (a request's, or gRPC metadata)."""

    @property
    def headers(self) -> Mapping[str, str]:
        """Lower-case header names to values (``authorization``: ``Bearer <token>``)."""
        ...


@dataclass(frozen=True)
class Principal:
    """Who is calling: the token and the one project it may see."""

    project_id: str
    token_id: str


def authorization_of(call: HasHeaders) -> str | None:
    """The ``Authorization`` header of a request or gRPC call; 401 when it has more than one:
    /v1 and /v2 read the first and gRPC the last, while a proxy in front may check or add
    another, so two are never taken."""
    headers = call.headers
    getlist = getattr(headers, "getlist", None)
    values = getlist("authorization") if getlist else [headers.get("authorization")]
    if len(values) > 1:
        raise UnauthorizedError(f"the request has {len(values)} Authorization headers: send one")
    return values[0] if values else None


def no_bearer_token(authorization: str | None) -> UnauthorizedError:
    """The 401 for a call without a bearer token, saying what came instead: a token sent
    without its ``Bearer`` scheme (``-H "Authorization: $TOKEN"``) was 'missing'. The
    header's value is never quoted: it may be the token."""
    if not authorization:
        return UnauthorizedError("missing bearer token (Authorization: Bearer <token>)")
    scheme, token = get_authorization_scheme_param(authorization)
    if scheme.lower() == "bearer":
        why = "its token is empty"
    elif token and scheme.isalpha() and len(scheme) <= 16:
        why = f"its scheme is {scheme!r}"
    else:
        why = "it has no scheme"
    return UnauthorizedError(f"the Authorization header is not 'Bearer <token>': {why}")


def resolve_bearer(
    services: Services, credentials: HTTPAuthorizationCredentials | None, authorization: str | None
) -> Principal:
    """The principal of a bearer credential; 401 when it is missing or unknown."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise no_bearer_token(authorization)
    return resolve_token(services.store, credentials.credentials)


def resolve_token(store: Store, plaintext: str) -> Principal:
    """The principal of a live token (one read-only transaction); 401 when it is unknown."""
    with store.transaction(read_only=True) as tx:
        resolved = tx.tokens.resolve(plaintext)
    if resolved is None:
        raise UnauthorizedError("invalid or revoked token")
    token, project = resolved
    return Principal(project_id=project.id, token_id=token.id)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None for any other."""
    scheme, token = get_authorization_scheme_param(authorization)
    return token if token and scheme.lower() == "bearer" else None


def token_is_live(store: Store, authorization: str | None) -> bool:
    """Whether the bearer token of an ``Authorization`` header that was accepted earlier
    still resolves (not revoked, its project still there): asked again by long streams."""
    token = bearer_token(authorization)
    if token is None:
        return False
    try:
        resolve_token(store, token)
    except UnauthorizedError:
        return False
    return True


async def require_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Dependency: the authenticated caller (its token is read in the threadpool), or the
    one :func:`authenticate_before_body` already found for this request."""
    known: Principal | None = getattr(request.state, "principal", None)
    if known is not None:
        return known
    authorization = authorization_of(request)
    return await run_in_threadpool(
        resolve_bearer, get_services(request), credentials, authorization
    )


async def authenticate_before_body(request: Request) -> Principal:
    """The caller of a request whose body is not read yet (401 if it cannot be), kept for
    :func:`require_principal`. FastAPI reads a JSON body before it solves a
    route's dependencies, so without this a client with no token at all made the server
    read and hold 16 MiB per connection (30 connections: 480 MB) before answering 401."""
    authorization = authorization_of(request)
    token = bearer_token(authorization)
    if token is None:
        raise no_bearer_token(authorization)
    store = get_services(request).store
    principal = await run_in_threadpool(resolve_token, store, token)
    request.state.principal = principal
    return principal


CurrentPrincipal = Annotated[Principal, Depends(require_principal)]


def cached_principal(
    store: Store, cache: TtlCache[str, Principal]
) -> Callable[[HasHeaders], Coroutine[Any, Any, Principal]]:
    """An async function of the request (or gRPC call), for ``/v2`` and gRPC, that
    authenticates like ``require_principal`` but remembers each resolved token in ``cache``
    (keyed by the token's sha256, never the token itself) for ``cache.ttl_s`` seconds.

    A hit costs no database transaction and no thread hop; a miss resolves in the
    threadpool. Unknown tokens are not cached, so a new token works at once; a revoked one
    is refused once its entry expires.
    """

    async def principal_of(request: HasHeaders) -> Principal:
        authorization = authorization_of(request)
        token = bearer_token(authorization)
        if token is None:
            raise no_bearer_token(authorization)
        key = hashlib.sha256(token.encode()).hexdigest()
        principal = cache.get(key)
        if principal is None:
            principal = await run_in_threadpool(resolve_token, store, token)
            cache.put(key, principal)
        return principal

    return principal_of
