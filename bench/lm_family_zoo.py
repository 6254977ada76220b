"""Small configs of the LM families people ship, with their tokenizer style and chat template
(the templates are the families' own ``tokenizer_config.json`` ones, Qwen's tool branches
left out). Used by ``bench/lm_families.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.lm_family_tokenizers import TokenizerStyle

CHATML_QWEN = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}"
    "{%- endif %}\n"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) "
    "or (message.role == 'assistant') %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}{%- endfor %}\n"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}\n"
)
"""Qwen2.5's template without tools (a default system message)."""

QWEN3 = (
    "{%- if messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{%- endif %}\n"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n"
    "{%- for message in messages[::-1] %}{%- set index = (messages|length - 1) - loop.index0 %}"
    "{%- if ns.multi_step_tool and message.role == 'user' and message.content is string and "
    "not(message.content.startswith('<tool_response>') and "
    "message.content.endswith('</tool_response>')) %}"
    "{%- set ns.multi_step_tool = false %}{%- set ns.last_query_index = index %}{%- endif %}"
    "{%- endfor %}\n"
    "{%- for message in messages %}"
    "{%- if message.content is string %}{%- set content = message.content %}"
    "{%- else %}{%- set content = '' %}{%- endif %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{%- if '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content }}{{- '<|im_end|>\\n' }}"
    "{%- endif %}{%- endfor %}\n"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)
"""Qwen3's template without tools: a namespace, a reversed loop, ``is string``."""

SMOLLM = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
LLAMA32 = (
    "{{- bos_token }}\n{%- if not date_string is defined %}{%- if strftime_now is defined %}"
    "{%- set date_string = strftime_now('%d %b %Y') %}{%- else %}"
    "{%- set date_string = '26 Jul 2024' %}{%- endif %}{%- endif %}\n"
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content']|trim %}{%- set messages = messages[1:] %}"
    "{%- else %}{%- set system_message = '' %}{%- endif %}\n"
    "{{- '<|start_header_id|>system<|end_header_id|>\n\n' }}"
    "{{- 'Today Date: ' + date_string + '\n\n' }}{{- system_message }}{{- '<|eot_id|>' }}\n"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + "
    "message['content'] | trim + '<|eot_id|>' }}{%- endfor %}\n"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}\n"
)
"""Llama 3.2's template without tools: today's date by ``strftime_now``."""
PHI3 = (
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)
GEMMA = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}"
    "{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)
MISTRAL = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content'] %}"
    "{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set loop_messages = messages %}{%- endif %}\n\n"
    "{{- bos_token }}\n{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('After the optional system message, conversation roles must "
    "alternate user/assistant/user/assistant/...') }}{%- endif %}"
    "{%- if message['role'] == 'user' %}"
    "{%- if loop.first and system_message is defined %}"
    "{{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}"
    "{%- else %}{{- ' [INST] ' + message['content'] + ' [/INST]' }}{%- endif %}"
    "{%- elif message['role'] == 'assistant' %}{{- ' ' + message['content'] + eos_token}}"
    "{%- else %}{{- raise_exception('Only user and assistant roles are supported, with the "
    "exception of an initial optional system message!') }}{%- endif %}{%- endfor %}\n"
)
"""Mistral-7B-Instruct-v0.2's template (no generation prompt: the [/INST] is it)."""

QWEN_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@dataclass(frozen=True)
class Family:
    """One family: its ``transformers`` config class and fields, and its tokenizer."""

    name: str
    config_class: str
    fields: dict[str, Any]
    tokenizer: TokenizerStyle
    system_ok: bool = True  # whether the template takes a system message


_LLAMA_LIKE = {
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "initializer_range": 0.2,
}  # fmt: skip

GEMMA_TOKENIZER = TokenizerStyle(
    "metaspace-noprefix",
    ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"),
    "<bos>", ("<eos>", "<end_of_turn>"), GEMMA,
)  # fmt: skip
"""Gemma's and Gemma 2's tokenizer: one family of tokens and one template."""

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "qwen2", "Qwen2Config", {**_LLAMA_LIKE, "tie_word_embeddings": True},
            TokenizerStyle("qwen", QWEN_TOKENS, None, ("<|im_end|>", "<|endoftext|>"), CHATML_QWEN),
        ),
        Family(
            "qwen3", "Qwen3Config", {**_LLAMA_LIKE, "head_dim": 32, "tie_word_embeddings": True},
            TokenizerStyle("qwen", QWEN_TOKENS, None, ("<|im_end|>", "<|endoftext|>"), QWEN3),
        ),
        Family(
            "smollm", "LlamaConfig", {**_LLAMA_LIKE, "tie_word_embeddings": True},
            TokenizerStyle(
                "bytelevel", ("<|endoftext|>", "<|im_start|>", "<|im_end|>"), None,
                ("<|im_end|>", "<|endoftext|>"), SMOLLM,
            ),
        ),
        Family(
            "llama3", "LlamaConfig", _LLAMA_LIKE,
            TokenizerStyle(
                "bytelevel",
                ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                 "<|end_header_id|>", "<|eot_id|>"),
                "<|begin_of_text|>", ("<|eot_id|>", "<|end_of_text|>"), LLAMA32,
            ),
        ),
        Family(
            "phi3", "Phi3Config", {**_LLAMA_LIKE, "num_key_value_heads": 4, "pad_token_id": 0},
            TokenizerStyle(
                "metaspace", ("<unk>", "<s>", "</s>", "<|endoftext|>", "<|system|>", "<|user|>",
                              "<|assistant|>", "<|end|>"),
                "<s>", ("<|endoftext|>", "<|end|>"), PHI3,
            ),
        ),
        Family(
            "gemma", "GemmaConfig",
            {**_LLAMA_LIKE, "head_dim": 16, "hidden_activation": "gelu_pytorch_tanh"},
            GEMMA_TOKENIZER,
            system_ok=False,
        ),
        Family(
            "gemma2", "Gemma2Config",
            {**_LLAMA_LIKE, "head_dim": 16, "sliding_window": 16,
             "hidden_activation": "gelu_pytorch_tanh"},
            GEMMA_TOKENIZER,
            system_ok=False,
        ),
        Family(
            "mistral", "MistralConfig", {**_LLAMA_LIKE, "sliding_window": None},
            TokenizerStyle("metaspace", ("<unk>", "<s>", "</s>"), "<s>", ("</s>",), MISTRAL),
        ),
        Family(
            "gpt2", "GPT2Config",
            {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_inner": 128, "initializer_range": 0.3},
            TokenizerStyle("bytelevel", ("<|endoftext|>",), None, ("<|endoftext|>",), None),
        ),
    )
}  # fmt: skip


def make_config(family: Family, vocab: int, max_seq_len: int, bos: int, eos: list[int]) -> Any:
    """The family's ``transformers`` config at this vocabulary and context."""
    import transformers

    config_class = getattr(transformers, family.config_class)
    fields = dict(family.fields)
    if family.name == "gpt2":
        fields["n_positions"] = max_seq_len
    else:
        fields["max_position_embeddings"] = max_seq_len
    return config_class(vocab_size=vocab, bos_token_id=bos, eos_token_id=eos, **fields)
