"""Inputs a program holds a constant for (non-tensor keywords given to ``torch.export``):
the signatures list them apart from the tensors, with their place and value, and the
runtime puts them back where the method takes them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from pteforge.contracts.specs import (
    ConstantInput,
    DynamicDim,
    MethodSignature,
    TensorNames,
    TensorSpec,
)
from pteforge.manager.signature import method_signature
from pteforge.runtime.instances import run_method
from pteforge.runtime.metadata import describe_pte


class Scaled(torch.nn.Module):
    def forward(
        self, x: torch.Tensor, scale: float = 2.0, flag: bool = True, tag: str | None = "a"
    ) -> torch.Tensor:
        y = x * scale
        return y + 1 if flag else y - 1


KEYWORDS = {"scale": 3.0, "flag": False, "tag": None}


def _program() -> torch.export.ExportedProgram:
    return torch.export.export(Scaled(), (torch.ones(2, 3),), KEYWORDS)


def test_the_exported_signature_holds_the_constants_apart() -> None:
    signature = method_signature("forward", _program())
    assert [spec.name for spec in signature.inputs] == ["x"]
    assert signature.constants == (
        ConstantInput(1, "scale", 3.0),
        ConstantInput(2, "flag", False),
        ConstantInput(3, "tag", None),
    )
    assert MethodSignature.from_json(signature.to_json()) == signature


def test_positional_puts_each_constant_in_its_place() -> None:
    x, y = TensorSpec("x", "float32", (1,)), TensorSpec("y", "float32", (1,))
    held = (ConstantInput(0, "first", 1), ConstantInput(2, "middle", True))
    signature = MethodSignature("m", (x, y), (), held)
    assert signature.positional(["X", "Y"]) == [1, "X", True, "Y"]
    assert MethodSignature("m", (x,), ()).positional(["X"]) == ["X"]
    assert "constants" not in MethodSignature("m", (x,), ()).to_json()


def test_the_runtime_reads_the_constants_from_the_pte_and_fills_them_in(tmp_path: Path) -> None:
    from executorch.exir import to_edge
    from executorch.runtime import Runtime

    program = _program()
    pte = tmp_path / "scaled.pte"
    pte.write_bytes(to_edge(program).to_executorch().buffer)
    (read,) = describe_pte(pte).values()
    assert [spec.datatype for spec in read.inputs] == ["FP32"]
    assert [(c.index, c.value) for c in read.constants or ()] == [(1, 3.0), (2, False), (3, None)]
    served = read.pinned_by(method_signature("forward", program))
    assert [c.name for c in served.constants or ()] == ["scale", "flag", "tag"]

    method = Runtime.get().load_program(pte).load_method("forward")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = run_method(method, [x], "forward", served)
    want = Scaled()(torch.from_numpy(x), **KEYWORDS).numpy()  # type: ignore[arg-type]
    np.testing.assert_allclose(got, want)


def test_an_older_stored_signature_still_names_and_pins_the_tensors() -> None:
    """An artifact compiled before ``constants`` stored them among its inputs."""
    x = TensorSpec("x", "float32", (-1, 3), None, (DynamicDim(0, "s0", 1, 8),))
    older = MethodSignature("m", (x, TensorSpec("scale", "float", ())), ())
    runtime = MethodSignature(
        "m",
        (TensorSpec("input_0", "float32", (-1, -1), (8, 3)),),
        (),
        (ConstantInput(1, "input_1", 3.0),),
    )
    served = runtime.named(TensorNames(("x", "scale"), ())).pinned_by(older)
    assert served.inputs == (TensorSpec("x", "float32", (-1, 3), (8, 3), x.dynamic_dims),)
    assert served.constants == runtime.constants
