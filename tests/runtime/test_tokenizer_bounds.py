"""Which uploaded tokenizers have their decoding run under a memory budget (red-team pass):
a ``Replace`` decoder that writes megabytes for each match, or a vocabulary piece of
megabytes (decoded again at each step while the text ends in an unfinished character),
made each step's text as large as they liked in a runtime worker, which has no memory
limit. The usual tokenizers decode unguarded (a guard costs ~50 us a call)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pteforge.runtime.text_codec import TAME_PIECE_CHARS, TextCodec


def _codec(directory: Path, pieces: list[str], decoder: object | None) -> TextCodec:
    from tokenizers import Tokenizer, models

    tokenizer = Tokenizer(models.WordLevel({p: i for i, p in enumerate(pieces)}, unk_token="u"))
    tokenizer.decoder = decoder
    path = directory / "tokenizer.json"
    tokenizer.save(str(path))
    return TextCodec(path, None)


def _decoders() -> dict[str, tuple[object | None, bool]]:
    from tokenizers import decoders

    return {
        "none": (None, False),
        "byte-level": (decoders.ByteLevel(), False),
        "sentencepiece": (
            decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback()]),
            False,
        ),
        "replace-with-megabytes": (
            decoders.Sequence([decoders.Fuse(), decoders.Replace("a", "b" * (1 << 20))]),
            True,
        ),
    }


@pytest.mark.parametrize("name", list(_decoders()))
def test_a_replace_decoder_writing_more_is_guarded(tmp_path: Path, name: str) -> None:
    decoder, guarded = _decoders()[name]
    codec = _codec(tmp_path, ["u", "a", "ab"], decoder)
    assert codec.decode_guarded is guarded
    if not guarded:
        assert codec.decode([1, 2]).replace(" ", "") == "aab"


def test_a_vocabulary_piece_of_megabytes_is_guarded(tmp_path: Path) -> None:
    assert not _codec(tmp_path, ["u", "a" * TAME_PIECE_CHARS], None).decode_guarded
    codec = _codec(tmp_path, ["u", "a" * (TAME_PIECE_CHARS + 1)], None)
    assert codec.decode_guarded
    assert codec.decode([1]) == "a" * (TAME_PIECE_CHARS + 1)  # decoded under its budget
