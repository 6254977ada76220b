"""Programs exported from real ``transformers`` models pass the upload validator and load.

ALBERT and a Whisper-style decoder, called with attention masks, were refused because
``aten.__and__`` was spelled with underscores; every operator of these exports is accepted.
"""

from __future__ import annotations

import json
import multiprocessing
import zipfile
from pathlib import Path

import pytest

from pteforge.children.forkserver import SANDBOX_PRELOAD
from pteforge.server.sandbox import (
    ForkServerIsolation,
    load_programs_isolated,
    validate_pt2_archive,
)
from pteforge.server.sandbox.operators import refusal

from .hf_models import EXPORTS, MODELS, export_model


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """Every method of every model, saved with ``torch.export.save``."""
    directory = tmp_path_factory.mktemp("hf")
    files = {
        (model, method): path
        for model in sorted(MODELS)
        for method, path in export_model(model, directory).items()
    }
    assert sorted(files) == sorted(EXPORTS)
    return files


def _targets(path: Path) -> set[str]:
    """Every operator a saved program names (node targets and operator arguments)."""
    with zipfile.ZipFile(path) as archive:
        [entry] = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        stack = [json.loads(archive.read(entry))]
    found = set()
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("target", "as_operator") and isinstance(value, str):
                    found.add(value)
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return found


def test_masked_exports_use_the_operators_that_were_refused(
    exported: dict[tuple[str, str], Path],
) -> None:
    for key in (("albert", "forward"), ("bert", "forward"), ("whisper", "decode")):
        assert "torch.ops.aten.__and__.Tensor" in _targets(exported[key]), key


@pytest.mark.parametrize(("model", "method"), EXPORTS)
def test_every_operator_of_a_real_export_is_accepted(
    model: str, method: str, exported: dict[tuple[str, str], Path]
) -> None:
    path = exported[(model, method)]
    assert {t: refusal(t) for t in _targets(path) if refusal(t)} == {}
    [spec] = validate_pt2_archive(path).methods
    assert spec.inputs and spec.outputs


def test_real_exports_load_in_the_upload_sandbox(exported: dict[tuple[str, str], Path]) -> None:
    """The service's own path: validate here, then load in a child of the fork server."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(SANDBOX_PRELOAD)  # no effect if another test started it first
    isolation = ForkServerIsolation(ctx)
    for key, path in exported.items():
        [method] = load_programs_isolated(path, isolation=isolation).methods
        assert method.inputs, key
