"""``transformers`` models exported the direct way, through ``pteforge compile`` and a real
``pteforge serve``: programs whose output is a ``ModelOutput`` (and, for BERT, whose inputs
are keyword arguments).

For each model of ``bench/hf_outputs_models.py``: export the model itself
(``torch.export.export(model, args, kwargs)``), save it, compile it with the local CLI
(portable), upload it, compile it on the service (portable and XNNPACK), read the artifact's
numerics check (every output compared), run the ``.pte`` in ``executorch.runtime`` against
eager, and call ``/v2`` with ``pteforge.client.Client``, whose outputs must equal the
in-process run's. Not a test: a few minutes on 2 busy cores.

Run: ``nice -n 10 .venv/bin/python bench/hf_outputs.py [--models bert,vit]``; writes the
table to ``bench/results/hf_outputs.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.hf_outputs_models import BUILDERS, Direct
from tests.server.service import ServiceProcess
from tests.zoo.flow import compile_on_service, tabulate_on_service, upload
from tests.zoo.numerics import compare

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "hf_outputs.md"
PLANS = ("portable", "xnnpack")


def local_cli(archive: Path) -> str:
    """``pteforge compile`` of the archive (portable) in a process without ``transformers``:
    ``ok (numerics STATUS)`` or its last line of error."""
    out = archive.with_suffix(".pte")
    command = [str(ROOT / ".venv/bin/pteforge"), "compile", "--method", f"forward={archive}"]
    done = subprocess.run(
        [*command, "-o", str(out)], capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1][:300]}"
    return f"ok (numerics {json.loads(done.stdout)['numerics']['status']})"


def run_pte(pte: bytes, inputs: list[torch.Tensor]) -> list[np.ndarray]:
    """``forward`` of the ``.pte`` in this process's ``executorch.runtime``."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    return [t.numpy() for t in program.load_method("forward").execute(inputs)]


def remote(svc: ServiceProcess, artifact: str, inputs: list[torch.Tensor]) -> Any:
    """``/v2`` through ``pteforge.client.Client``: its outputs by name, or the error."""
    from pteforge.client import Client

    assert svc.admin_token
    try:
        with Client(svc.url, svc.admin_token) as client:
            return client.infer(artifact, "forward", [t.numpy() for t in inputs]).outputs
    except Exception as exc:  # a client failure is the cell's result
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def equal(answer: Any, local: list[np.ndarray]) -> str:
    """``equal`` when every ``/v2`` output equals the in-process run's, else what differs."""
    if isinstance(answer, str):
        return answer
    got = list(answer.values())
    if len(got) != len(local):
        return f"{len(got)} outputs, in-process {len(local)}"
    same = all(g.shape == w.shape and np.array_equal(g, w) for g, w in zip(got, local, strict=True))
    return "equal" if same else "differs"


def check(svc: ServiceProcess, direct: Direct, compiled: Any) -> dict[str, Any]:
    """The artifact's numerics, eager against the runtime here, and ``/v2`` against both."""
    numerics = compiled.artifact["numerics"]["methods"]["forward"]
    compared = [o["name"] for o in numerics.get("outputs", [])]
    inputs = direct.flat_inputs()
    local = run_pte(compiled.pte, inputs)
    answer = remote(svc, compiled.artifact["id"], inputs)
    return {
        "numerics": f"{numerics['status']} ({len(compared)} outputs)",
        "eager": compare(local, direct.eager()).describe(False),
        "v2": equal(answer, local),
        "names": ", ".join(answer) if isinstance(answer, dict) else "-",
    }


def run_model(svc: ServiceProcess, client: Any, direct: Direct, work: Path) -> list[dict[str, Any]]:
    """One model: its export, the local CLI, the upload and a row per plan."""
    program = direct.export()
    archive = work / f"{direct.name.split()[0]}.pt2"
    torch.export.save(program, archive)
    base = {
        "model": direct.name,
        "output type": program.call_spec.out_spec.type.__name__,
        "cli": local_cli(archive),
    }
    uploaded, base["upload"] = upload(client, {"forward": archive}, direct.name.split()[0])
    if uploaded is not None:
        base["inputs"] = ", ".join(i["name"] for i in uploaded["methods"][0]["inputs"])
    rows = []
    for plan in PLANS:
        row = {**base, "plan": plan}
        rows.append(row)
        if uploaded is not None:
            compiled, row["compile"] = compile_on_service(client, uploaded["id"], plan)
            if compiled is not None:
                row.update(check(svc, direct, compiled))
    return rows


COLUMNS = (
    "model", "output type", "cli", "upload", "inputs", "plan", "compile", "numerics", "eager",
    "v2", "names",
)  # fmt: skip


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of every row."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = (" ".join(str(row.get(c, "-")).split()).replace("|", "\\|") for c in COLUMNS)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(BUILDERS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pteforge-hf-outputs-"))

    def run(svc: ServiceProcess, client: Any, name: str) -> list[dict[str, Any]]:
        return run_model(svc, client, BUILDERS[name](), work)

    print(tabulate_on_service(work, args.models.split(","), run, table, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
