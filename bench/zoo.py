"""Model-zoo matrix: every ``tests.zoo`` architecture through a real ``pteforge serve``.

For each model (bench-size configs, random weights) and each plan (portable, XNNPACK
partitioner, XNNPACK int8 dynamic, OpenVINO partitioner): upload (one multipart part per
method), compile, download the ``.pte``, run it in ``executorch.runtime`` against eager
PyTorch, and call it over ``/v2`` with tritonclient.http (JSON, binary) and KServe's REST
client (JSON, binary), whose outputs must equal the in-process runtime's. A program the
service refuses is still compiled through the library (marked ``lib``) so that its numerics
show.

Prints the markdown matrix, then where each ``.pte``'s bytes go (``pte_layout``), and
writes both to ``bench/results/zoo.md``.

Run: ``nice -n 10 .venv/bin/python bench/zoo.py [--size bench|small] [--models a,b]
[--plans portable,xnnpack,xnnpack-int8,openvino]``; the mixed plan ``openvino-encode``
(``encode`` on OpenVINO, ``decode`` on XNNPACK) is for the encoder/decoder models only:
``--models whisper,t5,bart,marian --plans openvino-encode``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.server.service import BENCH_ENV, ServiceProcess
from tests.zoo import BY_NAME, ZOO
from tests.zoo.flow import Cell, run_model
from tests.zoo.numerics import PLANS
from tests.zoo.remote import Endpoint
from tests.zoo.table import layouts, matrix, summary

RESULTS = Path(__file__).resolve().parent / "results" / "zoo.md"
EVERY_MODEL = ("portable", "xnnpack", "xnnpack-int8", "openvino")
"""The default plans: those that apply to every model (not ``openvino-encode``)."""


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["bench", "small"], default="bench")
    parser.add_argument("--models", default=",".join(e.name for e in ZOO))
    parser.add_argument("--plans", default=",".join(EVERY_MODEL))
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args()


def run_all(
    svc: ServiceProcess,
    names: list[str],
    plans: tuple[str, ...],
    size: str,
    report: Callable[[list[Cell]], object],
) -> list[Cell]:
    """Every model under every plan, in order; progress on stderr, ``report`` after each."""
    assert svc.admin_token
    endpoint = Endpoint(svc.url, svc.admin_token)
    work = svc.home.parent / "programs"
    cells: list[Cell] = []
    with svc.client(svc.admin_token, timeout=600.0) as client:
        for name in names:
            start = time.monotonic()
            model = BY_NAME[name].build("bench" if size == "bench" else "small")
            done = run_model(client, endpoint, model, plans, work, library_fallback=True)
            cells += done
            states = "; ".join(f"{c.plan}: {c.compile}" for c in done)
            print(f"{name}: {time.monotonic() - start:.0f} s ({states})", file=sys.stderr)
            report(cells)
    return cells


def main() -> int:
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
    args = _arguments()
    names = [n for n in args.models.split(",") if n]
    plans = tuple(p for p in args.plans.split(",") if p)
    unknown = [n for n in names if n not in BY_NAME] + [p for p in plans if p not in PLANS]
    if unknown:
        print(f"unknown model or plan: {', '.join(unknown)}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="pteforge-zoo-"))
    svc = ServiceProcess(work / "home", env=BENCH_ENV)
    title = f"Model zoo, {args.size} configs, {time.strftime('%Y-%m-%d %H:%M')} (`bench/zoo.py`)"

    def write(cells: list[Cell]) -> str:
        """The matrix so far, written to ``--out`` (a partial run leaves its rows)."""
        parts = [*matrix(cells), "", *summary(cells, plans), "", "Layout:", *layouts(cells)]
        text = "\n".join([title, "", *parts])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
        return text

    try:
        svc.start(timeout=900.0)  # a loaded machine can take minutes to import torch
        cells = run_all(svc, names, plans, args.size, write)
    finally:
        svc.stop()
    print(write(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
