"""How far a generation stream's client may fall behind, without a server: the events read
ahead of it (``Backlog``) merge, and stop the generation past their bound; a send the client
never accepts ends the stream at its deadline (``EventStream``). Through a real server:
``test_slow_readers.py``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest
from starlette.types import Message

from pteforge.contracts.generation import GenerationEvent
from pteforge.server.generation.backlog import EVENT_BYTES, TOKEN_ID_BYTES, Backlog
from pteforge.server.generation.completion_objects import Collected
from pteforge.server.generation.errors import OpenAIError
from pteforge.server.generation.streaming import EventStream, collect, collect_choices

FOUR = EVENT_BYTES + 4 + TOKEN_ID_BYTES
"""What an event of four bytes of text and one token id counts."""


async def _engine(texts: list[str], closed: asyncio.Event) -> AsyncGenerator[GenerationEvent, None]:
    """One event per text, the last one finished; ``closed`` set once it is closed."""
    try:
        for i, text in enumerate(texts):
            finish = "length" if i == len(texts) - 1 else None
            yield GenerationEvent(text=text, token_ids=(i,), finish_reason=finish)
    finally:
        closed.set()


def test_what_waits_for_the_client_comes_whole_and_the_generation_counts_until_closed() -> None:
    closed = asyncio.Event()

    async def main() -> list[GenerationEvent]:
        backlog = Backlog(_engine(["a", "b", "c"], closed), limit_bytes=1000)
        taken = []
        while (event := await backlog.next()) is not None:
            taken.append(event)
        assert not closed.is_set()  # still under way for its project's limit
        await backlog.close()
        return taken

    taken = asyncio.run(main())
    assert "".join(event.text for event in taken) == "abc" and closed.is_set()
    assert [t for event in taken for t in event.token_ids] == [0, 1, 2]
    assert taken[-1].finish_reason == "length"


def test_past_its_bound_the_generation_stops_and_the_stream_ends_with_an_error() -> None:
    limit = 2 * FOUR  # two events of four bytes fit, not three

    async def main() -> tuple[GenerationEvent | None, OpenAIError]:
        closed = asyncio.Event()
        engine = _engine(["aaaa", "bbbb", "cccc", "dddd", "eeee"], closed)
        backlog = Backlog(engine, limit_bytes=limit)
        await closed.wait()  # closed by the backlog: the generation is cancelled
        waited = await backlog.next()
        with pytest.raises(OpenAIError) as error:
            await backlog.next()
        await backlog.close()
        return waited, error.value

    waited, error = asyncio.run(main())
    assert waited is not None and waited.text == "aaaabbbbcccc"  # what waited still comes
    assert waited.finish_reason is None
    assert error.code == "stream_backlog_exceeded"
    assert "PTEFORGE_STREAM_BUFFER_BYTES" in error.message


def test_a_piece_taken_but_not_yet_sent_counts_against_the_bound() -> None:
    """The stream asks again only once its last piece is sent, and a client that reads
    nothing leaves that send waiting: a merged piece taken then still counts (uncounted, a
    taken piece holding most of the text made the bound, and a test of it, flaky)."""
    limit = 2 * FOUR

    async def main() -> OpenAIError:
        closed, more = asyncio.Event(), asyncio.Event()

        async def engine() -> AsyncGenerator[GenerationEvent, None]:
            try:
                yield GenerationEvent(text="aaaa", token_ids=(0,))
                yield GenerationEvent(text="bbbb", token_ids=(1,))
                await more.wait()  # until the stream took those two
                for i, text in enumerate(["cccc", "dddd"], start=2):
                    yield GenerationEvent(text=text, token_ids=(i,))
                yield GenerationEvent(text="e", token_ids=(4,), finish_reason="length")
            finally:
                closed.set()

        backlog = Backlog(engine(), limit_bytes=limit)
        taken = await backlog.next()  # its send never ends: the stream does not ask again
        assert taken is not None and taken.text.startswith("aaaa")
        more.set()
        # 4 events of 12 bytes passed 24: the generation is cancelled (a deadline, not a hang)
        await asyncio.wait_for(closed.wait(), timeout=60)
        with pytest.raises(OpenAIError) as error:
            while await backlog.next() is not None:
                pass
        await backlog.close()
        return error.value

    assert asyncio.run(main()).code == "stream_backlog_exceeded"


def test_a_send_the_client_never_accepts_ends_the_stream_at_its_deadline() -> None:
    sent: list[bytes] = []
    closed: list[bool] = []

    async def content() -> AsyncGenerator[bytes, None]:
        try:
            for piece in (b"one", b"two", b"three"):
                yield piece
        finally:
            closed.append(True)

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            sent.append(message["body"])
            if message["body"] == b"two":
                await asyncio.Event().wait()  # a client that accepts nothing more

    asyncio.run(EventStream(content(), send_timeout_s=0.01).stream_response(send))
    assert sent == [b"one", b"two"] and closed == [True]  # the stream stopped, closed


def test_the_deadline_counts_a_send_not_the_wait_for_the_generation() -> None:
    """Events that come slower than the send deadline all go out: only a send is timed."""
    sent: list[bytes] = []
    gate = asyncio.Event()

    async def content() -> AsyncGenerator[bytes, None]:
        yield b"one"
        await gate.wait()  # the generation's next token, after several deadlines
        yield b"two"

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            sent.append(message["body"])

    async def main() -> None:
        events = EventStream(content(), send_timeout_s=0.01)
        stream = asyncio.create_task(events.stream_response(send))
        while not sent:  # the first event is out: the stream waits for the next
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)  # five deadlines pass while no send is under way
        gate.set()
        await stream

    asyncio.run(main())
    assert sent == [b"one", b"two", b""]


def test_an_answer_not_streamed_stops_the_generation_past_its_bound() -> None:
    limit = 2 * FOUR  # two events of four bytes fit, not three

    async def main() -> tuple[Collected, OpenAIError, bool]:
        closed = asyncio.Event()
        fits = await collect(_engine(["aaaa", "bbbb"], closed), _authenticated, limit)
        closed.clear()
        with pytest.raises(OpenAIError) as error:
            await collect(_engine(["aaaa", "bbbb", "cccc", "dddd"], closed), _authenticated, limit)
        return fits, error.value, closed.is_set()

    fits, error, closed = asyncio.run(main())
    assert fits.text == "aaaabbbb" and fits.finish_reason == "length"
    assert error.code == "answer_too_large" and closed  # the generation was cancelled
    assert "PTEFORGE_STREAM_BUFFER_BYTES" in error.message


def test_the_bound_of_an_answer_not_streamed_counts_all_its_choices() -> None:
    limit = 3 * FOUR  # three events of four bytes fit, not four
    started: list[int] = []

    def choice(index: int) -> AsyncGenerator[GenerationEvent, None]:
        started.append(index)
        return _engine(["aaaa", "bbbb"], asyncio.Event())

    async def main() -> list[Collected]:
        return await collect_choices(choice, 2, _authenticated, 4 * FOUR)

    both = asyncio.run(main())
    assert [c.text for c in both] == ["aaaabbbb", "aaaabbbb"] and started == [0, 1]
    with pytest.raises(OpenAIError) as error:  # the second choice passes what is left
        asyncio.run(collect_choices(choice, 2, _authenticated, limit))
    assert error.value.code == "answer_too_large"


async def _authenticated() -> None:
    """A caller whose token stays valid."""
