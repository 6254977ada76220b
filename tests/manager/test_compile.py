"""``compile_programs``: plans over the backend catalog, down to a running ``.pte``."""

from __future__ import annotations

import pytest
import torch

from pteforge.backends import BackendCatalog
from pteforge.manager import LoweringError, PlanError, ProgramInputError, compile_programs
from tests.manager.helpers import assert_runs_like_eager, run_method
from tests.models import (
    INT8_XNNPACK,
    MultiMethod,
    attention_pool_programs,
    small_mlp_programs,
    unsupported_op_programs,
)


def test_hf_encoder_decoder_mixed_plan_runs_like_eager(
    hf_model: MultiMethod, catalog: BackendCatalog
) -> None:
    stages: list[str] = []
    plan = {"methods": {"encode": {"partitioners": ["xnnpack"]}, "decode": {}}}
    compiled = compile_programs(hf_model.programs, plan, catalog, on_stage=stages.append)
    assert stages == ["to_edge", "partition", "preprocess", "emit"]
    report = compiled.report["methods"]
    assert report["encode"]["backends"]["XnnpackBackend"]["delegated_operators"] > 0
    assert report["decode"]["backends"] == {}
    assert report["decode"]["non_delegated_operators"] > 0
    assert compiled.report["program"]["shared_constant_bytes"] > 0  # the shared embedding
    decode = compiled.methods["decode"]
    assert [(i.dtype, i.shape) for i in decode.inputs] == [
        ("int64", (1, 4)),
        ("float32", (1, 8, 32)),
    ]
    assert [(o.dtype, o.shape) for o in decode.outputs] == [("float32", (1, 4, 64))]
    assert_runs_like_eager(compiled.pte, hf_model, atol=1e-4, rtol=1e-4)


def test_quantized_plan_calibrates_on_example_inputs(
    catalog: BackendCatalog, tmp_path: object
) -> None:
    model = small_mlp_programs()
    stages: list[str] = []
    plan = {
        "all": {"partitioners": ["xnnpack"], "quantize": "xnnpack_pt2e_int8_static_per_channel"}
    }
    compiled = compile_programs(model.programs, plan, catalog, on_stage=stages.append)
    assert stages == ["quantize", "to_edge", "partition", "preprocess", "emit"]
    operators = compiled.report["methods"]["forward"]["operators"]
    assert any("quantize" in op and n["delegated"] for op, n in operators.items())
    (inputs,) = model.inputs.values()
    got = run_method(compiled.pte, "forward", inputs)[0]
    expected = model.eager["forward"](*inputs)
    assert float((got - expected).abs().max()) <= 0.05 * float(expected.abs().max())


class Gated(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * gate  # type: ignore[no-any-return]


def test_a_program_exported_with_keywords_calibrates_on_them(catalog: BackendCatalog) -> None:
    """``transformers`` models are exported with keyword inputs (``input_ids=...``): the
    default calibration takes them, in the program's input order, as it takes positional
    ones (it asked for calibration tensors instead)."""
    torch.manual_seed(0)
    model, x, gate = Gated().eval(), torch.randn(2, 16), torch.rand(2, 4)
    program = torch.export.export(model, (), {"gate": gate, "x": x})
    recipe = "xnnpack_pt2e_int8_static_per_channel"
    plan = {"all": {"partitioners": ["xnnpack"], "quantize": recipe}}
    compiled = compile_programs({"forward": program}, plan, catalog)
    assert [i.name for i in compiled.methods["forward"].inputs] == ["gate", "x"]  # as given
    (got,) = run_method(compiled.pte, "forward", [gate, x])
    expected = model(x, gate).detach()
    assert float((got - expected).abs().max()) <= 0.05 * float(expected.abs().max())


def test_quantize_ops_left_outside_the_delegate_emit_and_run(catalog: BackendCatalog) -> None:
    """Emitting them needs upstream's quantized ops library loaded: it failed with
    "Missing out variants: {'quantized_decomposed::quantize_per_tensor', ...}"."""
    model = attention_pool_programs()
    compiled = compile_programs(model.programs, INT8_XNNPACK, catalog)
    operators = compiled.report["methods"]["forward"]["operators"]
    assert any("quantize" in op and n["non_delegated"] for op, n in operators.items())
    (inputs,) = model.inputs.values()
    got = run_method(compiled.pte, "forward", inputs)[0]
    expected = model.eager["forward"](*inputs).detach()
    assert float((got - expected).abs().max()) <= 0.05 * float(expected.abs().max())


def test_unknown_partitioner_names_the_field(catalog: BackendCatalog) -> None:
    model = small_mlp_programs()
    with pytest.raises(PlanError) as raised:
        compile_programs(model.programs, {"all": {"partitioners": ["xnnpak"]}}, catalog)
    assert raised.value.field == "all.partitioners[0]"  # as written, not the method it reached
    assert "xnnpack" in str(raised.value)  # the known names are listed


def test_unknown_delegate_backend_lists_registered(catalog: BackendCatalog) -> None:
    model = small_mlp_programs()
    plan = {"all": {"delegate": {"backend_id": "NoSuchBackend"}}}
    with pytest.raises(PlanError) as raised:
        compile_programs(model.programs, plan, catalog)
    assert raised.value.field == "all.delegate.backend_id"
    assert "registered backend ids: " in str(raised.value)
    assert "XnnpackBackend" in str(raised.value)


def test_whole_graph_plan_on_unsupported_op_names_node(catalog: BackendCatalog) -> None:
    model = unsupported_op_programs()
    plan = {"methods": {"forward": {"delegate": {"backend_id": "XnnpackBackend"}}}}
    with pytest.raises(LoweringError) as raised:
        compile_programs(model.programs, plan, catalog)
    error = raised.value
    assert (error.method, error.backend_id) == ("forward", "XnnpackBackend")
    assert error.node == "aten_embedding_default"
    assert error.operator is not None and "embedding" in error.operator


def test_compiled_program_writes_its_bytes(catalog: BackendCatalog, tmp_path: object) -> None:
    from pathlib import Path

    model = small_mlp_programs()
    compiled = compile_programs(model.programs, None, catalog)
    target = Path(str(tmp_path)) / "mlp.pte"
    compiled.write(target)
    assert target.read_bytes() == compiled.pte
    (inputs,) = model.inputs.values()
    torch.testing.assert_close(
        run_method(target.read_bytes(), "forward", inputs)[0], model.eager["forward"](*inputs)
    )


class _Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_a_memory_plan_past_64_bits_is_the_programs_error(catalog: BackendCatalog) -> None:
    """A Dim max of 2**62 float32 elements plans 2**64 bytes: invalid_program, not a bug."""
    seq = torch.export.Dim("seq", min=2, max=1 << 62)
    program = torch.export.export(_Scale(), (torch.randn(1, 8),), dynamic_shapes=({1: seq},))
    with pytest.raises(ProgramInputError, match="does not fit in 64 bits") as info:
        compile_programs({"forward": program}, {}, catalog)
    assert info.value.code == "invalid_program"


class _Frames(torch.nn.Module):
    """Audio frames after a 4-sample header: a derived dimension, ``4 * n - 4`` samples."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, 4:] * 2


def test_a_derived_dimension_read_back_from_its_archive_compiles(
    catalog: BackendCatalog, tmp_path: object
) -> None:
    """torch 2.13 reads a derived dimension's example size and range back keyed by the
    expression, not the symbol: to_edge of the read program failed ("expected sympy.Symbol";
    Moonshine's encoder over ``384 * n - 256`` samples: a data-dependent guard), though the
    program as exported lowered. Uploads and ``pteforge compile`` read archives so."""
    from pathlib import Path

    from pteforge.manager.loading import load_program_file

    n = torch.export.Dim("n", min=2, max=64)
    program = torch.export.export(
        _Frames(), (torch.randn(1, 32),), dynamic_shapes=({1: 4 * n - 4},)
    )
    torch.export.save(program, Path(str(tmp_path)) / "frames.pt2")
    read = load_program_file(Path(str(tmp_path)) / "frames.pt2")
    compiled = compile_programs({"forward": read}, {}, catalog)
    x = torch.randn(1, 4 * 20 - 4)
    torch.testing.assert_close(run_method(compiled.pte, "forward", [x])[0], x[:, 4:] * 2)


class GeluPair(torch.nn.Module):
    """Gemma's MLP activation (``gelu_pytorch_tanh``) next to the exact GELU."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        gelu = torch.nn.functional.gelu
        return gelu(x, approximate="tanh"), gelu(x)


def test_tanh_gelu_is_not_delegated_as_the_exact_one(catalog: BackendCatalog) -> None:
    """XNNPACK ran ``gelu(approximate="tanh")`` as the exact GELU (4.7e-4 off on [-6, 6]),
    which flagged Gemma 3 over tolerance: the tanh one now stays portable, the exact one
    is still delegated, and both equal eager."""
    x = torch.linspace(-6, 6, 1201).reshape(1, -1)
    program = torch.export.export(GeluPair(), (x,))
    compiled = compile_programs(
        {"forward": program}, {"all": {"partitioners": ["xnnpack"]}}, catalog
    )
    report = compiled.report["methods"]["forward"]
    assert report["backends"]["XnnpackBackend"]["delegated_operators"] == 1
    assert report["non_delegated_operators"] >= 1
    tanh, exact = run_method(compiled.pte, "forward", [x])
    torch.testing.assert_close(tanh, GeluPair()(x)[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(exact, GeluPair()(x)[1], rtol=1e-5, atol=1e-5)


class _DataDependentSlice(torch.nn.Module):
    """OPT's ``position_ids[:, past_seen_tokens:]``: exports, but upstream's ``to_edge``
    cannot decompose the slice (it guards on the start being negative)."""

    def forward(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        return x[:, position[0].item() :] * 2


def test_a_method_to_edge_refuses_blames_no_backend(catalog: BackendCatalog) -> None:
    """The error said "method None: backend '(partitioner backend)' cannot lower an
    unidentified node" for a failure no backend had a part in (in-process ExecuTorch's
    ``to_edge`` fails alike): it names the method and upstream's reason, and no backend."""
    program = torch.export.export(_DataDependentSlice(), (torch.randn(1, 8), torch.tensor([3])))
    with pytest.raises(LoweringError) as raised:
        compile_programs({"forward": program}, {"all": {"partitioners": ["xnnpack"]}}, catalog)
    message = str(raised.value)
    assert message.startswith("method 'forward' failed before any backend partitioned it: ")
    assert "GuardOnDataDependentSymNode" in message and raised.value.backend_id is None


def test_a_backend_failure_naming_no_node_reads_as_the_backends() -> None:
    """SpeechT5's speech encoder with a dynamic length: XNNPACK's preprocess raised "Output
    node 'aten_linear_default' is already in the inputs", and the job said the backend
    "cannot lower an unidentified node", as if pteforge had lost a node: it says the backend
    could not lower the method, then upstream's reason."""
    reason = "RuntimeError: Output node 'aten_linear_default' is already in the inputs."
    error = LoweringError(
        method="forward", backend_id="XnnpackBackend", node=None, operator=None, detail=reason
    )
    assert str(error) == f"method 'forward': backend 'XnnpackBackend' could not lower it: {reason}"
    named = LoweringError(
        method="forward", backend_id="XnnpackBackend", node="n", operator="aten.x.default"
    )
    assert str(named) == "method 'forward': backend 'XnnpackBackend' cannot lower node 'n' " + (
        "(operator aten.x.default)"
    )
