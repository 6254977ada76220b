"""Terminal output of the remote commands, with ``rich``: tables and summaries on stdout,
live stages and byte progress on stderr (plain lines when stderr is not a terminal), JSON
for ``--json``."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

from pteforge.client.models import Job
from pteforge.contracts.et_errors import CONTROL_CHARACTERS

PIPED_WIDTH = 240


def terminal_safe(text: str) -> str:
    """``text`` with each control character but newline and tab written as its escape
    (``\\x1b``): what the server sends (names, error messages, a model's generated text) is
    the uploader's, and must not drive the terminal it is printed on."""
    return CONTROL_CHARACTERS.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def plain(text: object) -> Text:
    """``text`` as rich prints it without reading ``[...]`` as markup: a program named
    ``[link=URL]x[/link]`` printed as a hyperlink to URL, ``[/b]`` stopped the command."""
    return Text(terminal_safe(str(text)))


class Output:
    """Where a command writes: JSON or human output on stdout, progress on stderr."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.out = Console(highlight=False, soft_wrap=True)
        if not self.out.is_terminal:  # piped: rows stay whole lines for grep and friends
            self.out = Console(highlight=False, soft_wrap=True, width=PIPED_WIDTH)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)

    def json(self, value: Any) -> None:
        sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")

    def line(self, text: str) -> None:
        self.out.print(plain(text))

    def table(
        self, title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        table = Table(title=title, show_edge=False, header_style="bold")
        for i, column in enumerate(columns):
            table.add_column(column, no_wrap=i == 0)  # ids are never split
        for row in rows:
            table.add_row(*(plain(cell) for cell in row))
        self.out.print(table)

    def error(self, text: str) -> None:
        sys.stderr.write(terminal_safe(text) + "\n")

    @contextmanager
    def stages(self, planned: Sequence[str]) -> Iterator[StageDisplay]:
        """Live stages of a job: a progress bar on a terminal, one line per stage elsewhere."""
        display = StageDisplay(self.err, list(planned))
        with display.running():
            yield display

    @contextmanager
    def bytes_progress(self, what: str) -> Iterator[ByteProgress]:
        """A byte progress bar on a terminal (nothing elsewhere)."""
        progress = ByteProgress(self.err, what)
        with progress.running():
            yield progress


class _LiveBar:
    """A rich progress bar shown only on a terminal, with one task while :meth:`running`."""

    def __init__(self, console: Console, *columns: ProgressColumn, **options: Any) -> None:
        self.live = console.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), *columns, console=console, **options
        )
        self.task: TaskID | None = None

    def _first_task(self) -> tuple[str, int | None]:
        """The description and total of the bar's task when it starts."""
        raise NotImplementedError

    @contextmanager
    def running(self) -> Iterator[None]:
        if not self.live:
            yield
            return
        with self.progress:
            description, total = self._first_task()
            self.task = self.progress.add_task(description, total=total)
            yield


class StageDisplay(_LiveBar):
    """Shows each stage as its event arrives: ``[i/N] stage`` and how long the last took."""

    def __init__(self, console: Console, planned: list[str]) -> None:
        super().__init__(console, TimeElapsedColumn(), transient=False)
        self.console = console
        self.planned = planned
        self.current: str | None = None
        self.since = time.perf_counter()

    def _first_task(self) -> tuple[str, int | None]:
        return "submitted", len(self.planned)

    def __call__(self, job: Job) -> None:
        """``on_stage`` of ``Client.compile``: one step per planned stage, in order."""
        if job.status == "running" and not job.stage:
            return  # claimed by a worker; its first stage follows at once
        label = job.stage if job.status == "running" else job.status
        if label == self.current or label is None:
            return
        # The server's stamp of each change: events may arrive together (a stream that
        # caught up, a poll), so their arrival times would split the stages wrongly.
        now = job.changed_at.timestamp() if job.changed_at else time.perf_counter()
        took = f" ({self.current} took {now - self.since:.2f}s)" if self.current else ""
        if not job.done and label not in self.planned:  # a stage this client did not expect
            at = self.planned.index(self.current) + 1 if self.current in self.planned else 0
            self.planned.insert(at, label)
        self.current, self.since = label, now
        if job.done:
            self._show(label, took, len(self.planned) if job.status == "succeeded" else None)
            return
        step = self.planned.index(label) + 1
        self._show(f"[{step}/{len(self.planned)}] {label}", took, step - 1)

    def _show(self, text: str, took: str, completed: int | None) -> None:
        if not self.live or self.task is None:
            self.console.print(plain(f"{text}{took}"))
            return
        description = plain(text).markup  # the markup that prints the text as it is
        self.progress.update(self.task, description=description, total=len(self.planned))
        if completed is not None:
            self.progress.update(self.task, completed=completed)


class ByteProgress(_LiveBar):
    """``on_progress(received, total)`` of ``Client.download`` as a rich bar."""

    def __init__(self, console: Console, what: str) -> None:
        super().__init__(console, DownloadColumn(), TransferSpeedColumn())
        self.what = what

    def _first_task(self) -> tuple[str, int | None]:
        return self.what, None

    def __call__(self, received: int, total: int | None) -> None:
        if self.task is not None:
            self.progress.update(self.task, completed=received, total=total)


def size(num: int) -> str:
    """Bytes as a short human figure."""
    value = float(num)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{num} B"
