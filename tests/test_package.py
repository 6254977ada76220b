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


def test_the_client_loads_no_server_side_layer() -> None:
    """The HTTP client depends on ``contracts``, not on the runtime pool, the server or torch:
    a fresh interpreter that imports every client module loads none of them."""
    probe = (
        "import sys, pkgutil, importlib, pteforge.client as c\n"
        "for m in pkgutil.iter_modules(c.__path__):\n"
        "    importlib.import_module(f'{c.__name__}.{m.name}')\n"
        "heavy = ('pteforge.runtime', 'pteforge.server', 'pteforge.manager', 'pteforge.storage',"
        " 'torch', 'executorch')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout
