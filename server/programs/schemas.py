"""JSON shapes of the program routes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, WrapSerializer

from pteforge.contracts.specs import MethodSignature, methods_to_json
from pteforge.server.common.schemas import FromAttributes

Methods = Annotated[
    list[MethodSignature],
    # A lambda, not a def: without a return annotation the JSON schema stays MethodSignature's.
    WrapSerializer(lambda methods, _handler, _info: methods_to_json(methods)),
]
"""Method signatures in their JSON form (``max_shape`` only when known), as storage keeps them."""


class ProgramOut(FromAttributes):
    """An uploaded program and the inputs/outputs of each of its methods."""

    id: str
    name: str
    sha256: str
    size_bytes: int
    methods: Methods
    created_at: datetime


class ProgramList(BaseModel):
    """``GET /v1/programs``: newest first."""

    programs: list[ProgramOut]
