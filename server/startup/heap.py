"""Keeping the garbage collector's full passes off the request path."""

from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    """Move every object alive after startup out of the collector's reach (the server at the
    end of its lifespan startup, a lowering child once warmed up).

    torch, ExecuTorch and the backend catalog leave millions of long-lived objects behind;
    a full (generation 2) collection walks them all, about 450 ms on the reference machine,
    and every request waits for it: it was the p99 of the ``/v1`` reads. Frozen objects
    are still freed by reference counting; only cycles among them are never collected, so
    the garbage of startup is collected first.
    """
    gc.collect()
    gc.freeze()
