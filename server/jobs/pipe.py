"""What a worker asks of a lowering child and what the child answers.

The messages are the shared contracts (:mod:`pteforge.contracts.jobs`): the worker sends one
:class:`LoweringRequest` (or :class:`ProfileRequest`); the child sends a :class:`StageMessage`
on each stage change, then exactly one :class:`ResultMessage` (:class:`ProfileMessage`) or
:class:`ErrorMessage`, as JSON over a pipe private to the
two processes (never stdout, where library chatter goes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

from pydantic import BaseModel

from pteforge.contracts.jobs import (
    CHILD_MESSAGE,
    ChildMessage,
    ChildRequest,
    LoweringRequest,
    LoweringResult,
    ProfileReport,
    ProfileRequest,
)


@dataclass
class LoweringOutcome:
    """What the worker learned from a finished lowering process."""

    result: LoweringResult | None = None
    profile: ProfileReport | None = None
    error_code: str | None = None
    error_message: str | None = None
    stages: list[str] = field(default_factory=list)


def send_message(conn: Connection, message: BaseModel) -> None:
    """One message over a lowering pipe, as JSON bytes (``json`` keeps NaN in numerics)."""
    conn.send_bytes(json.dumps(message.model_dump(mode="json")).encode())


def recv_request(conn: Connection) -> ChildRequest:
    """The worker's request, in the child; ``EOFError`` once the worker closed its end."""
    data = json.loads(conn.recv_bytes())
    if isinstance(data, dict) and data.get("kind") == "profile":
        return ProfileRequest.model_validate(data)
    return LoweringRequest.model_validate(data)


def recv_child_message(conn: Connection) -> ChildMessage:
    """The child's next message, in the worker; ``EOFError`` once the child closed its end,
    ``ValueError`` (``pydantic.ValidationError``) for anything not in the protocol."""
    return CHILD_MESSAGE.validate_python(json.loads(conn.recv_bytes()))
