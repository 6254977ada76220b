"""The package layout: every layer importable under one namespace, the CLI wired up."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

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


def loaded_after(setup: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with one of ``prefixes`` that a fresh interpreter has loaded
    after running ``setup``."""
    probe = f"import sys\n{setup}\nprint([m for m in sys.modules if m.startswith({prefixes!r})])"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    loaded: list[str] = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    return sorted(loaded)


def test_the_client_loads_no_server_side_layer() -> None:
    """The HTTP client depends on ``contracts``, not on the runtime pool, the server or torch:
    a fresh interpreter that imports every client module loads none of them."""
    every_client_module = (
        "import pkgutil, importlib, pteforge.client as c\n"
        "for m in pkgutil.iter_modules(c.__path__):\n"
        "    importlib.import_module(f'{c.__name__}.{m.name}')"
    )
    layers = ("pteforge.runtime", "pteforge.server", "pteforge.manager", "pteforge.storage")
    assert loaded_after(every_client_module, (*layers, "torch", "executorch")) == []


def test_the_http_process_loads_neither_torch_nor_exir(tmp_path: Path) -> None:
    """The service's HTTP process, built and with its catalog at hand, imports neither torch
    nor ExecuTorch: lowering, validation and execution happen in child processes, and the
    imports cost every server start about 10 s of CPU. (Describing the catalog for
    ``GET /v1/backends`` does import them, on a thread after start.)"""
    app_and_catalog = (
        "from pteforge.server.app import create_app\n"
        "from pteforge.server.settings import Settings\n"
        "from pteforge.backends import default_catalog\n"
        f"create_app(Settings(home={str(tmp_path)!r}))\n"
        "default_catalog().get('xnnpack').validate({})"
    )
    assert loaded_after(app_and_catalog, ("torch", "executorch")) == []


def test_the_runtime_fork_server_loads_no_compiler() -> None:
    """The fork server of the runtime workers and the sandbox's loaders imports the native
    runtime, the LLM operators' kernels and the flatbuffer reader without ExecuTorch's
    compiler or torch's inductor (``executorch.exir``'s ``__init__`` deferred); a name of the
    compiler asked for later still loads the real package."""
    preload = (
        "import importlib\n"
        "from pteforge.children.forkserver import RUNTIME_WORKER_PRELOAD, SANDBOX_PRELOAD\n"
        "from pteforge.children.forkserver import preload_union\n"
        "for name in preload_union(RUNTIME_WORKER_PRELOAD, SANDBOX_PRELOAD):\n"
        "    importlib.import_module(name)\n"
        "import torch\n"
        "from pteforge.runtime.metadata import program_table\n"
        "from executorch.exir._serialize._program import _flatbuffer_to_program\n"
        "assert torch.ops.llama.update_cache.default is not None\n"
    )
    compilers = ("executorch.exir.program", "executorch.exir.capture", "torch._inductor.lowering")
    assert loaded_after(preload, compilers) == []
    later = preload + "from executorch.exir import to_edge\nassert callable(to_edge)\n"
    assert "executorch.exir.program" in loaded_after(later, compilers)
