"""What ``Client`` and ``AsyncClient`` share besides the operations: how one is set up
(credentials, the httpx client, the retry policy). Only sending and receiving differ."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import httpx

from pteforge.client.calls import RetryPolicy
from pteforge.client.config import InvalidURLError, load_credentials
from pteforge.client.operations import Operations
from pteforge.client.transport import DEFAULT_TIMEOUT, client_options

H = TypeVar("H", httpx.Client, httpx.AsyncClient)


class ClientCore(Generic[H]):
    """A pteforge service. ``url`` and ``token`` default to ``PTEFORGE_URL`` and
    ``PTEFORGE_TOKEN``, then to what ``pteforge login`` saved. Idempotent calls are retried
    on 503 and broken connections (``retries`` times, with backoff)."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 4,
    ) -> None:
        creds = load_credentials(url, token)
        self.url = creds.url  # normalised by load_credentials: a scheme, no trailing slash
        try:
            self._http: H = self._open(client_options(creds.url, creds.token, timeout))
        except httpx.InvalidURL as exc:  # a URL base_url let through but httpx refuses
            raise InvalidURLError(f"{creds.url!r} is not a server URL: {exc}") from None
        self._ops = Operations()
        self._policy = RetryPolicy(retries=retries)

    def _open(self, options: dict[str, Any]) -> H:
        """The httpx client (sync or async) made with ``options``."""
        raise NotImplementedError
