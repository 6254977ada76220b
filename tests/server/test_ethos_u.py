"""Arm Ethos-U through the real service: quantized and compiled by Vela in the confined
lowering child (Landlock, seccomp, no exec), compile-only here."""

from __future__ import annotations

from pathlib import Path

import httpx
import torch

from pteforge.backends import ETHOS_U_RECIPE
from tests.backends.harness import delegated_backends
from tests.models import MLP, export_methods, save_programs
from tests.server.helpers import compile_files
from tests.server.service import ServiceProcess


def test_int8_mlp_compiles_for_ethos_u_and_is_not_executable(
    service: ServiceProcess, admin: httpx.Client, tmp_path: Path
) -> None:
    """The artifact's method is ``not_executable``, its ``.pte`` holds the EthosUBackend
    delegate, and Vela's report pages stay out of the service's log."""
    torch.manual_seed(0)
    programs = export_methods(MLP(), {"forward": (torch.randn(1, 16),)}).programs
    files = save_programs(programs, tmp_path)
    plan = {"all": {"partitioners": ["ethos-u"], "quantize": ETHOS_U_RECIPE}}
    artifact_id = compile_files(admin, files, "ethos-u-mlp", plan)
    artifact = admin.get(f"/v1/artifacts/{artifact_id}").json()
    record = artifact["numerics"]["methods"]["forward"]
    assert record["status"] == "not_executable", record
    assert "EthosUBackend" in record["message"]
    response = admin.get(f"/v1/artifacts/{artifact_id}/pte")
    assert response.status_code == 200
    assert delegated_backends(response.content) == ["EthosUBackend"]
    assert "Network summary" not in service.log_path.read_text()
    body = {
        "inputs": [{"name": "args_0", "datatype": "FP32", "shape": [1, 16], "data": [0.0] * 16}]
    }
    ran = admin.post(f"/v2/models/{artifact_id}.forward/infer", json=body)
    assert ran.status_code == 422, ran.text  # said as ready says it, not as the runtime does
    assert "delegated to EthosUBackend, which this host's runtime cannot" in ran.json()["error"]
