"""JSON shape of ``GET /v1/backends``: one catalog entry (or program-wide plan option)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pteforge.backends.kinds import EntryKind
from pteforge.contracts.json_types import JsonObject
from pteforge.server.startup.host import HostOut

HOST_KIND: Literal["host"] = "host"


class CatalogEntryOut(BaseModel):
    """A lowering target of the catalog (``BaseEntry.describe``), or a program-wide plan
    option in the same shape (kind ``plan_option``). Delegate entries add the backend ids
    they accept and those this host's runtime can execute. The last entry (kind ``host``)
    describes this host: the confinement of the processes that touch uploads, and the
    toolchain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The name a plan uses (a partitioner, recipe or plan key).")
    kind: Literal[
        EntryKind.PORTABLE,
        EntryKind.PARTITIONER,
        EntryKind.DELEGATE,
        EntryKind.QUANTIZER,
        "plan_option",
        "host",
    ]
    backend_id: str | None = Field(description="The ExecuTorch backend it lowers to, if any.")
    options_schema: JsonObject = Field(description="JSON schema of the entry's options.")
    can_execute: bool = Field(description="Whether this host's runtime can run its output.")
    description: str
    backend_ids: list[str] | None = Field(
        default=None, description="Delegate entries: every registered backend id accepted."
    )
    executable_backend_ids: list[str] | None = Field(
        default=None, description="Delegate entries: the accepted ids executable here."
    )
    host: HostOut | None = Field(
        default=None,
        description="The host entry: confinement layers of upload-handling children, toolchain.",
    )


def host_entry(host: HostOut) -> CatalogEntryOut:
    """The catalog's last entry, describing this host rather than a target."""
    return CatalogEntryOut(
        name=HOST_KIND,
        kind=HOST_KIND,
        backend_id=None,
        options_schema={},
        can_execute=False,
        description="This host: how processes that handle uploads are confined.",
        host=host,
    )
