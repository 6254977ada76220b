"""JSON shape of ``GET /v1/backends``: one catalog entry (or program-wide plan option)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pteforge.backends.kinds import EntryKind
from pteforge.contracts.json_types import JsonObject


class CatalogEntryOut(BaseModel):
    """A lowering target of the catalog (``BaseEntry.describe``), or a program-wide plan
    option in the same shape (kind ``plan_option``). Delegate entries add the backend ids
    they accept and those this host's runtime can execute."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The name a plan uses (a partitioner, recipe or plan key).")
    kind: Literal[
        EntryKind.PORTABLE,
        EntryKind.PARTITIONER,
        EntryKind.DELEGATE,
        EntryKind.QUANTIZER,
        "plan_option",
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
