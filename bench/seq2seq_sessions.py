"""Encoder-decoder models exported by ``transformers`` for ExecuTorch, decoded over /v2 sessions.

Each model of ``bench/seq2seq_models.py`` (T5, BART, Marian, Whisper: tiny random weights,
``encoder`` + ``text_decoder`` with a static KV cache in mutable buffers, the way
``Seq2SeqLMExportableModule`` exports them) goes through a real ``pteforge serve``: both
methods uploaded as one program (one ``.pt2`` per method), compiled under each plan, the
numerics report read, then greedily decoded as a device would: ``encoder`` once, then
``text_decoder`` one token per request in a session (``sequence_id``), over
``tritonclient.http`` and over ``tritonclient.grpc``'s ``ModelStreamInfer``. The tokens
must equal the eager model's (no cache, the whole prefix at every step) and each step's
logits stay within 1e-4 of the exported programs' own, run eagerly. Then three sessions
interleaved step by step (one over gRPC, two over HTTP, on three inputs: their caches must
not mix) and a session restarted (``sequence_start`` on a live id) halfway.
``export = eager`` compares the exported programs, run eagerly, with the eager model (an
upstream difference shows there, not in the decode columns). ``planned MiB``: the memory
one loaded copy plans, which each session counts against ``PTEFORGE_SESSION_MEMORY_BYTES``.
``error clear?``: a decode past the static cache must fail with an answer naming the
method, the operator and the reason.

Prints one row per model x plan. Run: ``.venv/bin/python bench/seq2seq_sessions.py
[--models t5,bart,marian,whisper] [--plans portable,xnnpack] [--steps 16] [--max-source
64]`` (``--max-source 4096``, the module's default, shows what that default plans).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.seq2seq_decode import past_the_cache, run_checks
from bench.seq2seq_models import (
    BUILDERS,
    MAX_SOURCE,
    Seq2Seq,
    build,
    exported_decode,
    generate_tokens,
    reference_decode,
)
from tests.models import save_programs
from tests.server.service import BENCH_ENV, ServiceProcess
from tests.zoo.flow import compile_on_service, upload
from tests.zoo.numerics import PLANS

COLUMNS = ("export = eager", "compiles", "planned MiB", "numerics", "HTTP tokens", "gRPC tokens",
           "interleaved", "restart", "error clear?")  # fmt: skip


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(BUILDERS))
    parser.add_argument("--plans", default="portable,xnnpack")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--max-source", type=int, default=MAX_SOURCE,
                        help="max_hidden_seq_length of the text models' export")  # fmt: skip
    return parser.parse_args()


def numerics_cell(artifact: dict[str, Any]) -> str:
    """``passed`` with the worst relative error, or each method's failing status."""
    methods = (artifact.get("numerics") or {}).get("methods") or {}
    statuses = {name: str(m.get("status")) for name, m in methods.items()}
    worst = max(
        (o.get("max_rel_error") or 0.0 for m in methods.values() for o in m.get("outputs", [])),
        default=0.0,
    )
    if statuses and all(s == "passed" for s in statuses.values()):
        return f"passed (rel {worst:.0e})"
    return ", ".join(f"{name}: {status}" for name, status in statuses.items()) or "none"


def export_cell(work: Seq2Seq, steps: int) -> str:
    """How far the exported programs' own greedy decode is from the eager model's (and,
    for the text models, whether ``model.generate(do_sample=False)`` gives the same
    tokens): pteforge is held to the exported program (the decode columns' ``logits``)."""
    tokens, logits = reference_decode(work, steps)
    exported_tokens, exported = exported_decode(work, steps)
    worst = max(float((a - b).abs().max()) for a, b in zip(logits, exported, strict=False))
    same = "same tokens" if tokens == exported_tokens else "OTHER TOKENS"
    if work.name != "whisper":  # and model.generate's greedy tokens, which we hold to
        same += ", = generate" if generate_tokens(work, steps) == tokens else ", != GENERATE"
    return f"{same}, logits {worst:.0e}"


def planned_cell(pte: bytes, directory: Path) -> str:
    """The planned memory of one loaded copy of ``pte`` (what a session counts), in MiB."""
    from pteforge.runtime.state import read_program_state

    path = directory / "planned.pte"
    path.write_bytes(pte)
    state = read_program_state(path)
    return "?" if state is None else f"{state.planned_bytes / 2**20:.1f}"


def row(work: Seq2Seq, plan: str, client: httpx.Client, svc: ServiceProcess,
        program: dict[str, Any], steps: int) -> dict[str, str]:  # fmt: skip
    """One model x plan: compile, the report's numerics, then the decode checks."""
    compiled, state = compile_on_service(client, program["id"], plan)
    if compiled is None or compiled.artifact is None:
        return {"compiles": f"no: {state[:300]}"}
    cells = {"compiles": "yes", "numerics": numerics_cell(compiled.artifact),
             "export = eager": export_cell(work, steps),
             "planned MiB": planned_cell(compiled.pte, svc.home.parent)}  # fmt: skip
    checks = run_checks(svc, compiled.artifact["id"], work, steps)
    cells.update({check.name: check.describe() for check in checks})
    cells["error clear?"] = past_the_cache(svc, compiled.artifact["id"], work)
    return cells


def run(svc: ServiceProcess, names: list[str], plans: list[str], args: argparse.Namespace) -> None:
    """Every model under every plan, one markdown row each, printed as it finishes."""
    assert svc.admin_token
    print("| model | plan | " + " | ".join(COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    with svc.client(svc.admin_token, timeout=600.0) as client:
        for name in names:
            work = build(name, max_source=args.max_source)
            files = save_programs(work.programs, svc.home.parent / name, "{method}.pt2")
            program, uploaded = upload(client, files, f"{name}-seq2seq")
            for plan in plans:
                start = time.monotonic()
                if program is None:
                    cells = {"compiles": f"upload refused: {uploaded[:300]}"}
                else:
                    cells = row(work, plan, client, svc, program, args.steps)
                values = " | ".join(cells.get(c, "-") for c in COLUMNS)
                print(f"| {name} | {plan} | {values} |", flush=True)
                print(f"{name} {plan}: {time.monotonic() - start:.0f} s", file=sys.stderr)


def main() -> int:
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
    args = _arguments()
    names = [n for n in args.models.split(",") if n]
    plans = [p for p in args.plans.split(",") if p]
    unknown = [n for n in names if n not in BUILDERS] + [p for p in plans if p not in PLANS]
    if unknown:
        print(f"unknown model or plan: {', '.join(unknown)}", file=sys.stderr)
        return 2
    svc = ServiceProcess(Path(tempfile.mkdtemp(prefix="pteforge-s2s-")) / "home", BENCH_ENV)
    try:
        svc.start(timeout=900.0)
        run(svc, names, plans, args)
    finally:
        svc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
