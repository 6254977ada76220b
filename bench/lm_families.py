"""Sweep: the LM families people ship (``bench/lm_family_zoo.py``), exported the way they are
(``transformers.integrations.executorch``'s ``TorchExportableModuleForDecoderOnlyLM``, the
runner's metadata as constant methods, XNNPACK), uploaded as ``.pte`` to a real ``pteforge
serve`` with their tokenizer and chat template, and talked to through the ``openai`` client
and ``/v2`` generate.

For each family it reports: the export compiles; the ``.pte``'s in-process greedy tokens equal
eager ``transformers`` ``generate``; greedy answers over HTTP (completions and chat, streamed
and not) carry those tokens; the chat prompt is the one ``transformers``'
``apply_chat_template`` renders; streamed text equals the whole text (CJK, emoji); stop
strings, the context limit, an empty prompt and a two-turn session.

    .venv/bin/python -m bench.lm_families [family ...]   # all families when none is named

Built files are cached in ``$TMPDIR/pteforge-lm-families/<family>``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import torch

from bench import lm_family_tokenizers
from bench.lm_family_checks import PATHS, check_served
from bench.lm_family_zoo import FAMILIES, Family, make_config
from tests.generation import lm_export

MAX_SEQ_LEN = 128
SEED = 0


def build(family: Family) -> Path:
    """The family's ``model.pte``, tokenizer files and ``metadata.json`` (cached)."""
    directory = Path(tempfile.gettempdir()) / "pteforge-lm-families" / family.name
    if (directory / "model.pte").exists():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    lm_family_tokenizers.train(family.tokenizer, directory)
    tokenizer = load_tokenizer(directory)
    model = eager_model(family, directory)
    bos = (
        tokenizer.bos_token_id
        if tokenizer.bos_token_id is not None
        else eos_ids(family, tokenizer)[0]
    )
    metadata = lm_export.runner_metadata(model, MAX_SEQ_LEN, bos, eos_ids(family, tokenizer), True)
    pte = lm_export.lower(model, metadata, dynamic=True)
    (directory / "metadata.json").write_text(json.dumps(metadata, indent=1))
    (directory / "model.pte").write_bytes(pte)
    return directory


def build_edge_manager(family: Family, directory: Path) -> Path:
    """The same model exported by upstream's ``executorch.extension.llm.export``
    ``LLMEdgeManager`` (strict export, its ``ConvertToLinearPass`` and constant folding),
    over the ``transformers`` static-cache module: ``edge_manager.pte`` (cached)."""
    import copy

    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.extension.llm.export.builder import LLMEdgeManager
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    out = directory / "edge_manager.pte"
    if out.exists():
        return out
    metadata = json.loads((directory / "metadata.json").read_text())
    model: Any = copy.deepcopy(eager_model(family, directory))
    model.generation_config.cache_implementation = "static"
    length = int(metadata["get_max_seq_len"])
    module = TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=length)
    seq = torch.export.Dim("seq_len", min=1, max=length)
    kwargs = {"input_ids": torch.ones((1, 2), dtype=torch.long), "cache_position": torch.arange(2)}
    manager = LLMEdgeManager(
        module.model, family.name, length, True, (), example_kwarg_inputs=kwargs,
        enable_dynamic_shape=True, metadata=dict(metadata),
        dynamic_shapes={"input_ids": {1: seq}, "cache_position": {0: seq}},
    )  # fmt: skip
    manager.export().to_edge_transform_and_lower([XnnpackPartitioner()]).to_executorch()
    out.write_bytes(manager.export_program.buffer)
    return out


def load_tokenizer(directory: Path) -> Any:
    """The ``transformers`` tokenizer of the files (the reference for encoding and chats)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory))


def eos_ids(family: Family, tokenizer: Any) -> list[int]:
    return [int(tokenizer.convert_tokens_to_ids(t)) for t in family.tokenizer.eos]


def eager_model(family: Family, directory: Path) -> torch.nn.Module:
    """The family's model at the tokenizer's vocabulary, seeded weights, eval mode."""
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(directory)
    eos = eos_ids(family, tokenizer)
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else eos[0]
    config = make_config(family, len(tokenizer), MAX_SEQ_LEN, bos, eos)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model: torch.nn.Module = AutoModelForCausalLM.from_config(config)
    return model.eval()


def run(name: str) -> dict[str, Any]:
    """Build one family and check it in process and, if ``serve``, over HTTP."""
    family = FAMILIES[name]
    row: dict[str, Any] = {"family": name}
    try:
        directory = build(family)
        row["compiles"] = True
    except Exception as exc:
        traceback.print_exc()
        return {**row, "compiles": f"no: {type(exc).__name__}: {str(exc)[:200]}"}
    row["dir"] = str(directory)
    if "edge" in PATHS:
        try:
            build_edge_manager(family, directory)
            row["edge_compiles"] = True
        except Exception as exc:
            traceback.print_exc()
            row["edge_compiles"] = f"no: {type(exc).__name__}: {str(exc)[:200]}"
    return row


def main(names: list[str]) -> None:
    rows = [run(name) for name in names or list(FAMILIES)]
    built = {r["family"]: Path(r["dir"]) for r in rows if r.get("compiles") is True}
    if built:
        served = check_served(built, {n: FAMILIES[n] for n in built})
        for row in rows:
            row.update(served.get(row["family"], {}))
    for row in rows:
        print(json.dumps(row, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1:])
