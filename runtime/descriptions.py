"""What the pool remembers of each artifact it has run: its method signatures and state."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pteforge.contracts.runtime_messages import DescribeReply
from pteforge.runtime.lru import ByteLRU
from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.state import ProgramState

# One small entry per artifact run; bounded so a long-lived server doesn't grow.
DESCRIBED_KEPT = 4096


@dataclass(frozen=True)
class Described:
    """What the pool remembers of an artifact: its method signatures and its state."""

    signatures: dict[str, MethodSignature]
    state: ProgramState

    @classmethod
    def from_reply(cls, reply: DescribeReply) -> Described:
        """The description in a worker's answer to ``describe``."""
        return cls(dict(reply.methods), reply.state)


class Descriptions:
    """The ``Described`` of the last ``kept`` artifacts by sha256 (thread-safe)."""

    def __init__(self, kept: int = DESCRIBED_KEPT) -> None:
        self._entries: ByteLRU[str, Described] = ByteLRU(kept)
        self._lock = threading.Lock()

    def get(self, sha256: str) -> Described | None:
        """The artifact's description if it is known (marking it recently used)."""
        with self._lock:
            return self._entries.get(sha256)

    def __contains__(self, sha256: object) -> bool:
        with self._lock:
            return sha256 in self._entries

    def put(self, sha256: str, described: Described) -> None:
        """Remember ``described``, forgetting the least recently used beyond the bound."""
        with self._lock:
            self._entries.put(sha256, described, 1)
