"""A byte-level BPE ``tokenizer.json`` trained with ``tokenizers`` on local text.

Nothing is downloaded: the corpus is the text below, with multi-byte UTF-8 (accents, CJK,
emoji) so that some tokens are pieces of a character, as in real byte-level BPE
vocabularies (GPT-2, Llama 3, Qwen). Training is deterministic, so the same corpus always
gives the same vocabulary.
"""

from __future__ import annotations

import json
from pathlib import Path

BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (BOS, EOS, IM_START, IM_END)
"""Ids 0..3, in this order: BOS, the end of text, and the chat turn markers."""

VOCAB_SIZE = 384

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""A ChatML-style template (as Qwen's) in ``tokenizer_config.json``."""

_CORPUS = """\
The quick brown fox jumps over the lazy dog. A language model predicts the next token.
ExecuTorch runs the same program on a phone, a laptop and a server. Tokens stream back
one at a time; the server assembles bytes so that every text delta is whole UTF-8.
Hello, world! How are you today? I am fine, thank you. What is the capital of France?
Paris is the capital of France. Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14159.
Café, naïve, façade, résumé, jalapeño, Ångström, straße, smörgåsbord, crème brûlée.
日本語のテキスト、中文文本、한국어 텍스트. Emoji: 😀 🚀 🎉 ✨ 👍. Ελληνικά, русский текст.
def generate(prompt, max_tokens=16):\n    return model(prompt)[:max_tokens]
"""


def corpus() -> list[str]:
    """The training text, one line per item."""
    return _CORPUS.splitlines() * 4


def train_tokenizer(directory: Path) -> tuple[Path, Path]:
    """Train the tokenizer; write ``tokenizer.json`` and ``tokenizer_config.json`` (with
    the chat template and the special tokens) in ``directory``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, 0)]
    )
    tokenizer_json = directory / "tokenizer.json"
    tokenizer.save(str(tokenizer_json))
    config = {
        "bos_token": BOS,
        "eos_token": EOS,
        "add_bos_token": True,
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": 1 << 20,
    }
    tokenizer_config = directory / "tokenizer_config.json"
    tokenizer_config.write_text(json.dumps(config, indent=1, ensure_ascii=False))
    return tokenizer_json, tokenizer_config
