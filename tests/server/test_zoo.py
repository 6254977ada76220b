"""The model zoo end to end through a real ``pteforge serve`` over a socket.

Every architecture of ``tests.zoo`` (tiny configs: hidden 32, 1-2 layers, 8-16 tokens,
32x32 images) is exported, uploaded with one part per method, compiled, downloaded, run in
``executorch.runtime`` against eager PyTorch, and called remotely with tritonclient.http
(JSON and binary) and KServe's REST client (JSON and binary), whose outputs must equal the
in-process runtime's exactly.

Budget (the whole file in about 4 minutes on 2 idle cores; one XNNPACK job on a tiny
transformers model costs 5-18 s of CPU, mostly upstream to_edge and XNNPACK preprocess of
many small partitions): the twelve architectures the issue names, which cover every family,
are compiled with the XNNPACK partitioner plan, the one most users ship. GPT-2 (prefill and
decode) and ResNet also go through the XNNPACK int8 dynamic plan, whose artifacts must
compile and reach 20 dB SQNR, and ResNet through the portable and OpenVINO plans. The
alternatives the issue offers (BART, Marian, Qwen2, Mistral) take the cheaper portable plan:
the decoders among them cover a prefill/decode pair without a partitioner, so GPT-2 does not
repeat it. ``bench/zoo.py`` runs every model under every plan of ``PLANS`` at larger sizes.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.server.service import ServiceProcess
from tests.zoo import ZOO, ZooEntry, ZooModel
from tests.zoo.flow import Cell, run_model
from tests.zoo.remote import CLIENTS, Endpoint, metadata, tensor_names

pytestmark = pytest.mark.zoo

ALL_PLANS = ("portable", "xnnpack", "xnnpack-int8")
"""The plans this file runs; ``bench/zoo.py`` also runs the OpenVINO ones (``PLANS``)."""
TEST_PLANS: dict[str, tuple[str, ...]] = {
    "gpt2": ("xnnpack", "xnnpack-int8"),
    "resnet": (*ALL_PLANS, "openvino"),  # OpenVINO's column: ~13 s more on a loaded VM
    **dict.fromkeys(("bart", "marian", "qwen2", "mistral"), ("portable",)),
}
"""Plans per model in this file; any other model takes the XNNPACK partitioner plan."""
REQUIRED = {"whisper", "t5", "gpt2", "llama", "bert", "distilbert", "roberta", "vit", "wav2vec2"}


def _params() -> list[object]:
    """One case per model; those with several plans are marked slow."""
    return [
        pytest.param(e, id=e.name, marks=[pytest.mark.slow] * (len(_plans(e.name)) > 1))
        for e in ZOO
    ]


def _plans(name: str) -> tuple[str, ...]:
    return TEST_PLANS.get(name, ("xnnpack",))


@pytest.fixture(scope="module")
def endpoint(service: ServiceProcess) -> Endpoint:
    assert service.admin_token
    return Endpoint(service.url, service.admin_token)


def test_zoo_covers_the_families() -> None:
    names = {entry.name for entry in ZOO}
    assert len(names) == len(ZOO) >= 12
    assert names >= REQUIRED
    assert names & {"bart", "marian"} and names & {"resnet", "convnext"} and "clip" in names
    assert {e.family for e in ZOO} >= {"encoder-decoder", "decoder", "encoder", "vision", "audio"}


@pytest.mark.parametrize("entry", _params())
def test_model_through_the_service(
    entry: ZooEntry, admin: httpx.Client, endpoint: Endpoint, tmp_path: Path
) -> None:
    model = entry.build("small")
    cells = run_model(admin, endpoint, model, _plans(entry.name), tmp_path)
    for cell in cells:
        assert cell.upload == "ok", cell.upload
        _assert_names(cell, model, endpoint)
        assert cell.compile == "ok", cell.compile
        assert cell.run == "ok", cell.run
        _assert_numerics(cell)
        assert cell.remote == dict.fromkeys(CLIENTS, "equal"), cell.remote


def _assert_names(cell: Cell, model: ZooModel, endpoint: Endpoint) -> None:
    """``/v1`` and ``/v2`` show the program's own input names, the wrappers' parameters."""
    assert cell.program is not None
    shown = {m["name"]: [t["name"] for t in m["inputs"]] for m in cell.program["methods"]}
    assert shown == {method: list(inputs) for method, inputs in model.inputs.items()}
    if cell.compiled is not None and cell.compiled.artifact is not None:
        for method, inputs in model.inputs.items():
            served = f"{cell.compiled.artifact['id']}.{method}"
            assert tensor_names(metadata(endpoint, served))[0] == list(inputs)


def _assert_numerics(cell: Cell) -> None:
    """fp32: within 1e-4 relative error of eager; int8: SQNR reported and >= 20 dB."""
    for method, numerics in cell.numerics.items():
        assert numerics.within(cell.quantized), (method, numerics)
    assert cell.compiled is not None and cell.compiled.artifact is not None
    verified = cell.compiled.artifact.get("numerics")
    if verified is not None:  # the service's own verify stage agrees
        assert not verified.get("flagged"), verified
