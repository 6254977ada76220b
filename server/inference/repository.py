"""Triton's model repository extension, as far as a service that loads on demand has one:
``POST /v2/repository/index`` (gRPC ``RepositoryIndex``) lists the caller's models, and
``POST /v2/repository/models/{model}/load`` (gRPC ``RepositoryModelLoad``) answers once
the model can run, as Triton's does once it loaded it.

Each entry is a method of a model name's version, named as ``/v2`` serves it
(``{name}.{method}``), with its state: ``READY``, or ``UNAVAILABLE`` with the reason for a
method delegated to a backend this host's runtime cannot execute (``/v2`` ready's rule).
Artifact ids are not listed: they are the project's artifacts (``GET /v1/artifacts``).
There is no unload: a runtime worker loads a program at its first request and drops it
when its cache needs the room, so nothing stays loaded that a client must free.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool

from pteforge.contracts.artifact_report import unrunnable_reason
from pteforge.runtime.errors import ProtocolError
from pteforge.runtime.oip_codec import BINARY_EXTENSION
from pteforge.server.auth.dependencies import Principal
from pteforge.server.inference.dependencies import InferenceState
from pteforge.server.inference.model_config import CONFIG_EXTENSION
from pteforge.server.inference.resolver import IndexedVersion
from pteforge.server.inference.sequences import SEQUENCE_EXTENSION
from pteforge.server.inference.work import check_ready

REPOSITORY_EXTENSION = "model_repository"
SERVED_EXTENSIONS = (BINARY_EXTENSION, SEQUENCE_EXTENSION, CONFIG_EXTENSION, REPOSITORY_EXTENSION)
"""The protocol extensions the server metadata lists, over HTTP and gRPC."""
READY, UNAVAILABLE = "READY", "UNAVAILABLE"


@dataclass(frozen=True)
class IndexEntry:
    """One model of the index, as Triton writes it (its version a string)."""

    name: str
    version: str
    state: str
    reason: str


async def repository_index(
    state: InferenceState, principal: Principal, ready_only: bool = False
) -> list[IndexEntry]:
    """The caller's models, by name, version and method; only the ready ones if asked."""
    found = await run_in_threadpool(state.resolver.index, principal)
    entries = [_entry(indexed, method) for indexed in found for method in indexed.artifact.methods]
    return [e for e in entries if e.state == READY] if ready_only else entries


def _entry(indexed: IndexedVersion, method: str) -> IndexEntry:
    missing = indexed.artifact.unrunnable.get(method)
    name, version = f"{indexed.name}.{method}", str(indexed.version)
    if not missing:
        return IndexEntry(name, version, READY, "")
    return IndexEntry(name, version, UNAVAILABLE, unrunnable_reason(missing))


async def load_model(
    state: InferenceState, principal: Principal, model: str, parameters: Iterable[str] = ()
) -> None:
    """Return once ``model`` can run (it loads at its first request); raise as ``/v2``
    ready does: not found (another project's too), or not runnable here. Triton's
    overrides among the request's ``parameters`` (``config``, ``file:...``: a configuration
    or files to load instead of the stored ones) are refused, not ignored."""
    overrides = sorted(p for p in parameters if p == "config" or p.startswith("file:"))
    if overrides:
        raise ProtocolError(
            f"load takes no overrides ({', '.join(o[:64] for o in overrides[:3])}): pteforge "
            "serves each model version as stored; add a version to change one"
        )
    await check_ready(state, principal, model)
