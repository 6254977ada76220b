"""Request bodies read into memory under a byte budget, refused (413) as soon as they pass it.

:func:`capped_chunks` is the one place a body is counted while it streams in: the ``/v2``
infer route (``server/inference/routes_infer.py``), multipart uploads (``uploads.py``) and every
``/v1`` route whose body FastAPI decodes as JSON (:class:`CappedJsonRoute`) read through it,
so no body is ever held or parsed past its route's limit, whatever ``Content-Length`` said;
those held in memory count in their project's share (``server/http/memory.py``).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any

from fastapi import HTTPException
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from pteforge.server.auth.dependencies import authenticate_before_body
from pteforge.server.common.services import get_services
from pteforge.server.errors import PayloadTooLargeError, ServiceError, UnsupportedMediaTypeError
from pteforge.server.http.memory import HeldBytes, MemoryRefusal

TooLarge = Callable[[str], Exception]
"""Builds the exception a route answers for a body over its limit (a 413 in its layer)."""

JSON_LIMIT_SETTING = "PTEFORGE_MAX_JSON_BODY_BYTES"
BYTES_PER_CONTAINER = 16
"""A ``/v1`` JSON body may open one array or object per this many bytes of its limit (a
million for 16 MiB). Each takes about 200 bytes once parsed and validated against 2 to 3 in
the text: 16 MiB of ``[[],[],...]`` took 1.2 GB and 22 s; real plans, calibration sets
(rows of numbers) and chats open far fewer."""


def check_content_length(
    request: Request, limit: int, too_large: TooLarge = PayloadTooLargeError
) -> int | None:
    """Refuse early when the client announces a body over ``limit``; the announced size
    (None when the body comes chunked, or the header is not a number)."""
    declared = request.headers.get("content-length", "")
    if not declared.isdigit():
        return None
    if int(declared) > limit:
        raise too_large(f"request body of {declared} bytes exceeds the {limit}-byte limit")
    return int(declared)


async def capped_chunks(
    request: Request,
    limit: int,
    too_large: TooLarge = PayloadTooLargeError,
    held: HeldBytes | None = None,
) -> AsyncIterator[bytes]:
    """The body's chunks as they arrive; ``too_large`` is raised once they pass ``limit``.
    A body kept in memory counts in ``held``: all of an announced size before any of it is
    read (so a request over its share is refused unread), else each chunk as it comes."""
    declared = check_content_length(request, limit, too_large)
    if held is not None and declared is not None:
        held.grow(declared)
    count = held.grow if held is not None and declared is None else None
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:
            raise too_large(f"request body exceeds the {limit}-byte limit")
        if count is not None:
            count(len(chunk))
        yield chunk


async def read_capped(
    request: Request,
    limit: int,
    too_large: TooLarge = PayloadTooLargeError,
    held: HeldBytes | None = None,
) -> bytes:
    """The whole body, at most ``limit`` bytes (``too_large`` past it), counted in ``held``."""
    chunks = capped_chunks(request, limit, too_large, held)
    return b"".join([chunk async for chunk in chunks])


def refuse_content_encoding(request: Request, bodies: str) -> None:
    """415 for a body sent with a ``Content-Encoding`` (``bodies`` names the kind): nothing
    inflates it, so its parser would report the compressed bytes as malformed."""
    encoding = request.headers.get("content-encoding", "identity").lower()
    if encoding != "identity":
        raise UnsupportedMediaTypeError(
            f"Content-Encoding {encoding!r} is not taken on {bodies}: send them as is"
        )


async def read_json_body(
    request: Request, too_large: TooLarge = PayloadTooLargeError, held: HeldBytes | None = None
) -> bytes:
    """A ``/v1`` JSON body, at most ``settings.max_json_body_bytes`` and one array or object
    per :data:`BYTES_PER_CONTAINER` bytes of it; past either ``too_large`` names the limit
    and its setting. FastAPI reads a body whole, and ``[[],[],...]`` takes ~70 times its
    size once parsed and validated: no more than the limit is ever held. It counts in
    ``held`` (its project's share of the requests in flight) as it arrives.
    A compressed body is refused (415): FastAPI would not inflate it."""
    refuse_content_encoding(request, "JSON bodies")  # /v2 generate reads through here too
    limit = get_services(request).settings.max_json_body_bytes

    def refused(message: str) -> Exception:
        return too_large(f"{message} of JSON bodies ({JSON_LIMIT_SETTING})")

    body = await read_capped(request, limit, refused, held)
    opened = body.count(b"[") + body.count(b"{")  # brackets in strings count too: a bound
    if opened > (most := limit // BYTES_PER_CONTAINER):
        raise refused(
            f"request body opens {opened} arrays and objects, more than {most}: one per "
            f"{BYTES_PER_CONTAINER} bytes of the {limit}-byte limit"
        )
    return body


class CappedJsonRoute(APIRoute):
    """An authenticated ``/v1`` ``APIRoute`` whose JSON body is read by
    :func:`read_json_body` before FastAPI decodes it, and only once the caller is
    authenticated (:func:`authenticate_before_body`, 401 first): a larger body is a 413
    ``payload_too_large``. Routes without a body parameter (those that stream an upload
    themselves) are untouched: FastAPI solves their dependencies, auth among them, first."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def capped(request: Request) -> Response:
            principal = await authenticate_before_body(request)
            with held_in_v1(request, principal.project_id) as held:
                try:
                    # Starlette's Request.body() returns what it finds in _body; FastAPI
                    # decodes that.
                    request._body = await read_json_body(request, held=held)
                except MemoryRefusal as refused:
                    raise refused_in_v1(refused) from None
                if request._body:
                    check_json_content_type(request)
                    _decode_json(request)
                return await handler(request)

        return capped


def _decode_json(request: Request) -> None:
    """Decode the body for FastAPI (``Request.json()`` keeps it). A body nested past the
    decoder's depth answered "There was an error parsing the body", naming nothing; it is
    a 400 saying so. Invalid JSON is left to FastAPI, whose answer names where it broke."""
    try:
        request._json = json.loads(request._body)
    except RecursionError:
        raise ServiceError("the JSON body nests too deeply to be decoded") from None
    except ValueError:
        return
    if _SURROGATE_ESCAPE.search(request._body):
        _refuse_lone_surrogates(request._json)


# JSON may escape a UTF-16 surrogate alone (``"\ud800"``): Python decodes it into a string
# no database or encoder takes, which answered a 500 (``UnicodeEncodeError``) from the
# routes that store or look up what it names. Only a body with such an escape is checked.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _refuse_lone_surrogates(document: Any) -> None:
    """A 400 if ``document`` holds a string with a lone surrogate (a pair decodes to one
    character, which encodes)."""
    try:
        json.dumps(document, ensure_ascii=False).encode()
    except RecursionError:
        raise ServiceError("the JSON body nests too deeply to be decoded") from None
    except UnicodeEncodeError as bad:
        raise ServiceError(
            f"the JSON body holds a lone UTF-16 surrogate ({bad.object[bad.start]!r} without "
            "its pair), which is not text"
        ) from None


def check_json_content_type(request: Request) -> None:
    """Refuse (415) a body sent as anything but JSON: FastAPI would not decode it and
    answered 'Input should be a valid dictionary', which names neither the header nor the
    fix (``curl -d`` sends ``application/x-www-form-urlencoded``)."""
    sent = request.headers.get("content-type", "")
    kind, _, subtype = sent.partition(";")[0].strip().lower().partition("/")
    if kind == "application" and (subtype == "json" or subtype.endswith("+json")):
        return
    got = f"Content-Type {sent!r}" if sent else "no Content-Type"
    raise UnsupportedMediaTypeError(
        f"expected a JSON body with Content-Type: application/json, got {got} "
        "(with curl: -H 'content-type: application/json')"
    )


@contextlib.contextmanager
def held_in_v1(request: Request, project_id: str) -> Iterator[HeldBytes]:
    """The request's place among its project's requests in flight, and the bytes it holds
    (``RequestMemory.holding``), for a ``/v1`` route: refused in ``/v1``'s error shape."""
    try:
        held = get_services(request).memory.holding(project_id)
    except MemoryRefusal as refused:
        raise refused_in_v1(refused) from None
    with held:
        yield held


def refused_in_v1(refused: MemoryRefusal) -> HTTPException:
    """A memory refusal in ``/v1``'s error shape (code ``too_many_requests``, ...)."""
    retry = {} if refused.retry_after_s is None else {"Retry-After": str(refused.retry_after_s)}
    return HTTPException(refused.status, str(refused), headers=retry)
