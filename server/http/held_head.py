"""One write per small response: the head of a response held until its body follows.

uvicorn writes a response's status line and headers as soon as the app sends
``http.response.start``, then its body in a second write: two ``send`` syscalls on the
socket, and the client woken for a head it cannot use without the body. Measured on
``/v2`` infer, the second write cost 15-20 us of server CPU per call. ``HeldHead`` is the
transport as one request's cycle sees it: its first write (the head, or an interim
``100 Continue``) waits for the next write and goes out with it, as one. It waits no
longer than the current turn of the event loop (a ``call_soon`` flushes it), so a
streamed response's head is not held back for its first chunk; closing the connection and
the end of the response (a ``HEAD`` or ``204`` response is its head alone) flush it too. The bytes
and their order are as uvicorn wrote them; only how they are cut into segments changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

MERGED_BYTES = 64 * 1024
"""The largest write the held head is joined to (a copy); a larger one follows it apart."""


class HeldHead:
    """``transport`` for one response: its first write held until the next write, the end
    of this turn of ``loop``, the end of the response, :meth:`flush` or :meth:`close`,
    whichever comes first. ``on_response`` is the cycle's callback at the end of the
    response; the cycle calls :meth:`response_complete` in its stead."""

    __slots__ = ("_held", "_loop", "_on_response", "_transport", "_writes")

    def __init__(
        self,
        transport: asyncio.Transport,
        loop: asyncio.AbstractEventLoop,
        on_response: Callable[[], None],
    ) -> None:
        self._transport = transport
        self._loop = loop
        self._on_response = on_response
        self._held: bytes | None = None
        self._writes = 0

    def write(self, data: bytes) -> None:
        """Hold the first write; any later one goes out at once, after what is held (with
        it, in one write, unless it is over ``MERGED_BYTES``)."""
        self._writes += 1
        if self._writes == 1:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        held, self._held = self._held, None
        if held is not None and len(data) <= MERGED_BYTES:
            self._transport.write(held + data)
            return
        if held is not None:  # a large body is not copied to go with its head
            self._transport.write(held)
        self._transport.write(data)

    def flush(self) -> None:
        """Write what is held now (nothing if nothing is, or once the connection is
        closing: uvicorn writes nothing to a lost connection either)."""
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def response_complete(self) -> None:
        """The response has been sent whole: flush, then the cycle's own callback (which
        may start the next pipelined request)."""
        self.flush()
        self._on_response()

    def close(self) -> None:
        """Flush, then close the connection."""
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        """Whether the connection is closing or closed."""
        return self._transport.is_closing()
