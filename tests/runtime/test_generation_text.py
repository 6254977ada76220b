"""The text side of generation, as the worker runs it: detokenizing in whole characters,
stop strings, sampling, and chat templates in Jinja2's sandbox. No model needed."""

from __future__ import annotations

from collections.abc import Sequence
from multiprocessing import Pipe
from pathlib import Path

import numpy as np
import pytest

from pteforge.contracts.generation import ChatMessage, GenerationEvent, GenerationRequest
from pteforge.contracts.runtime_messages import GeneratedReply
from pteforge.runtime.errors import ContextLengthError, TokenizerError
from pteforge.runtime.generation_worker import Channel, run
from pteforge.runtime.language_model import LmInfo, LmMethod
from pteforge.runtime.sampling import Sampler
from pteforge.runtime.text_codec import TextCodec
from pteforge.runtime.text_stream import TextStream
from pteforge.runtime.wire import WORKER_REPLY, decode_message, encode_message, token_frame

TEXT = "naïve café ☕ 日本語, emoji 🙂 done"


def _stream(codec: TextCodec, ids: list[int], stop: tuple[str, ...] = ()) -> list[str]:
    text = TextStream(codec.decode, stop)
    pieces = [text.push(t) for t in ids if not text.stopped]
    return [*pieces, text.finish()]


def test_pieces_are_whole_characters_and_add_up(byte_tokenizer: Path) -> None:
    codec = TextCodec(byte_tokenizer, None)
    ids = codec.encode(TEXT, special=False)
    assert len(ids) == len(TEXT.encode())  # one token per byte: characters do split
    pieces = _stream(codec, ids)
    assert "".join(pieces) == TEXT
    assert all("\ufffd" not in p for p in pieces)
    assert any(p == "🙂" for p in pieces)  # four tokens, released once whole


def test_stop_strings_cut_the_text_and_are_never_half_sent(byte_tokenizer: Path) -> None:
    codec = TextCodec(byte_tokenizer, None)
    ids = codec.encode(TEXT, special=False)
    pieces = _stream(codec, ids, stop=("日本", "zzz"))
    assert "".join(pieces) == "naïve café ☕ "
    held = _stream(codec, ids, stop=("café!",))  # a prefix that never completes: flushed
    assert "".join(held) == TEXT


def test_an_unfinished_character_at_the_end_is_flushed_as_a_replacement(
    byte_tokenizer: Path,
) -> None:
    codec = TextCodec(byte_tokenizer, None)
    ids = codec.encode("ab🙂", special=False)[:-1]
    assert _stream(codec, ids) == ["a", "b", "", "", "", "\ufffd"]


def test_sampler_greedy_seeded_and_top_p() -> None:
    logits = np.array([0.1, 2.0, 1.9, -1.0], dtype=np.float32)
    assert Sampler(0.0, 1.0, None).pick(logits) == 1
    assert Sampler(1.0, 1e-6, None).pick(logits) == 1  # the nucleus is the top token only
    draws = [Sampler(1.0, 1.0, 7) for _ in range(2)]
    first, second = ([s.pick(logits) for _ in range(50)] for s in draws)
    assert first == second and set(first) > {1}
    two = Sampler(1.5, 0.6, 3)
    assert {two.pick(logits) for _ in range(200)} == {1, 2}


@pytest.mark.parametrize("text", ["", "x", 'a "quoted" \\ back\nslash\t', TEXT, "\x00\u2028"])
def test_a_token_event_frame_is_the_models_frame(text: str) -> None:
    """The worker writes each token's event without building the models: the same bytes,
    which the pool reads back as the models say."""
    for token, prompt in ((0, None), (7, 12), (2**31 + 5, None)):
        event = GenerationEvent(text=text, token_ids=(token,), prompt_tokens=prompt)
        reply = GeneratedReply(event=event)
        assert token_frame(text, token, prompt) == encode_message(reply, [])
        assert decode_message(token_frame(text, token, prompt), WORKER_REPLY)[0] == reply


def test_a_text_no_context_holds_is_refused_before_it_is_tokenized(
    byte_tokenizer: Path, tmp_path: Path
) -> None:
    """Tokenizing 12 MB of prompt held the worker 18 s (attack pass), for a prompt that could
    never fit: one whose characters its tokens cannot cover is refused unread. Here the
    longest piece is "<eos>", 5 characters: 8 tokens cover at most 8 * 5 * 2 (slack)."""
    from tokenizers import Tokenizer, models

    codec = TextCodec(byte_tokenizer, None)
    assert len(codec.prompt_ids(GenerationRequest(prompt="a" * 80), 8)) == 80
    with pytest.raises(ContextLengthError, match=r"the prompt has 81 characters.*at most 80"):
        codec.prompt_ids(GenerationRequest(prompt="a" * 81), 8)
    chat = (ChatMessage(role="user", content="a" * 80),)
    with pytest.raises(ContextLengthError, match="the prompt has 97 characters"):
        codec.prompt_ids(GenerationRequest(messages=chat), 8)  # as rendered: "user: ...\n..."
    hostile = Tokenizer(models.WordLevel({"[UNK]": 0, "x" * 10**5: 1}, unk_token="[UNK]"))
    hostile.save(str(tmp_path / "long-piece.json"))  # its own vocabulary cannot lift the bound
    with pytest.raises(ContextLengthError, match=f"at most {8 * 256 * 2}"):
        TextCodec(tmp_path / "long-piece.json", None).prompt_ids(
            GenerationRequest(prompt="x" * 5000), 8
        )


@pytest.mark.parametrize("content", [b"not json", b"[1, 2]", b'{"version": 1}'])
def test_unreadable_tokenizer_files_are_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_bytes(content)
    with pytest.raises(TokenizerError, match="tokenizer cannot be read"):
        TextCodec(path, None)


def _sentencepiece_tokenizer(directory: Path, strip: bool) -> Path:
    """A Llama-2-style tokenizer: words start with "▁", and the decoder drops the space of
    a word that begins the text (``Strip`` after ``Replace``, or ``Metaspace``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tokenizer.decoder = (
        decoders.Sequence([decoders.Replace("▁", " "), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        if strip
        else decoders.Metaspace(prepend_scheme="first")
    )
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["<s>", "<unk>"])
    tokenizer.train_from_iterator(["Paris is the capital of France"] * 8, trainer)
    path = directory / f"sp-{strip}.json"
    tokenizer.save(str(path))
    return path


@pytest.mark.parametrize("strip", [True, False], ids=["strip", "metaspace"])
def test_the_first_word_keeps_its_space_after_the_prompt(tmp_path: Path, strip: bool) -> None:
    """A SentencePiece decoder drops the space of a word that begins the decoded text: the
    completion of "Paris is the" with "▁capital" read "capital" (new-user pass: the
    prompt and its completion ran together, "Paris is thecapital")."""
    codec = TextCodec(_sentencepiece_tokenizer(tmp_path, strip), None)
    prompt = codec.encode("Paris is the", special=False)
    whole = codec.encode("Paris is the capital of", special=False)
    assert whole[: len(prompt)] == prompt
    text = TextStream(codec.decode, context=prompt)
    pieces = [text.push(t) for t in whole[len(prompt) :]]
    assert "".join([*pieces, text.finish()]) == " capital of"


class _Scripted(LmMethod):
    """A "model" whose logits pick the scripted tokens in turn."""

    def __init__(self, script: list[int], vocab: int, eos: frozenset[int] = frozenset()) -> None:
        info = LmInfo(64, "get_max_seq_len", eos, vocab, 64, True, "int64")
        super().__init__(None, info)
        self.script = iter(script)

    def feed(self, tokens: Sequence[int], history: list[int]) -> np.ndarray:
        history.extend(tokens)
        logits = np.zeros(self.info.vocab_size, dtype=np.float32)
        logits[next(self.script, 0)] = 1.0
        return logits


def test_a_stop_string_found_in_the_last_piece_finishes_with_stop(tmp_path: Path) -> None:
    """The last token "b" + the first byte of "🙂" completes the stop string "ab": its text
    ends mid-character, so only the final flush finds the stop (models pass: Gemma's answer
    was cut at its stop string but said finish_reason "length")."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(["<eos>", *alphabet, "bð"])}
    tokenizer = Tokenizer(models.BPE(vocab, [("b", "ð")]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    codec = TextCodec(tmp_path / "tokenizer.json", None)
    script = codec.encode("xab🙂", special=False)[:3]  # x, a, "b" + 0xF0
    request = GenerationRequest(prompt="q", max_tokens=3, stop=("ab",), temperature=0)
    ours, theirs = Pipe()
    reply = run(_Scripted(script, len(vocab)), codec, request, [], Channel(ours))
    assert isinstance(reply, GeneratedReply)
    assert (reply.event.text, reply.event.finish_reason) == ("", "stop")
    first = decode_message(theirs.recv_bytes(), WORKER_REPLY)[0]
    assert isinstance(first, GeneratedReply) and first.event.text == "x"


def test_a_generation_past_its_seconds_ends_as_at_its_length(byte_tokenizer: Path) -> None:
    """A generation holds its worker, which other projects' requests wait for: past the
    pool's request time (here none at all) it ends after the token under way, ``length``
    with its usage, as one that reached max_tokens; without a limit it runs on."""
    codec = TextCodec(byte_tokenizer, None)
    request = GenerationRequest(prompt="q", max_tokens=5, temperature=0)
    vocab = codec.tokenizer.get_vocab_size()
    ours, _theirs = Pipe()
    for seconds, tokens in ((0.0, 1), (None, 5)):
        reply = run(_Scripted([7] * 5, vocab), codec, request, [], Channel(ours), seconds)
        assert isinstance(reply, GeneratedReply) and reply.event.usage is not None
        assert (reply.event.finish_reason, reply.event.usage.completion_tokens) == (
            "length",
            tokens,
        )


def test_ignore_eos_runs_past_the_end_token_and_the_prompt_length_goes_first(
    byte_tokenizer: Path,
) -> None:
    """The first token's event says the prompt's length (a stream's running usage counts
    from it); an end-of-sequence token ends the text unless the request ignores it (vLLM's
    ``ignore_eos``), which runs to ``max_tokens``."""
    codec = TextCodec(byte_tokenizer, None)
    vocab = codec.tokenizer.get_vocab_size()
    prompt = codec.encode("qr", special=True)
    for ignore, ending in ((False, ("stop", 2)), (True, ("length", 4))):
        request = GenerationRequest(prompt="qr", max_tokens=4, temperature=0, ignore_eos=ignore)
        ours, theirs = Pipe()
        model = _Scripted([5, 0, 6, 7], vocab, eos=frozenset({0}))
        reply = run(model, codec, request, [], Channel(ours))
        assert isinstance(reply, GeneratedReply) and reply.event.usage is not None
        assert (reply.event.finish_reason, reply.event.usage.completion_tokens) == ending
        first = decode_message(theirs.recv_bytes(), WORKER_REPLY)[0]
        assert isinstance(first, GeneratedReply) and first.event.token_ids == (5,)
        assert first.event.prompt_tokens == len(prompt) == reply.event.usage.prompt_tokens
        if ignore:
            later = [decode_message(theirs.recv_bytes(), WORKER_REPLY)[0] for _ in range(2)]
            assert [r.event.prompt_tokens for r in later] == [None, None]  # type: ignore[union-attr]
