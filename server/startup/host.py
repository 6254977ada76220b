"""What this host gives the processes that touch uploads, probed once at startup.

The confinement layers (:func:`pteforge.children.confine.host_layers`) are logged when the
service or a compile-only node starts, a missing one as a warning that says why, and shown
as the host entry of ``GET /v1/backends``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pteforge.children.confine import ConfinementLayers, host_layers, python_read_roots
from pteforge.server.startup.toolchain import Toolchain, toolchain

log = logging.getLogger(__name__)

_LAYER_NAMES = {
    "clean_environment": "minimal environment (no PTEFORGE_* variables)",
    "network_namespace": "network namespace",
    "capabilities_dropped": "no capabilities",
    "dedicated_uid": "a dedicated unprivileged uid",
    "landlock_abi": "Landlock",
    "seccomp": "seccomp filter",
}


class HostOut(BaseModel):
    """The host entry's ``host`` field: confinement layers in force for upload-handling
    children, and the toolchain versions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    confinement: ConfinementLayers
    toolchain: Toolchain


def missing_layers(layers: ConfinementLayers) -> list[str]:
    """The layers a child does not get here (capabilities and uid count only for root)."""
    root_only = {"capabilities_dropped", "dedicated_uid"}
    return [
        name
        for key, name in _LAYER_NAMES.items()
        if not getattr(layers, key) and not (key in root_only and os.geteuid())
    ]


def readable_home_note(home: Path) -> str | None:
    """Why ``home`` is not protected from confined children, if it lies where they may read
    (the source tree or the Python installation): its database would be readable."""
    resolved = home.resolve()
    for root in python_read_roots():
        if resolved.is_relative_to(root):
            return f"PTEFORGE_HOME {home} lies inside {root}, which confined children may read"
    return None


def report_confinement(home: Path | None = None) -> HostOut:
    """Probe the confinement children get on this host, log it, and return the host entry
    (``home``: the service's ``PTEFORGE_HOME``, checked to be out of the children's reach)."""
    layers = host_layers()
    note = readable_home_note(home) if home is not None else None
    if note is not None:
        log.warning("%s: move it elsewhere", note)
        layers = layers.model_copy(update={"notes": (*layers.notes, note)})
    missing = missing_layers(layers)
    if missing:
        why = "; ".join(layers.notes) or "no reason given"
        log.warning("upload-handling children run WITHOUT %s (%s)", ", ".join(missing), why)
    else:
        log.info(
            "upload-handling children are confined: clean environment, network namespace, "
            "Landlock ABI %d, seccomp%s",
            layers.landlock_abi,
            f", uid {layers.dedicated_uid}, no capabilities" if layers.dedicated_uid else "",
        )
    return HostOut(confinement=layers, toolchain=toolchain())
