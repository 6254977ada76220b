"""Log probabilities of generated tokens, and the bytes each token stands for.

A token's log probability is the log-softmax of the model's logits at its step, before
temperature and ``top_p`` (what the model says, not how the token was drawn), as OpenAI
and vLLM report it. The alternatives are the most likely tokens at that step, ties in
token order.

A token's bytes come from its piece in the vocabulary, read the way the tokenizer's decoder
reads it: a byte-level BPE piece (GPT-2, Llama 3, Qwen: the ``ByteLevel`` decoder) maps each
character back to one byte; a SentencePiece piece (Llama 2, Mistral, Gemma) writes ``▁`` for
a space and ``<0xNN>`` for a byte of its byte fallback. Decoding a lone token instead would
lose both: part of a character decodes to U+FFFD, and a word's leading space is stripped.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from pteforge.contracts.generation import TokenLogprob

FLOOR = -9999.0
"""The log probability reported for a token the model gives none (``-inf``, or NaN logits),
as vLLM reports it: JSON has no infinity."""

MAX_TOKEN_BYTES = 1024
"""Most bytes reported of one token: an uploaded vocabulary may hold a piece of megabytes,
which 21 entries a token (top 20 and the chosen) would multiply in every event."""

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_SPIECE_SPACE = "\u2581"


def _byte_level_chars() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode``, reversed: the byte each character of a byte-level
    piece stands for."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {chr(b): b for b in printable}
    shifted = 0
    for b in range(256):
        if b not in printable:
            chars[chr(256 + shifted)] = b
            shifted += 1
    return chars


class TokenBytes:
    """The bytes of a tokenizer's tokens (a ``tokenizers.Tokenizer``)."""

    _BYTE_LEVEL = _byte_level_chars()

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        kinds = _decoder_kinds(tokenizer.decoder)
        self.byte_level = "ByteLevel" in kinds
        self.byte_fallback = "ByteFallback" in kinds
        self.spiece = bool(kinds & {"Metaspace", "Replace"})
        self.added = {int(i): t.content for i, t in tokenizer.get_added_tokens_decoder().items()}

    def __call__(self, token: int) -> bytes:
        """The bytes ``token`` stands for (b"" for an id the vocabulary lacks), at most
        :data:`MAX_TOKEN_BYTES` of them."""
        return self._bytes(token)[:MAX_TOKEN_BYTES]

    def _bytes(self, token: int) -> bytes:
        if token in self.added:
            return self.added[token].encode()
        piece = self.tokenizer.id_to_token(token)
        if piece is None:
            return b""
        if self.byte_level and all(c in self._BYTE_LEVEL for c in piece):
            return bytes(self._BYTE_LEVEL[c] for c in piece)
        if self.byte_fallback and (whole := _BYTE_PIECE.fullmatch(piece)):
            return bytes([int(whole.group(1), 16)])
        if self.spiece:
            piece = piece.replace(_SPIECE_SPACE, " ")
        return str(piece).encode()


def _decoder_kinds(decoder: Any) -> set[str]:
    """The ``type`` of the decoder and of every decoder a ``Sequence`` holds."""
    if decoder is None:
        return set()
    try:
        tree = json.loads(decoder.__getstate__())
    except (TypeError, ValueError):
        return set()
    kinds: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            kinds.add(str(node.get("type")))
            stack.extend(node.get("decoders") or ())
    return kinds


def step_logprobs(
    logits: np.ndarray, token: int, top: int, token_bytes: TokenBytes
) -> TokenLogprob:
    """``token``'s log probability under ``logits`` (one step's, 1-D), with the ``top``
    most likely tokens of that step."""
    scores = logits.astype(np.float64)  # a copy: the logits may be a view of the method's
    finite = scores[np.isfinite(scores)]
    peak = finite.max() if finite.size else 0.0
    total = peak + math.log(np.exp(finite - peak).sum()) if finite.size else math.inf
    logprobs = scores - total
    return TokenLogprob(
        **_entry(token, logprobs, token_bytes),
        top=tuple(TokenLogprob(**_entry(t, logprobs, token_bytes)) for t in _best(scores, top)),
    )


def unscored(token: int, token_bytes: TokenBytes) -> TokenLogprob:
    """``token`` with no log probability: an echoed prompt's first token."""
    raw = token_bytes(token)
    return TokenLogprob(id=token, token=_text(raw), bytes=tuple(raw), logprob=None)


def _best(scores: np.ndarray, count: int) -> list[int]:
    """The ``count`` highest-scoring token ids, highest first, ties in id order."""
    count = min(count, scores.size)
    if count == 0:
        return []
    ranked = np.nan_to_num(scores, nan=-np.inf)
    found = np.argpartition(-ranked, count - 1)[:count]
    order = np.lexsort((found, -ranked[found]))
    return [int(t) for t in found[order]]


def _entry(token: int, logprobs: np.ndarray, token_bytes: TokenBytes) -> dict[str, Any]:
    value = float(logprobs[token])
    raw = token_bytes(token)
    return {
        "id": token,
        "token": _text(raw),
        "bytes": tuple(raw),
        "logprob": value if math.isfinite(value) and value > FLOOR else FLOOR,
    }


def _text(raw: bytes) -> str:
    """The token's text; ``bytes:\\xNN...`` for bytes that are not whole UTF-8."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in raw)
