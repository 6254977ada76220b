"""The package layout: every layer importable under one namespace, the CLI wired up."""

import importlib
import subprocess
import sys

import pytest

LAYERS = ["server", "manager", "backends", "runtime", "storage", "client", "contracts", "children"]


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_importable_under_pteforge(layer: str) -> None:
    module = importlib.import_module(f"pteforge.{layer}")
    assert module.__name__ == f"pteforge.{layer}"


def test_cli_help_lists_commands() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pteforge", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "usage: pteforge" in result.stdout
