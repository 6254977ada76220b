"""The generation contract: one prompt form, sampling bounds, stop strings."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pteforge.contracts.generation import GenerationEvent, GenerationRequest, Usage


def test_exactly_one_prompt_form() -> None:
    assert GenerationRequest(prompt="hi").prompt == "hi"
    assert GenerationRequest(prompt_ids=(1, 2)).prompt_ids == (1, 2)
    assert GenerationRequest(messages=[{"role": "user", "content": "hi"}]).messages
    for bad in ({}, {"prompt": "a", "prompt_ids": [1]}):
        with pytest.raises(ValidationError, match="exactly one of prompt"):
            GenerationRequest(**bad)


@pytest.mark.parametrize(
    "fields",
    [
        {"prompt_ids": []},
        {"prompt_ids": [-1]},
        {"prompt_ids": [2**31]},
        {"temperature": -0.1},
        {"top_p": 0.0},
        {"max_tokens": 0},
        {"stop": [""]},
        {"unknown": 1},
    ],
)
def test_bad_requests_are_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        GenerationRequest(**{"prompt": "x", **fields} if "prompt_ids" not in fields else fields)


def test_event_round_trips_as_json() -> None:
    event = GenerationEvent(
        text="é",
        token_ids=(3, 4),
        finish_reason="stop",
        usage=Usage(prompt_tokens=2, completion_tokens=2, total_tokens=4),
    )
    assert GenerationEvent.model_validate_json(event.model_dump_json()) == event
