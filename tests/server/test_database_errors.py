"""A database that ``pteforge serve``, ``worker``, ``migrate`` or ``tokens`` cannot open ends the
command with one line naming it (password hidden) and the reason, not a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pteforge.cli import main

UNREACHABLE = "postgresql+psycopg://pteforge:hunter2@127.0.0.1:1/pteforge"


@pytest.mark.parametrize("command", [["migrate"], ["worker"], ["tokens", "create", "--name", "a"]])
def test_an_unreachable_database_is_one_line(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTEFORGE_HOME", str(tmp_path))
    monkeypatch.setenv("PTEFORGE_DATABASE_URL", UNREACHABLE)
    with pytest.raises(SystemExit) as stopped:
        main(command)
    message = str(stopped.value)
    assert message.startswith(f"pteforge {command[0]}: database postgresql+psycopg://pteforge:***@")
    assert "connection failed" in message and "hunter2" not in message


def test_a_schema_from_a_newer_pteforge_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTEFORGE_HOME", str(tmp_path))
    assert main(["migrate"]) == 0
    with sqlite3.connect(tmp_path / "pteforge.db") as db:  # as a later pteforge's migration
        db.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(SystemExit) as stopped:
        main(["migrate"])
    assert "'9999'" in str(stopped.value) and "newer pteforge" in str(stopped.value)
