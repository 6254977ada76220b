"""Token ids back to text, a piece at a time: whole characters only, cut at stop strings.

Byte-level BPE pieces need not be whole UTF-8: a character's bytes may span tokens. Text
is decoded over a short window of recent tokens (the way vLLM and TGI detokenize), and a
piece is only released once it no longer ends in U+FFFD, the replacement the decoder
writes for a character whose last byte is still to come. Released text is also held back
while its tail could be the start of a stop string, so a stop string is never half sent.

The window starts on the last few prompt tokens (``context``), as vLLM's does: a
SentencePiece decoder (Llama 2, Mistral, TinyLlama: ``Metaspace``, or ``Strip`` after
``Replace("▁", " ")``) drops the space of a word that begins the decoded text, so the first
generated word, decoded alone, would lose the space that parts it from the prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

_REPLACEMENT = "\ufffd"
_CONTEXT_TOKENS = 5
"""Prompt tokens the window starts on (vLLM's ``INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET``)."""

Decode = Callable[[Sequence[int]], str]


class TextStream:
    """The text of the tokens pushed so far, released in whole-UTF-8 pieces."""

    def __init__(
        self, decode: Decode, stop: Sequence[str] = (), context: Sequence[int] = ()
    ) -> None:
        self.decode = decode
        self.stop = tuple(stop)
        self.ids: list[int] = list(context[-_CONTEXT_TOKENS:])  # never released: the prompt's
        self._prefix = 0  # the window's start: text before it is settled
        self._read = len(self.ids)  # tokens whose text is in ``pending`` or released
        self.pending = ""
        self.stopped = False

    def push(self, token: int) -> str:
        """Add a generated token; the text that may be released now (``stopped`` tells
        whether a stop string ended the text)."""
        self.ids.append(token)
        self._take(final=False)
        return self._release(final=False)

    def finish(self) -> str:
        """The rest of the text, an unfinished character included (as U+FFFD)."""
        if not self.stopped:
            self._take(final=True)
        return self._release(final=True)

    def _take(self, final: bool) -> None:
        settled = self.decode(self.ids[self._prefix : self._read])
        text = self.decode(self.ids[self._prefix :])
        if len(text) > len(settled) and (final or not text.endswith(_REPLACEMENT)):
            self.pending += text[len(settled) :]
            self._prefix, self._read = self._read, len(self.ids)

    def _release(self, final: bool) -> str:
        if self.stopped:
            return ""
        if not self.stop:  # nothing to look for or hold back (~1 us a token less)
            out, self.pending = self.pending, ""
            return out
        cut = min((i for s in self.stop if (i := self.pending.find(s)) >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            out, self.pending = self.pending[:cut], ""
            return out
        keep = 0 if final else _held(self.pending, self.stop)
        out = self.pending[: len(self.pending) - keep]
        self.pending = self.pending[len(out) :]
        return out


def _held(text: str, stop: Sequence[str]) -> int:
    """How many trailing characters of ``text`` could begin a stop string."""
    longest = 0
    for s in stop:
        for n in range(min(len(s) - 1, len(text)), longest, -1):
            if text.endswith(s[:n]):
                longest = n
                break
    return longest
