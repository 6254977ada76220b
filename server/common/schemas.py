"""What the feature folders' JSON shapes share."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict


class FromAttributes(BaseModel):
    """A JSON shape whose fields are read from the attributes of the same names of a stored
    object (a row, a domain object): ``ProgramOut.of(program)``."""

    model_config = ConfigDict(from_attributes=True)

    @classmethod
    def of(cls, stored: object) -> Self:
        """The shape of ``stored``, field by field."""
        return cls.model_validate(stored)
