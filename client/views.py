"""The human views of the remote commands' results, and the stages a build expects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pteforge.client.models import (
    Artifact,
    InferResult,
    Job,
    MethodSignature,
    Model,
    Program,
    TensorSpec,
    judged_worst,
)
from pteforge.client.render import Output, size
from pteforge.client.tensors import json_tensors


def stage_plan(plan: Mapping[str, Any], methods: Sequence[str]) -> list[str]:
    """The stages a compile job of ``plan`` over ``methods`` goes through, in order: quantize
    only when a target quantizes, partition and preprocess only when one delegates."""
    per_method = plan.get("methods") or {}
    targets = [per_method.get(m, plan.get("all")) or {} for m in methods]
    quantize = any(t.get("quantize") for t in targets if isinstance(t, dict))
    delegate = any(
        t.get("partitioners") or t.get("delegate") for t in targets if isinstance(t, dict)
    )
    return [
        "queued",
        "loading",
        *(["quantize"] if quantize else []),
        "to_edge",
        *(["partition", "preprocess"] if delegate else []),
        "emit",
        "verify",
        "store",
    ]


def _tensors(specs: Sequence[TensorSpec]) -> str:
    return ", ".join(f"{t.name}: {t.dtype}[{_dims(t)}]" for t in specs) or "-"


def _dims(spec: TensorSpec) -> str:
    """The shape, each dynamic dimension as the range it was exported with (``1..8``, ``4..``)
    where the program says, else ``<=N`` up to the planned bound, else ``?``."""
    ranges = {d.axis: f"{d.min}..{'' if d.max is None else d.max}" for d in spec.dynamic_dims or ()}
    bound = spec.max_shape or ()
    return ", ".join(
        str(size) if size >= 0 else ranges.get(axis) or (f"<={bound[axis]}" if bound else "?")
        for axis, size in enumerate(spec.shape)
    )


def _method_table(out: Output, methods: Sequence[MethodSignature]) -> None:
    rows = [(m.name, _tensors(m.inputs), _tensors(m.outputs)) for m in methods]
    out.table(None, ["method", "inputs", "outputs"], rows)


def program_summary(out: Output, program: Program) -> None:
    out.line(f"program {program.id} {program.name!r}, {size(program.size_bytes)}")
    _method_table(out, program.methods)


def artifact_summary(out: Output, artifact: Artifact) -> None:
    out.line(f"artifact {artifact.id}, {size(artifact.size_bytes)}, sha256 {artifact.sha256}")
    if artifact.data is not None:  # the .pte loads with it: `pteforge pull ID --ptd`
        data = artifact.data
        out.line(f"data (.ptd) {size(int(data['size_bytes']))}, sha256 {data['sha256']}")
    _method_table(out, artifact.methods)
    methods = artifact.report.get("methods") or {}
    checks = (artifact.numerics or {}).get("methods") or {}
    rows = [
        (*_report_row(name, entry), numerics_cell(checks.get(name)))
        for name, entry in sorted(methods.items())
    ]
    if rows:
        columns = ["method", "delegated ops", "portable ops", "backends", "numerics"]
        out.table(None, columns, rows)
    program = artifact.report.get("program") or {}
    if program.get("constant_bytes") is not None:
        out.line(
            f"constants {size(int(program['constant_bytes']))}, unique "
            f"{size(int(program.get('unique_constant_bytes', 0)))}, shared across methods "
            f"{size(int(program.get('shared_constant_bytes', 0)))}"
        )


def _report_row(method: str, entry: Any) -> tuple[str, ...]:
    """A method's line of the report: operator counts and per backend ops and subgraphs."""
    if not isinstance(entry, dict):
        return (method, "-", "-", "-")
    backends = ", ".join(
        f"{b}: {c.get('delegated_operators')} ops in {c.get('delegated_subgraphs')} subgraphs"
        for b, c in sorted((entry.get("backends") or {}).items())
        if isinstance(c, dict)
    )
    return (
        method,
        str(entry.get("delegated_operators", "-")),
        str(entry.get("non_delegated_operators", "-")),
        backends or "-",
    )


def numerics_cell(check: Any) -> str:
    """A method's numerics check in a few words: its status and the worst value of the
    metric it is judged on (an int8 method's SQNR, not its relative error, which said
    ``passed (max rel error 0.03)`` of a method judged on 20 dB)."""
    if not isinstance(check, dict):
        return "-"
    metric, worst = judged_worst(check)
    if worst is None:
        return str(check.get("status"))
    shown = f"SQNR {worst:.3g} dB" if metric == "sqnr_db" else f"max rel error {worst:.2g}"
    return f"{check.get('status')} ({shown})"


def job_summary(out: Output, job: Job) -> None:
    """``pteforge show job_...``: status and stage, its times, and its artifact or error."""
    out.line(f"job {job.id} ({job.kind}): {job.status}" + (f", {job.stage}" if job.stage else ""))
    times = [
        (n, t)
        for n, t in (
            ("created", job.created_at),
            ("started", job.started_at),
            ("finished", job.finished_at),
        )
        if t
    ]
    if times:
        out.line(", ".join(f"{name} {when:%Y-%m-%d %H:%M:%S}" for name, when in times))
    if job.artifact_id:
        out.line(f"artifact {job.artifact_id}")
    if job.error:
        out.line(f"error {job.error.code}: {job.error.message}")


def listing(
    out: Output,
    what: str,
    items: Sequence[Any],
    status: str | None = None,
    program_names: Mapping[str, str] | None = None,
) -> None:
    """``pteforge ls``: one table row per item; a line saying there is none (with the
    ``--status`` asked for), where a table of headers alone was printed. An artifact's
    program is shown by its name where ``program_names`` has it."""
    if not items:
        out.line(f"no {status} {what}" if status else f"no {what}")
        return
    rows: list[tuple[str, ...]]
    if what == "programs":
        rows = [
            (p.id, p.name, _method_names(p), size(p.size_bytes), _when(p.created_at)) for p in items
        ]
        out.table(None, ["id", "name", "methods", "size", "created"], rows)
    elif what == "models":
        rows = [(m.name, str(m.latest_version or "-"), _when(_epoch(m.created))) for m in items]
        out.table(None, ["name", "latest version", "created"], rows)
    elif what == "artifacts":
        rows = [_artifact_row(a, program_names or {}) for a in items]
        out.table(None, ["id", "program", "plan", "numerics", "size"], rows)
    else:
        out.table(
            None, ["id", "status", "stage", "result", "seconds"], [_job_row(j) for j in items]
        )


def model_summary(out: Output, model: Model) -> None:
    """``pteforge show NAME``: the model's versions, oldest first, and which is the latest."""
    out.line(f"model {model.name}, latest version {model.latest_version or '-'}")
    rows = [(str(v.version), v.artifact_id, _when(v.created_at)) for v in model.versions]
    out.table(None, ["version", "artifact", "created"], rows)


def _artifact_row(artifact: Artifact, program_names: Mapping[str, str]) -> tuple[str, ...]:
    program = artifact.program_id or "-"
    numerics = (artifact.numerics or {}).get("status", "-")
    methods = [m.name for m in artifact.methods]
    uploaded = artifact.report.get("source") == "upload"
    plan = "uploaded .pte" if uploaded else plan_text(artifact.plan, methods)
    name = program_names.get(program, program)
    return (artifact.id, name, plan, numerics, size(artifact.size_bytes))


def target_text(target: Mapping[str, Any] | None) -> str:
    """ "xnnpack", "xnnpack+vulkan, quantize int8", "delegate X" or "portable" (the
    dashboard's ``targetText``)."""
    target = target or {}
    names = [p if isinstance(p, str) else p["name"] for p in target.get("partitioners") or ()]
    parts = ["+".join(names)] if names else []
    if target.get("delegate"):
        parts.append(f"delegate {target['delegate']['backend_id']}")
    parts = parts or ["portable"]
    if target.get("quantize"):
        parts.append(f"quantize {target['quantize']}")
    return ", ".join(parts)


def plan_text(plan: Mapping[str, Any], methods: Sequence[str] = ()) -> str:
    """ "forward: xnnpack; decode: portable": each method's target (the dashboard's
    ``planSummary``), or "all: ..." where no method is known."""
    named = plan.get("methods") or {}
    names = list(dict.fromkeys([*methods, *named]))
    if not names:
        return f"all: {target_text(plan.get('all'))}"
    return "; ".join(f"{m}: {target_text(named.get(m) or plan.get('all'))}" for m in names)


def _job_row(job: Job) -> tuple[str, ...]:
    result = job.artifact_id or (f"{job.error.code}: {job.error.message}" if job.error else "-")
    seconds = "-"
    if job.started_at and job.finished_at:
        seconds = f"{(job.finished_at - job.started_at).total_seconds():.1f}"
    return (job.id, job.status, job.stage or "-", result[:80], seconds)


def _method_names(item: Program | Artifact) -> str:
    return ", ".join(m.name for m in item.methods)


def _when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S") if at else "-"


def _epoch(seconds: int) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if seconds else None


def infer_answer(result: InferResult) -> dict[str, Any]:
    """``pteforge run --json``: the outputs as ``/v2`` answers a JSON infer request (Open
    Inference Protocol tensors with their ``data``)."""
    head = {"model_name": result.model, "model_version": result.version}
    return {**head, "parameters": result.parameters, "outputs": json_tensors(result.outputs)}


def output_rows(out: Output, result: InferResult) -> None:
    """``pteforge run``: each output's dtype, shape and a few values; the server's timings."""
    rows = []
    for name, array in result.outputs.items():
        flat = array.reshape(-1)
        head = ", ".join(f"{v:.6g}" if array.dtype.kind == "f" else str(v) for v in flat[:6])
        more = ", ..." if flat.size > 6 else ""
        rows.append((name, str(array.dtype), str(list(array.shape)), f"[{head}{more}]"))
    named = not result.model.startswith("art_")  # a model name: which version answered
    title = f"{result.model} (version {result.version})" if named else result.model
    out.table(title, ["output", "dtype", "shape", "values"], rows)
    timings = ", ".join(f"{k} {v}" for k, v in result.parameters.items() if k.endswith("_ms"))
    if timings:
        out.line(f"server: {timings}")


NOT_A_LANGUAGE_MODEL = (
    "the tokenizer is attached, but the artifact is not a language model in ExecuTorch's LLM "
    "runner convention (no get_max_seq_len method), so it answers no text generation: compile "
    'its forward(tokens, input_pos) with the plan\'s "constant_methods" (docs/usage.md, Plans)'
)
"""What ``deploy --tokenizer`` warns of when the artifact has no ``generation``."""
