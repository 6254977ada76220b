"""``pteforge chat NAME``: an interactive chat with a language model deployed as a model
version, its answers streamed token by token as they are generated.

Each line read from stdin is a user turn; the conversation is kept here and sent whole each
turn, in one server session (``X-Pteforge-Session``) so the server computes only the new
tokens. End with an empty line or end of input. ``--json`` prints one JSON object per turn
(the answer, why it ended, the token counts) instead of streaming.

The server refuses a prompt longer than the model's context rather than cut it, so once the
conversation outgrows it, the oldest turns are dropped here (the system message stays), with
a line on stderr saying so; a turn too long on its own is reported and the chat goes on.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import TextIO

from pteforge.client.browse import connect
from pteforge.client.errors import APIError
from pteforge.client.generation import Generation
from pteforge.client.render import Output, terminal_safe
from pteforge.client.sync import Client


def _turn(
    client: Client,
    args: argparse.Namespace,
    messages: list[dict[str, str]],
    session: str,
    out: Output,
) -> Generation:
    def show(text: str) -> None:
        sys.stdout.write(terminal_safe(text))
        sys.stdout.flush()

    return client.chat(
        args.name,
        messages,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        seed=args.seed,
        session=session,
        on_text=None if out.as_json else show,
    )


def _fitting_turn(
    client: Client,
    args: argparse.Namespace,
    messages: list[dict[str, str]],
    session: str,
    out: Output,
) -> Generation | None:
    """The answer to ``messages``, dropping their oldest turns while the prompt is longer
    than the model's context; None (and ``messages`` without the new turn) if the new turn
    alone is too long."""
    while True:
        try:
            return _turn(client, args, messages, session, out)
        except APIError as exc:
            if exc.code != "context_length_exceeded":
                raise
            first = 1 if messages[0]["role"] == "system" else 0
            if len(messages) - first <= 1:
                out.error(f"pteforge chat: {exc.message}: this turn is left out")
                messages.pop()
                return None
            del messages[first : first + 2]  # the oldest user turn and its answer
            print(
                "pteforge chat: the conversation outgrew the model's context: the oldest turn "
                "is left out",
                file=sys.stderr,
            )


def chat(args: argparse.Namespace, out: Output, lines: TextIO = sys.stdin) -> None:
    """Read user turns from ``lines`` until an empty line or its end; stream each answer."""
    messages: list[dict[str, str]] = []
    if args.system:
        messages.append({"role": "system", "content": args.system})
    session = f"chat-{uuid.uuid4().hex}"
    with connect() as client:
        for line in lines:
            text = line.rstrip("\n")
            if not text:
                break
            messages.append({"role": "user", "content": text})
            answer = _fitting_turn(client, args, messages, session, out)
            if answer is None:
                continue
            messages.append({"role": "assistant", "content": answer.text})
            if out.as_json:
                out.json(
                    {
                        "text": answer.text,
                        "finish_reason": answer.finish_reason,
                        "usage": answer.usage,
                    }
                )
            else:
                sys.stdout.write("\n")
