"""XNNPACK's packed-weight cache in a worker, kept to programs whose weights it tells apart.

The cache (``XnnpackBackend``'s, one per process) finds a weight's packed copy by the
weight's named-data key, and XNNPACK's serializer makes that key the sha256 of the weight's
bytes alone (ExecuTorch 1.5.1). Two weights with the same bytes and different shapes (a
``[8, 4]`` and a ``[4, 8]`` linear, zero-initialised layers, two models drawn from one random
seed) share a key: the second one loaded runs on the first one's packed layout and gives
wrong outputs, without an error. The cache is there so that the methods of one program
(prefill and decode) pack their shared weights once; across programs it is only a saving.
So a program whose named data another program loaded in this worker already brought loads
its methods with the cache off: its methods then pack their own copies.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from pteforge.runtime.metadata import ProgramFlatbuffer, program_table

log = logging.getLogger(__name__)

Loading = Callable[[], AbstractContextManager[None]]
"""What a program instance wraps each method load in (the cache's setting for it)."""


class WeightCache:
    """The worker's packed-weight cache (on when ``library``, the options shim, is given),
    and which program first brought each named-data key."""

    def __init__(self, library: Path | None) -> None:
        from pteforge.runtime.native import set_xnnpack_weight_cache

        self._library = library
        self._set = set_xnnpack_weight_cache
        self.enabled = library is not None and set_xnnpack_weight_cache(library, True)
        self._owners: dict[str, str] = {}

    def admit(self, sha256: str, flatbuffer: ProgramFlatbuffer) -> Loading:
        """How program ``sha256`` loads its methods: with the cache unless another program
        brought one of its named-data keys (or its flatbuffer cannot be read)."""
        if not self.enabled:
            return contextlib.nullcontext
        try:
            keys = [entry.key for entry in program_table(flatbuffer).named_data or ()]
        except Exception:  # unreadable: the load reports it; no sharing meanwhile
            return self._without
        if any(self._owners.get(key, sha256) != sha256 for key in keys):
            log.info("program %s shares weight keys with another: weight cache off", sha256)
            return self._without
        self._owners.update(dict.fromkeys(keys, sha256))
        return contextlib.nullcontext

    @contextlib.contextmanager
    def _without(self) -> Iterator[None]:
        assert self._library is not None
        self._set(self._library, False)
        try:
            yield
        finally:
            self._set(self._library, True)
