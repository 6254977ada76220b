"""The zoo matrix as markdown: one row per model x plan, then the targets' tallies."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tests.zoo.flow import Cell
from tests.zoo.remote import CLIENTS

HEADER = (
    "| model | plan | upload | compile | .pte bytes | unique constant bytes | ratio "
    "| numerics vs eager (worst output) | service verify | remote (triton JSON/binary, "
    "KServe JSON/binary) = in-process | compile s |"
)
SIZE_TARGET = 1.01


def _text(value: str, limit: int = 240) -> str:
    flat = " ".join(value.split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def size_ratio(cell: Cell) -> float | None:
    """``.pte`` bytes over unique constant bytes (None without a compiled artifact)."""
    if cell.compiled is None or not cell.compiled.unique_constant_bytes:
        return None
    return len(cell.compiled.pte) / cell.compiled.unique_constant_bytes


def _numerics(cell: Cell) -> str:
    worst = cell.worst_numerics()
    if worst is None:
        return "-" if cell.run in ("-", "ok") else _text(cell.run, 120)
    mark = "" if worst.within(cell.quantized) else " **over tolerance**"
    return worst.describe(cell.quantized) + mark


def _verify(cell: Cell) -> str:
    artifact = cell.compiled.artifact if cell.compiled else None
    record = (artifact or {}).get("numerics")
    if not record:
        return "-"
    return f"{record.get('status')} ({record.get('seconds', 0):.2f} s)"


def _remote(cell: Cell) -> str:
    if not cell.remote:
        return "-"
    equal = [c for c in CLIENTS if cell.remote.get(c) == "equal"]
    if len(equal) == len(CLIENTS):
        return "equal (4/4)"
    others = [f"{k}: {v}" for k, v in cell.remote.items() if k not in equal]
    return _text(f"equal {len(equal)}/{len(CLIENTS)}; " + "; ".join(others), 240)


def _compile(cell: Cell) -> str:
    if cell.compile == "ok":
        return "ok" if cell.via == "service" else "ok (library; upload refused)"
    return _text(cell.compile)


def row(cell: Cell) -> str:
    """One markdown row of the matrix."""
    compiled = cell.compiled
    ratio = size_ratio(cell)
    cols = [
        cell.model,
        cell.plan,
        "ok" if cell.upload == "ok" else _text(cell.upload, 160),
        _compile(cell),
        f"{len(compiled.pte):,}" if compiled else "-",
        f"{compiled.unique_constant_bytes:,}" if compiled else "-",
        f"{ratio:.3f}" if ratio is not None else "-",
        _numerics(cell),
        _verify(cell),
        _remote(cell),
        f"{compiled.seconds:.1f}" if compiled else "-",
    ]
    return "| " + " | ".join(cols) + " |"


def matrix(cells: Sequence[Cell]) -> list[str]:
    """The header, separator and one row per cell."""
    return [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|", *map(row, cells)]


def layouts(cells: Sequence[Cell]) -> list[str]:
    """Where each compiled ``.pte``'s bytes go (``pte_layout``), one line per cell."""
    from pteforge.manager.report import pte_layout

    lines = []
    for cell in cells:
        if cell.compiled is not None:
            parts = pte_layout(cell.compiled.pte)
            shown = ", ".join(f"{k.removesuffix('_bytes')} {v:,}" for k, v in parts.items() if v)
            lines.append(f"- {cell.model} {cell.plan}: {shown}")
    return lines


def _seconds(job: dict[str, Any] | None) -> float | None:
    if not job or not job.get("started_at") or not job.get("finished_at"):
        return None
    start = datetime.fromisoformat(job["started_at"])
    return (datetime.fromisoformat(job["finished_at"]) - start).total_seconds()


def _verify_share(cells: Sequence[Cell]) -> str:
    verify = rest = 0.0
    for cell in cells:
        compiled = cell.compiled
        record = (compiled.artifact or {}).get("numerics") if compiled else None
        total = _seconds(compiled.job) if compiled else None
        if record and total and record.get("seconds") is not None:
            verify += float(record["seconds"])
            rest += total - float(record["seconds"])
    if rest <= 0:
        return "verify stage: no timings (no artifact carried a numerics record)"
    share = f"+{verify / rest:.1%}"
    return f"verify stage: {verify:.1f} s over {rest:.1f} s of the rest of the jobs = {share}"


def summary(cells: Sequence[Cell], plans: Sequence[str]) -> list[str]:
    """One line per target of the issue, counted over ``cells``."""
    models = {c.model: c.upload == "ok" for c in cells}
    lines = [f"- uploads accepted: {sum(models.values())}/{len(models)}"]
    for plan in plans:
        mine = [c for c in cells if c.plan == plan]
        ok = sum(c.compile == "ok" for c in mine)
        lines.append(f"- compile {plan}: {ok}/{len(mine)}")
    ran = [c for c in cells if c.numerics]
    fp32 = [c for c in ran if not c.quantized]
    within = sum(bool(w and w.within(False)) for w in (c.worst_numerics() for c in fp32))
    lines.append(f"- fp32 within 1e-4 relative error of eager: {within}/{len(fp32)}")
    int8 = [c.worst_numerics() for c in ran if c.quantized]
    sqnr = [n.sqnr_db for n in int8 if n is not None]
    low = f" (lowest {min(sqnr):.1f} dB)" if sqnr else ""
    lines.append(f"- int8 SQNR reported: {len(sqnr)}/{len(int8)} compiled int8 cells{low}")
    remote = [c for c in cells if c.remote]
    equal = sum(all(c.remote.get(k) == "equal" for k in CLIENTS) for c in remote)
    lines.append(f"- remote runs equal to in-process (4 clients): {equal}/{len(remote)}")
    ratios = [(r, c) for c in cells if (r := size_ratio(c)) is not None]
    if ratios:
        worst, where = max(ratios, key=lambda item: item[0])
        met = sum(r <= SIZE_TARGET for r, _ in ratios)
        lines.append(
            f"- .pte / unique constant bytes <= {SIZE_TARGET}: {met}/{len(ratios)} "
            f"(worst {worst:.3f}, {where.model} {where.plan})"
        )
    lines.append(f"- {_verify_share(cells)}")
    return lines
