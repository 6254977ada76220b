"""What the sync and async clients share about httpx: the client settings, how a
:class:`Call` becomes request arguments, and which transport errors are worth a retry."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import httpx

from pteforge import __version__
from pteforge.client.calls import Call

# A broken or refused connection, a timeout, a peer that hung up mid-answer.
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (
    httpx.NetworkError,
    httpx.TimeoutException,
    httpx.RemoteProtocolError,
)
# Everything httpx raises while sending: the retryable ones, and those that no retry mends
# (an unsupported protocol, a proxy or TLS failure, too many redirects, a bad URL, ...).
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    httpx.HTTPError,
    httpx.InvalidURL,
    httpx.StreamError,
)
DEFAULT_TIMEOUT = 120.0


def client_options(url: str, token: str, timeout: float) -> dict[str, Any]:
    """Keyword arguments of ``httpx.Client``/``httpx.AsyncClient`` for one service (``url``
    as :func:`pteforge.client.config.base_url` made it)."""
    return {
        "base_url": url,
        "headers": {
            "Authorization": f"Bearer {token}",
            "User-Agent": f"pteforge-client/{__version__}",
        },
        "timeout": httpx.Timeout(timeout, connect=min(timeout, 10.0)),
    }


def request_args(call: Call, stack: ExitStack) -> dict[str, Any]:
    """``build_request`` arguments of ``call``; multipart files are opened on ``stack`` and
    streamed from disk by httpx (never read whole)."""
    args: dict[str, Any] = {
        "method": call.method,
        "url": call.path,
        "params": call.params,
        "headers": call.all_headers(),
    }
    if call.json is not None:
        args["json"] = call.json
    if call.content is not None:
        args["content"] = call.content
    if call.files is not None:
        args["files"] = {
            field: (path.name, stack.enter_context(path.open("rb")), "application/octet-stream")
            for field, path in call.files.items()
        }
        args["data"] = call.data
    return args
