"""OpenVINO, the second backend the runtime here executes; Vulkan, compile-only.

Every entry also passes the shared suite of ``test_entries.py`` (the openvino partitioner's
MLP against eager included); this file covers what is particular to these two.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pteforge.backends import BackendCatalog, default_catalog
from pteforge.backends.openvino import openvino_compile_specs
from pteforge.backends.options import OpenvinoOptions
from pteforge.children.limits import FP32_CPU_ENV, child_env
from pteforge.manager import CompiledProgram, LoweringError, compile_programs, verify_numerics
from pteforge.manager.errors import PlanError
from tests.backends.harness import delegated_backends, run_pte, tiny_mlp, tiny_mlp_module
from tests.models import MultiMethod, shared_linear_programs

MIXED = {
    "methods": {"encode": {"partitioners": ["openvino"]}, "decode": {"partitioners": ["xnnpack"]}}
}


@pytest.fixture(scope="module")
def pair() -> MultiMethod:
    return shared_linear_programs(32)


@pytest.fixture(scope="module")
def mixed(pair: MultiMethod, catalog: BackendCatalog) -> CompiledProgram:
    return compile_programs(pair.programs, MIXED, catalog)


def test_device_option_becomes_the_device_compile_spec() -> None:
    specs = openvino_compile_specs(OpenvinoOptions(device="GPU.1"))
    assert [(spec.key, spec.value) for spec in specs] == [("device", b"GPU.1")]
    assert openvino_compile_specs(OpenvinoOptions())[0].value == b"CPU"


def test_openvino_executes_here_and_says_what_precision_it_runs() -> None:
    entry = default_catalog().get("openvino")
    assert entry.can_execute() is True
    assert "bf16" in entry.description and "precision hint" in entry.description


# What upstream's runtime does with a compiled method: import the exported blob, no properties.
_IMPORTED_ERROR = """
import numpy as np, openvino as ov, openvino.opset13 as ops
rng = np.random.default_rng(0)
x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((8, 64), (64, 64), (64, 64)))
p = ops.parameter([8, 64], np.float32)
hidden = ops.relu(ops.matmul(p, ops.constant(w1), False, False))
out = ops.matmul(hidden, ops.constant(w2), False, False)
core = ov.Core()
compiled = core.compile_model(ov.Model([out], [p]), "CPU")
imported = core.import_model(compiled.export_model(), "CPU")
print(float(np.abs(imported([x])[0] - np.maximum(x @ w1, 0) @ w2).max()))
"""


def _imported_error(env: dict[str, str]) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED_ERROR], env=env, capture_output=True, text=True,
        timeout=300, check=True,
    )  # fmt: skip
    return float(done.stdout.strip().splitlines()[-1])


def test_pteforge_processes_run_fp32_methods_in_fp32_on_cpus_with_bf16() -> None:
    """Issue 19: fp32 plans stay fp32 where the CPU offers bf16. The precision hint cannot
    travel (the runtime imports with no properties), so children and the command line cap
    oneDNN below bf16 (``FP32_CPU_ENV``); without the cap such a CPU runs the MLP in bf16."""
    env = child_env()
    assert env.items() >= FP32_CPU_ENV.items()
    assert _imported_error(env) < 1e-5
    flags = set(Path("/proc/cpuinfo").read_text().split())
    if flags & {"avx512_bf16", "amx_bf16"}:
        uncapped = {name: value for name, value in env.items() if name not in FP32_CPU_ENV}
        assert _imported_error(uncapped) > 1e-4


def test_whole_graph_openvino_delegate_matches_eager(catalog: BackendCatalog) -> None:
    model = tiny_mlp()
    value = base64.b64encode(b"CPU").decode()
    target = {
        "backend_id": "OpenvinoBackend",
        "compile_specs": [{"key": "device", "value_b64": value}],
    }
    compiled = compile_programs(model.programs, {"all": {"delegate": target}}, catalog)
    assert delegated_backends(compiled.pte) == ["OpenvinoBackend"]
    (inputs,) = model.inputs.values()
    (actual,) = run_pte(compiled.pte, "forward", inputs)
    torch.testing.assert_close(actual, model.eager["forward"](*inputs), rtol=1e-4, atol=1e-5)


def test_mixed_plan_runs_each_method_on_its_backend(
    pair: MultiMethod, mixed: CompiledProgram
) -> None:
    assert sorted(delegated_backends(mixed.pte)) == ["OpenvinoBackend", "XnnpackBackend"]
    for method in ("encode", "decode"):
        inputs = pair.inputs[method]
        (actual,) = run_pte(mixed.pte, method, inputs)
        expected = pair.eager[method](*inputs)
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)


def test_mixed_plan_passes_the_numerics_check(pair: MultiMethod, mixed: CompiledProgram) -> None:
    numerics = verify_numerics(pair.programs, mixed)
    assert numerics["status"] == "passed", numerics
    assert set(numerics["methods"]) == {"encode", "decode"}


class _Scaled(torch.nn.Module):
    """A linear whose input is scaled by a non-persistent buffer (a lifted constant)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x * self.scale)


def test_lowering_leaves_the_callers_program_runnable(catalog: BackendCatalog) -> None:
    """Upstream's to_backend pops the constants OpenVINO takes from a constants dict that
    to_edge shares with the caller's program; the numerics check then ran the original
    program and failed with a KeyError (BERT, Llama, CLIP in the zoo)."""
    x = torch.randn(2, 8)
    program = torch.export.export(_Scaled().eval(), (x,))
    before, want = dict(program.constants), program.module()(x)
    compile_programs({"forward": program}, {"all": {"partitioners": ["openvino"]}}, catalog)
    assert program.constants.keys() == before.keys()
    torch.testing.assert_close(program.module()(x), want)


def test_int8_recipe_is_refused_saying_why(catalog: BackendCatalog) -> None:
    """A plan that quantizes for OpenVINO is refused by the plan check, before any work; a
    program that arrives quantized is refused by the partitioner, naming the node."""
    model = tiny_mlp()
    recipe = "xnnpack_pt2e_int8_dynamic_per_channel"
    plan = {"all": {"partitioners": ["openvino"], "quantize": recipe}}
    with pytest.raises(PlanError) as refused:
        compile_programs(model.programs, plan, catalog)
    assert refused.value.field == "all.quantize" and "fp32 programs only" in str(refused.value)
    quantized = catalog.get_quantizer(recipe).quantize(
        model.programs["forward"], [model.inputs["forward"]]
    )
    with pytest.raises(LoweringError) as raised:
        compile_programs({"forward": quantized}, {"all": {"partitioners": ["openvino"]}}, catalog)
    error = raised.value  # names the method, the backend and the quantized node's operator
    assert (error.method, error.backend_id) == ("forward", "OpenvinoBackend")
    assert error.node and error.operator and "quantize" in error.operator
    assert f"cannot lower node {error.node!r} (operator {error.operator})" in str(error)
    assert "fp32 programs only" in str(error)
    assert "quantized reference" in str(error)


def test_vulkan_compiles_but_is_not_executable_here(catalog: BackendCatalog) -> None:
    model = tiny_mlp()
    compiled = compile_programs(model.programs, {"all": {"partitioners": ["vulkan"]}}, catalog)
    assert delegated_backends(compiled.pte) == ["VulkanBackend"]
    assert catalog.get("vulkan").can_execute() is False
    record = verify_numerics(model.programs, compiled)["methods"]["forward"]
    assert record["status"] == "not_executable"
    assert "VulkanBackend" in record["message"] and "cannot execute" in record["message"]
    with pytest.raises(RuntimeError, match="Failed to load method"):
        run_pte(compiled.pte, "forward", model.inputs["forward"])


def test_importing_openvino_sends_no_telemetry(tmp_path: Path) -> None:
    """A fresh process (pytest itself turns NNCF's telemetry off) writes nothing to ~/intel:
    a confined lowering child may not, and a compile service must not phone home."""
    code = (
        "import sys; from pteforge.backends import register_lowering_backends; "
        "register_lowering_backends(); import openvino; "
        "assert sys.modules['openvino_telemetry'] is None"
    )
    env = {**os.environ, "HOME": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=600)
    assert not (tmp_path / "intel").exists()


def test_an_openvino_conversion_failure_names_the_node_and_operator(
    catalog: BackendCatalog,
) -> None:
    """OpenVINO's frontend refuses EfficientNet's final pooling (a kernel larger than its
    1x1 input, ceil_mode) at lowering; its message names the node only as a friendly_name
    ('aten_avg_pool2d_default/aten.avg_pool2d.default/AvgPool'), which the error reads."""
    pool = torch.nn.AvgPool2d(4, ceil_mode=True).eval()
    program = torch.export.export(pool, (torch.randn(1, 2, 1, 1),))
    plan = {"all": {"partitioners": ["openvino"]}}
    with pytest.raises(LoweringError) as raised:
        compile_programs({"forward": program}, plan, catalog)
    error = raised.value
    assert (error.method, error.backend_id) == ("forward", "OpenvinoBackend")
    assert (error.node, error.operator) == ("aten_avg_pool2d_default", "aten.avg_pool2d.default")


def test_a_dynamic_program_is_refused_naming_its_input(catalog: BackendCatalog) -> None:
    """OpenvinoBackend answered a batch of 5 with 8 rows (the dimension's max) for this MLP,
    and failed in preprocess for BERT with a dynamic sequence: refused, saying so."""
    batch = torch.export.Dim("batch", min=1, max=8)
    program = torch.export.export(
        tiny_mlp_module().eval(), (torch.randn(4, 32),), dynamic_shapes=({0: batch},)
    )
    with pytest.raises(LoweringError) as raised:
        compile_programs({"forward": program}, {"all": {"partitioners": ["openvino"]}}, catalog)
    error = raised.value
    assert (error.method, error.backend_id, error.node) == ("forward", "OpenvinoBackend", "x")
    assert "static shapes only" in str(error) and "input of shape [s" in str(error)
