"""Settings from the environment as an operator sets them: a value that does not parse ends a
command with one line naming the variable (no traceback), and ``none`` lifts the compile
memory limit in the service and in the compile workers it starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pteforge.cli import build_parser, main
from pteforge.server.cli import serve_settings
from pteforge.server.jobs.compile_workers import settings_env
from pteforge.server.settings import Settings


@pytest.mark.parametrize("command", [["migrate"], ["worker"], ["tokens", "list"], ["serve"]])
def test_a_bad_value_names_its_variable(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTEFORGE_HOME", str(tmp_path))
    monkeypatch.setenv("PTEFORGE_COMPILE_WORKERS", "two")
    with pytest.raises(SystemExit) as stopped:
        main(command)
    assert str(stopped.value).startswith(f"pteforge {command[0]}: PTEFORGE_COMPILE_WORKERS='two'")
    assert not (tmp_path / "pteforge.db").exists()  # stopped before touching anything


def test_none_lifts_the_compile_memory_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTEFORGE_COMPILE_MEMORY_LIMIT_BYTES", "none")
    assert Settings().compile_memory_limit_bytes is None


def test_compile_workers_get_no_limit_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = settings_env(Settings(home=tmp_path, compile_memory_limit_bytes=None))
    monkeypatch.delenv("PTEFORGE_COMPILE_MEMORY_LIMIT_BYTES", raising=False)
    for name, value in env.items():  # what a compile worker starts with
        if name.startswith("PTEFORGE_"):
            monkeypatch.setenv(name, value)
    assert Settings().compile_memory_limit_bytes is None
    assert Settings().database_url is None  # an unset setting whose default is None stays unset


@pytest.mark.parametrize(("grpc_host", "listens"), [(None, "0.0.0.0"), ("127.0.0.1", "127.0.0.1")])
def test_grpc_listens_on_its_setting_else_on_serves_host(
    grpc_host: str | None, listens: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve overwrote PTEFORGE_GRPC_HOST with --host, so the documented setting did nothing."""
    monkeypatch.setenv("PTEFORGE_HOME", str(tmp_path))
    if grpc_host:
        monkeypatch.setenv("PTEFORGE_GRPC_HOST", grpc_host)
    args = build_parser().parse_args(["serve", "--host", "0.0.0.0", "--no-workers"])
    settings = serve_settings(args)
    assert (settings.grpc_host, settings.compile_workers) == (listens, 0)


def test_an_empty_metrics_token_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty token made /metrics answer 'Authorization: Bearer' with nothing after it."""
    monkeypatch.setenv("PTEFORGE_METRICS_TOKEN", "")
    assert Settings().metrics_token is None
