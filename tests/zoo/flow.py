"""One zoo model through the real service: upload, compile, download, run, compare.

The steps return what happened instead of asserting, so the benchmark can print a failed
cell and the tests can assert on it. ``compile_in_library`` is the same lowering without
HTTP (``pteforge.manager.compile_programs``), for programs the service refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import torch

from tests.models import save_programs
from tests.server.helpers import wait_job
from tests.server.service import BENCH_ENV, ServiceProcess
from tests.zoo.base import ZooModel
from tests.zoo.numerics import PLANS, Numerics, compare, is_quantized
from tests.zoo.remote import Endpoint, callers, max_difference


@dataclass
class Compiled:
    """A compiled artifact: its bytes and report, and its id when the service built it."""

    pte: bytes
    report: dict[str, Any]
    artifact: dict[str, Any] | None = None
    seconds: float = 0.0
    job: dict[str, Any] | None = None

    @property
    def unique_constant_bytes(self) -> int:
        return int(self.report.get("program", {}).get("unique_constant_bytes", 0))


@dataclass
class Cell:
    """One model x plan of the matrix."""

    model: str
    plan: str
    upload: str = "-"
    compile: str = "-"
    via: str = "service"
    run: str = "-"
    program: dict[str, Any] | None = field(default=None, repr=False)
    compiled: Compiled | None = field(default=None, repr=False)
    numerics: dict[str, Numerics] = field(default_factory=dict)
    remote: dict[str, str] = field(default_factory=dict)

    @property
    def quantized(self) -> bool:
        return is_quantized(self.plan)

    def worst_numerics(self) -> Numerics | None:
        from tests.zoo.numerics import worst

        return worst(list(self.numerics.values())) if self.numerics else None


def save_methods(model: ZooModel, directory: Path) -> dict[str, Path]:
    """Each method saved with ``torch.export.save``, as a client would upload it."""
    return save_programs(model.methods(), directory, f"{model.name}-{{method}}.pt2")


def upload(client: httpx.Client, files: Mapping[str, Path], name: str) -> tuple[Any, str]:
    """``POST /v1/programs`` with one part per method: (program, "ok") or (None, error)."""
    parts = {method: (path.name, path.read_bytes()) for method, path in files.items()}
    response = client.post("/v1/programs", files=parts, data={"name": name})
    if response.status_code == 201:
        return response.json(), "ok"
    return None, f"{response.status_code} {_error_text(response)}"


def _error_text(response: httpx.Response) -> str:
    try:
        error = response.json()["error"]
        return f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return response.text[:300]


def compile_on_service(
    client: httpx.Client, program_id: str, plan: str, timeout: float = 900.0
) -> tuple[Compiled | None, str]:
    """Submit a compile job, wait for it, fetch the artifact and its ``.pte``."""
    start = time.monotonic()
    answer = client.post("/v1/compile-jobs", json={"program_id": program_id, "plan": PLANS[plan]})
    if answer.status_code == 422:  # a plan the catalog refuses up front (openvino-int8)
        error = answer.json()["error"]
        return None, f"refused: {error['code']}: {error['message']}"
    job = wait_job(client, answer.raise_for_status().json()["id"], timeout=timeout)
    seconds = time.monotonic() - start
    if job["status"] != "succeeded":
        error = job.get("error") or {}
        return None, f"{job['status']}: {error.get('code')}: {error.get('message')}"
    artifact = client.get(f"/v1/artifacts/{job['artifact_id']}").raise_for_status().json()
    pte = client.get(f"/v1/artifacts/{job['artifact_id']}/pte").raise_for_status().content
    return Compiled(pte, artifact.get("report") or {}, artifact, seconds, job), "ok"


def compile_in_library(model: ZooModel, plan: str) -> tuple[Compiled | None, str]:
    """The same plan through ``pteforge.manager.compile_programs`` in this process."""
    from pteforge.backends import default_catalog
    from pteforge.manager import ManagerError, compile_programs

    start = time.monotonic()
    try:
        compiled = compile_programs(model.methods(), PLANS[plan], default_catalog())
    except ManagerError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return Compiled(compiled.pte, compiled.report, None, time.monotonic() - start), "ok"


def run_in_process(pte: bytes, model: ZooModel) -> dict[str, list[torch.Tensor]]:
    """Every method of ``pte`` executed by ``executorch.runtime`` on the example inputs."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    return {
        method: list(program.load_method(method).execute(list(model.example_inputs(method))))
        for method in model.modules
    }


def check_numerics(local: Mapping[str, list[torch.Tensor]], model: ZooModel) -> dict[str, Numerics]:
    """Per method: the in-process outputs against eager PyTorch."""
    return {method: compare(outputs, model.eager(method)) for method, outputs in local.items()}


def check_remote(
    endpoint: Endpoint,
    model: ZooModel,
    artifact_id: str,
    local: Mapping[str, list[torch.Tensor]],
) -> dict[str, str]:
    """Per client: "equal", the largest difference from the in-process outputs, or the error."""
    multimethod = model.multimethod()
    results: dict[str, str] = {}
    for client, call in callers().items():
        worst = 0.0
        try:
            for method in model.modules:
                got = call(endpoint, multimethod, artifact_id, method)
                worst = max(worst, max_difference(got, local[method]))
        except Exception as exc:  # any client failure is a result of the cell, shown as such
            results[client] = f"error: {type(exc).__name__}: {str(exc)[:200]}"
            continue
        results[client] = "equal" if worst == 0.0 else f"max diff {worst:.1e}"
    return results


def run_model(
    client: httpx.Client,
    endpoint: Endpoint,
    model: ZooModel,
    plans: tuple[str, ...],
    directory: Path,
    library_fallback: bool = False,
) -> list[Cell]:
    """Upload ``model`` once, then compile, run and compare it under each plan.

    With ``library_fallback``, a program the service refused is still compiled through
    the library (the cell says ``via="library"``) so its numerics show.
    """
    program, uploaded = upload(client, save_methods(model, directory), model.name)
    cells = []
    for plan in plans:
        cell = Cell(model.name, plan, upload=uploaded, program=program)
        cells.append(cell)
        if program is not None:
            cell.compiled, cell.compile = compile_on_service(client, program["id"], plan)
        elif library_fallback:
            cell.via = "library"
            cell.compiled, cell.compile = compile_in_library(model, plan)
        if cell.compiled is not None:
            _run_and_compare(cell, cell.compiled, endpoint, model)
    return cells


def _run_and_compare(cell: Cell, compiled: Compiled, endpoint: Endpoint, model: ZooModel) -> None:
    try:
        local = run_in_process(compiled.pte, model)
    except Exception as exc:  # a runtime failure is a result of the cell
        cell.run = f"error: {type(exc).__name__}: {str(exc)[:200]}"
        return
    cell.run = "ok"
    cell.numerics = check_numerics(local, model)
    if compiled.artifact is not None:
        cell.remote = check_remote(endpoint, model, compiled.artifact["id"], local)


Rows = list[dict[str, Any]]


def tabulate_on_service(
    work: Path,
    names: Sequence[str],
    run: Callable[[ServiceProcess, httpx.Client, str], Rows],
    table: Callable[[Rows], str],
    out: Path,
) -> str:
    """A benchmark's table of models run through one service started under ``work``: for
    each of ``names``, ``run`` (torch seeded 0, an admin client) adds its rows and ``out`` is
    rewritten with ``table`` of the rows so far (a later failure keeps them); the final
    table."""
    svc = ServiceProcess(work / "home", env=BENCH_ENV)
    rows: Rows = []
    try:
        svc.start(timeout=900.0)  # a loaded machine can take minutes to import torch
        assert svc.admin_token
        with svc.client(svc.admin_token, timeout=600.0) as client:
            for name in names:
                torch.manual_seed(0)
                rows += run(svc, client, name)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(table(rows) + "\n")
    finally:
        svc.stop()
    return table(rows)
