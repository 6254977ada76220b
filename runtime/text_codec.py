"""A language model's tokenizer and chat template, read in the confined worker.

Both are uploads, so both are only read here: the tokenizer (a Hugging Face
``tokenizer.json``) by the ``tokenizers`` library, the chat template (``chat_template`` of
``tokenizer_config.json``) by Jinja2's ``ImmutableSandboxedEnvironment``, which lets a
template read its variables but call nothing unsafe and change nothing, with what
``transformers`` adds to it (:mod:`pteforge.runtime.chat_template`).

Without a config, or a config without ``chat_template``, :data:`DEFAULT_CHAT_TEMPLATE`
renders each message as ``role: content`` on its own line, then ``assistant:``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pteforge.children.limits import address_space_budget, wall_clock_deadline
from pteforge.contracts.generation import ChatMessage, GenerationRequest
from pteforge.runtime.errors import ContextLengthError, TokenizerError
from pteforge.runtime.logprobs import TokenBytes

DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message.role }}: {{ message.content }}{{ '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)
"""The chat template used when the tokenizer config has none."""

_SPECIAL = ("bos_token", "eos_token", "unk_token", "pad_token")

MAX_RENDERED_CHARS = 8 << 20
"""Most characters a rendered chat may have: a context of a million tokens at 8 each."""
RENDER_MEMORY_BYTES = 512 << 20
"""Most memory rendering a chat may take (a 8 Mi-character prompt takes 32 MiB at most)."""
RENDER_SECONDS = 10.0
"""Longest a chat template may render."""
PIECE_CHARS_COUNTED = 256
"""Most characters one token is taken to cover when bounding a prompt, whatever the longest
piece of a tokenizer's vocabulary (an uploaded one may hold a piece as long as it likes)."""
NORMALIZER_SLACK = 2
"""Room for normalizers that drop characters before the pieces cover them."""
TOKENIZE_MEMORY_BYTES = 512 << 20
"""Memory the tokenizer may take to encode, beyond :data:`TOKENIZE_BYTES_PER_CHAR` a
character of its text."""
TOKENIZE_BYTES_PER_CHAR = 4 << 10
"""Memory an encoded character may take: measured at most ~670 bytes (an emoji: 3
byte-level tokens); an uploaded normalizer can make one character millions of tokens."""
DECODE_MEMORY_BYTES = 64 << 20
"""Memory a guarded decoding may take (a step's text, sent on to the server, is less)."""
TAME_PIECE_CHARS = 1024
"""Longest vocabulary piece a tokenizer may have for its decoding to run unguarded."""
TAME_REPLACE_CHARS = 16
"""Longest content a ``Replace`` decoder may write for its decoding to run unguarded."""


class TextCodec:
    """Encodes prompts, renders chats and decodes tokens with one uploaded tokenizer."""

    def __init__(self, tokenizer: Path, config: Path | None) -> None:
        from tokenizers import Tokenizer

        try:
            self.tokenizer = Tokenizer.from_file(str(tokenizer))
        except BaseException as exc:
            _reraise_unless_failed(exc)
            raise TokenizerError(f"the tokenizer cannot be read: {exc}") from None
        settings = _read_config(config) if config is not None else {}
        self.template_source = _chat_template(settings)
        self.specials = {k: _token_text(settings.get(k)) for k in _SPECIAL}
        self._template: Any = None
        self._longest: int | None = None
        self._decode_guarded: bool | None = None
        self._token_bytes: TokenBytes | None = None

    def prompt_ids(self, request: GenerationRequest, context_len: int) -> list[int]:
        """The token ids of the request's prompt, in whichever form it came; a text too long
        to fit ``context_len`` tokens is refused before it is tokenized."""
        if request.prompt_ids is not None:
            return list(request.prompt_ids)
        if request.messages is not None:
            rendered = self.render(request.messages, request.template_kwargs)
            return self.encode(self._fitting(rendered, context_len), special=False)
        return self.encode(self._fitting(request.prompt or "", context_len), special=True)

    def _fitting(self, text: str, context_len: int) -> str:
        """``text``, unless it has more characters than ``context_len`` tokens cover.

        Tokenizing takes time in proportion to the text (12 MB of prompt: 18 s of the
        worker, which other callers' requests wait for) and cannot be interrupted, though a
        prompt that long never fits a context; a token covers at most its longest piece's
        characters, so a longer text is refused (400) in microseconds."""
        piece_chars = max(1, min(self._longest_piece(), PIECE_CHARS_COUNTED))
        most = context_len * piece_chars * NORMALIZER_SLACK
        if len(text) > most:
            raise ContextLengthError(
                f"the prompt has {len(text)} characters, more than the model's context of "
                f"{context_len} tokens holds with this tokenizer (at most {most}: its pieces "
                f"have {piece_chars} characters or fewer)"
            )
        return text

    def _longest_piece(self) -> int:
        """Characters of the longest piece of the vocabulary, added tokens included."""
        if self._longest is None:
            vocab = self.tokenizer.get_vocab(with_added_tokens=True)
            self._longest = max((len(piece) for piece in vocab), default=1)
        return self._longest

    def encode(self, text: str, *, special: bool) -> list[int]:
        """``text``'s token ids; ``special``: with the tokenizer's own added tokens (a BOS).

        An uploaded normalizer (``Replace`` with megabytes of content) or post-processor can
        make one character millions of tokens, which took the host's memory (a runtime
        worker has no memory limit of its own: a model may need much). So the call may take
        only :data:`TOKENIZE_MEMORY_BYTES` and :data:`TOKENIZE_BYTES_PER_CHAR` a character:
        past that the library's allocation fails and it aborts the worker, which the pool
        replaces (charged to the project, as any crash)."""
        budget = TOKENIZE_MEMORY_BYTES + TOKENIZE_BYTES_PER_CHAR * len(text)
        try:
            with address_space_budget(budget):
                return list(self.tokenizer.encode(text, add_special_tokens=special).ids)
        except BaseException as exc:
            _reraise_unless_failed(exc)
            raise TokenizerError(f"the tokenizer failed on the prompt: {exc}") from None

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens left out; under :data:`DECODE_MEMORY_BYTES`
        when the tokenizer may write far more text than its tokens (``decode_guarded``)."""
        try:
            if not self.decode_guarded:  # the usual case: a guard costs ~50 us a call
                return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))
            with address_space_budget(DECODE_MEMORY_BYTES):
                return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))
        except BaseException as exc:
            _reraise_unless_failed(exc)
            raise TokenizerError(f"the tokenizer failed to decode tokens: {exc}") from None

    @property
    def decode_guarded(self) -> bool:
        """Whether decoding may write far more text than a tokenizer's pieces do: a piece
        over :data:`TAME_PIECE_CHARS` (a token of megabytes, whose text is decoded again at
        each step while it ends in an unfinished character), or a ``Replace`` decoder
        writing over :data:`TAME_REPLACE_CHARS` for each match."""
        if self._decode_guarded is None:
            long_piece = self._longest_piece() > TAME_PIECE_CHARS
            self._decode_guarded = long_piece or _replaces_with_more(self.tokenizer.decoder)
        return self._decode_guarded

    @property
    def token_bytes(self) -> TokenBytes:
        """The bytes each token stands for (its logprobs' ``bytes``), read once."""
        if self._token_bytes is None:
            self._token_bytes = TokenBytes(self.tokenizer)
        return self._token_bytes

    def eos_ids(self) -> frozenset[int]:
        """The id of the config's ``eos_token`` (none without one): what ends a text when
        the program has no ``get_eos_ids``, as in ExecuTorch's runner."""
        token = self.tokenizer.token_to_id(self.specials["eos_token"] or "")
        return frozenset() if token is None else frozenset({int(token)})

    def render(
        self, messages: Sequence[ChatMessage], variables: Mapping[str, Any] | None = None
    ) -> str:
        """The chat as one prompt, generation prompt included, by the sandboxed template
        (``variables``: more of the template's variables, e.g. ``enable_thinking``).

        The sandbox stops unsafe calls, not work: ``'x' * 10**10``, a string doubled in a
        loop or nested ``range(100000)`` loops are all allowed. So the render may take
        :data:`RENDER_MEMORY_BYTES` more memory, produce :data:`MAX_RENDERED_CHARS` and run
        :data:`RENDER_SECONDS` (on the worker's main thread, where requests run)."""
        from jinja2 import TemplateError

        try:
            with (
                address_space_budget(RENDER_MEMORY_BYTES),
                wall_clock_deadline(RENDER_SECONDS, _too_slow),
            ):
                return self._render(messages, variables or {})
        except MemoryError:
            raise TokenizerError(
                f"the chat template failed: it needs more than {RENDER_MEMORY_BYTES >> 20} MiB"
            ) from None
        except (
            TemplateError,
            TokenizerError,
            TypeError,
            ValueError,
            OverflowError,
            RecursionError,
        ) as exc:
            raise TokenizerError(f"the chat template failed: {exc}") from None

    def _render(self, messages: Sequence[ChatMessage], extra: Mapping[str, Any]) -> str:
        chat = [{"role": m.role, "content": m.content} for m in messages]
        pieces, size = [], 0
        # tools and documents are None, as transformers passes them without any
        variables = {"tools": None, "documents": None, **self.specials, **extra}
        variables.setdefault("add_generation_prompt", True)
        for piece in self._compiled().generate(messages=chat, **variables):
            size += len(piece)
            if size > MAX_RENDERED_CHARS:
                raise TokenizerError(f"it renders over {MAX_RENDERED_CHARS} characters")
            pieces.append(piece)
        return "".join(pieces)

    def _compiled(self) -> Any:
        if self._template is None:
            from pteforge.runtime.chat_template import environment

            self._template = environment().from_string(self.template_source)
        return self._template


def _reraise_unless_failed(exc: BaseException) -> None:
    """Re-raise ``exc`` unless it is the tokenizers library failing on its input: an
    exception, or a Rust panic (pyo3's ``PanicException`` is a ``BaseException``: Oniguruma
    stopping a backtracking pre-tokenizer regex at its retry limit is one, which killed the
    worker)."""
    if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
        raise exc


def _replaces_with_more(decoder: Any) -> bool:
    """Whether ``decoder`` (or one it holds) replaces a match with over
    :data:`TAME_REPLACE_CHARS` characters."""
    if decoder is None:
        return False
    stack = [json.loads(decoder.__getstate__())]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            content = node.get("content") if node.get("type") == "Replace" else ""
            if not isinstance(content, str) or len(content) > TAME_REPLACE_CHARS:
                return True
            stack.extend(node.get("decoders") or ())
    return False


def _too_slow() -> TokenizerError:
    return TokenizerError(f"it renders for over {RENDER_SECONDS:g} s")


def _read_config(path: Path) -> dict[str, Any]:
    try:
        settings = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise TokenizerError(f"the tokenizer config is not JSON: {exc}") from None
    if not isinstance(settings, dict):
        raise TokenizerError("the tokenizer config must be a JSON object")
    return settings


def _chat_template(settings: dict[str, Any]) -> str:
    """The config's chat template: a string, or the ``default`` of a list of named ones."""
    template = settings.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if template is None:
        return DEFAULT_CHAT_TEMPLATE
    if not isinstance(template, str):
        raise TokenizerError("the tokenizer config's chat_template must be a string")
    return template


def _token_text(value: Any) -> str:
    """A special token as the config writes it: a string or ``{"content": ...}``."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""
