"""The OpenAI objects an answer is written as (``server/generation/completion_objects.py``,
``responses_answer.py``), on events made here: the parts of them no real model's output
pins down reliably."""

from __future__ import annotations

from pteforge.contracts.generation import TokenLogprob
from pteforge.server.generation.completion_objects import Collected, Shape
from pteforge.server.generation.errors import OpenAIError
from pteforge.server.generation.responses_answer import ResponseShape, named_sse
from pteforge.server.generation.responses_body import ResponsesBody


def test_text_offsets_count_characters_not_the_escapes_of_their_parts() -> None:
    """A completions ``text_offset`` is where a token stands in the text: a token that is
    part of a character (written ``bytes:\\xNN``) adds nothing until the character is whole."""

    def scored(raw: bytes) -> TokenLogprob:
        text = raw.decode(errors="ignore") or "bytes:" + "".join(f"\\x{b:02x}" for b in raw)
        return TokenLogprob(id=0, token=text, bytes=tuple(raw), logprob=-1.0)

    pieces = [b"a", b"\xe2\x80", b"\xa6", b"b"]  # "a", then "…" in two tokens, then "b"
    done = Collected(pieces=["a…b"], logprobs=[scored(p) for p in pieces], finish_reason="stop")
    shape = Shape(model="m", chat=False, logprobs=True)
    assert shape.whole([done])["choices"][0]["logprobs"]["text_offset"] == [0, 1, 1, 2]


def test_a_responses_stream_that_fails_ends_with_an_error_event() -> None:
    """The Responses API's ``error`` event, numbered after the events before it and named by
    its ``event:`` line, as OpenAI sends it."""
    body = ResponsesBody(model="m", input="hi")
    answer = ResponseShape(body)
    opening = list(answer.opening())
    error = answer.failed(OpenAIError(400, "too long", "input", "context_length_exceeded"))
    assert error == {
        "type": "error",
        "code": "context_length_exceeded",
        "message": "too long",
        "param": "input",
        "sequence_number": len(opening),
    }
    assert named_sse(error).startswith(b"event: error\ndata: {")
    assert answer.failed(RuntimeError("bug"))["code"] == "server_error"
