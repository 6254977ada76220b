"""Shipped models outside ``tests/zoo`` through a real ``pteforge serve`` (models pass 4).

For each model of ``bench/more_models_zoo.py`` and ``bench/more_models_custom.py`` and each
plan (portable, XNNPACK fp32, XNNPACK int8 dynamic, OpenVINO fp32): upload, compile,
download, run in ``executorch.runtime`` against eager PyTorch (and at a second shape for a
model with dynamic dimensions), then over ``/v2`` with tritonclient.http (JSON and binary),
tritonclient.grpc and ``pteforge.client.Client``, whose outputs must equal the in-process
runtime's. A failed compile shows its error (which should name method, backend, operator).

Run: ``nice -n 10 .venv/bin/python bench/more_models.py [--models a,b] [--plans p,q]``;
writes the table to ``bench/results/more_models.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import more_models_custom as custom
from bench import more_models_zoo as hf
from bench.more_models_zoo import Shipped
from tests.server.service import ServiceProcess
from tests.zoo.flow import compile_on_service, save_methods, tabulate_on_service, upload
from tests.zoo.numerics import PLANS, Numerics, compare, is_quantized

BUILDERS: dict[str, Callable[[], Shipped]] = {
    "deit": hf.deit, "swin": hf.swin, "efficientnet": hf.efficientnet,
    "mobilevitv2": hf.mobilevitv2, "dinov2": hf.dinov2, "segformer": hf.segformer,
    "yolos": hf.yolos, "hubert": hf.hubert, "siglip": hf.siglip, "lstm": custom.lstm,
    "gru": custom.gru, "detection": custom.detection, "unet-block": custom.unet_block,
    "bert-dynamic": custom.bert_dynamic,
}  # fmt: skip
RESULTS = Path(__file__).resolve().parent / "results" / "more_models.md"
Inputs = dict[str, torch.Tensor]


def _local(pte: bytes, model: Shipped, method: str, inputs: Inputs) -> list[np.ndarray]:
    import executorch.kernels.quantized  # noqa: F401  (as runtime workers load it)
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    return [t.numpy() for t in program.load_method(method).execute(list(inputs.values()))]


def _triton(url: str, token: str, served: str, inputs: Inputs, mode: str) -> list[np.ndarray]:
    from tritonclient.utils import np_to_triton_dtype

    grpc = mode == "grpc"
    if grpc:
        import tritonclient.grpc as triton
    else:
        import tritonclient.http as triton
    client: Any = triton.InferenceServerClient(url)
    auth = {("authorization" if grpc else "Authorization"): f"Bearer {token}"}
    meta = client.get_model_metadata(served, headers=dict(auth))
    meta = (
        meta
        if isinstance(meta, dict)
        else {
            "inputs": [{"name": i.name} for i in meta.inputs],
            "outputs": [{"name": o.name} for o in meta.outputs],
        }
    )
    entries = []
    for spec, tensor in zip(meta["inputs"], inputs.values(), strict=True):
        array = tensor.numpy()
        entry = triton.InferInput(spec["name"], list(array.shape), np_to_triton_dtype(array.dtype))
        kw = {} if grpc else {"binary_data": mode == "binary"}
        entry.set_data_from_numpy(array, **kw)
        entries.append(entry)
    result = client.infer(served, entries, headers=dict(auth))
    client.close()
    return [np.asarray(result.as_numpy(o["name"])) for o in meta["outputs"]]


def _remote(svc: ServiceProcess, artifact: str, method: str, inputs: Inputs) -> dict[str, Any]:
    from pteforge.client import Client

    assert svc.admin_token
    token, host = svc.admin_token, svc.url.removeprefix("http://")
    served = f"{artifact}.{method}"
    calls: dict[str, Callable[[], list[np.ndarray]]] = {
        "json": lambda: _triton(host, token, served, inputs, "json"),
        "binary": lambda: _triton(host, token, served, inputs, "binary"),
        "grpc": lambda: _triton(f"127.0.0.1:{svc.grpc_port}", token, served, inputs, "grpc"),
    }

    def client_call() -> list[np.ndarray]:
        with Client(svc.url, token) as client:
            return list(client.infer(artifact, method, list(inputs.values())))

    calls["client"] = client_call
    results: dict[str, Any] = {}
    for name, call in calls.items():
        try:
            results[name] = call()
        except Exception as exc:  # a client's failure is the cell's result
            results[name] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return results


def _equal(remote: Any, local: list[np.ndarray]) -> str:
    if isinstance(remote, str):
        return remote
    if len(remote) != len(local):
        return f"{len(remote)} outputs, in-process {len(local)}"
    for r, want in zip(remote, local, strict=True):
        if r.shape != want.shape or r.dtype != want.dtype:
            return f"{r.dtype}{list(r.shape)} != {want.dtype}{list(want.shape)}"
        if not np.array_equal(r, want):
            return f"max diff {np.abs(r.astype(np.float64) - want).max():.1e}"
    return "equal"


def _shapes(model: Shipped, method: str) -> list[Inputs]:
    return [
        model.inputs[method],
        *([model.other_inputs[method]] if method in model.other_inputs else []),
    ]


def check_cell(
    svc: ServiceProcess, model: Shipped, plan: str, pte: bytes, artifact: str
) -> dict[str, Any]:
    """Numerics against eager and remote equality, over every method and input shape."""
    worst: Numerics | None = None
    remote: dict[str, str] = {}
    notes: list[str] = []
    for method in model.modules:
        for inputs in _shapes(model, method):
            try:
                local = _local(pte, model, method, inputs)
            except Exception as exc:  # a runtime failure is the cell's result
                notes.append(f"{method} run: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            got = compare(local, model.eager(method, inputs))
            worst = got if worst is None or got.max_rel > worst.max_rel else worst
            for client, answer in _remote(svc, artifact, method, inputs).items():
                verdict = _equal(answer, local)
                if verdict != "equal" or client not in remote:
                    remote[client] = verdict if verdict != "equal" else remote.get(client, "equal")
    numerics = "-" if worst is None else worst.describe(is_quantized(plan))
    ok = worst is not None and worst.within(is_quantized(plan))
    return {
        "numerics": numerics + ("" if ok else " **over tolerance**"),
        "remote": remote,
        "notes": notes,
    }


def run_model(
    svc: ServiceProcess, client: Any, model: Shipped, plans: list[str], work: Path
) -> list[dict[str, Any]]:
    """One model under each plan: a row per plan."""
    rows = []
    try:
        program, uploaded = upload(client, save_methods(model, work), model.name)
    except Exception as exc:  # an export failure is upstream's: show it
        program, uploaded = None, f"export: {type(exc).__name__}: {str(exc)[:300]}"
    for plan in plans:
        row: dict[str, Any] = {"model": model.name, "plan": plan, "upload": uploaded}
        rows.append(row)
        if program is None:
            continue
        compiled, row["compile"] = compile_on_service(client, program["id"], plan)
        if compiled is not None and compiled.artifact is not None:
            row.update(check_cell(svc, model, plan, compiled.pte, compiled.artifact["id"]))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown matrix."""
    lines = [
        "| model | plan | upload | compile | numerics vs eager "
        "| remote (json/binary/grpc/client) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        remote = r.get("remote") or {}
        rem = (
            "equal (4/4)"
            if remote and all(v == "equal" for v in remote.values())
            else "; ".join(f"{k}: {v}" for k, v in remote.items())
        )
        num = r.get("numerics", "-") + ("; " + "; ".join(r["notes"]) if r.get("notes") else "")
        cells = [r["model"], r["plan"], r["upload"], r.get("compile", "-"), num, rem or "-"]
        lines.append(
            "| " + " | ".join(" ".join(str(c).split()).replace("|", "\\|") for c in cells) + " |"
        )
    return "\n".join(lines)


def main() -> int:
    from pteforge.children.limits import FP32_CPU_ENV
    from pteforge.quiet import quiet_third_party

    os.environ.update(FP32_CPU_ENV)  # this process runs OpenVINO methods in fp32, as /v2 does
    quiet_third_party()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(BUILDERS))
    parser.add_argument("--plans", default="portable,xnnpack,xnnpack-int8,openvino")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    plans = [p for p in args.plans.split(",") if p in PLANS]
    work = Path(tempfile.mkdtemp(prefix="pteforge-more-"))

    def run(svc: ServiceProcess, client: Any, name: str) -> list[dict[str, Any]]:
        start = time.monotonic()
        rows = run_model(svc, client, BUILDERS[name](), plans, work / name)
        print(f"{name}: {time.monotonic() - start:.0f} s", file=sys.stderr)
        return rows

    print(tabulate_on_service(work, args.models.split(","), run, table, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
