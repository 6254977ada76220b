"""Generate ``operators_torch.json`` from the installed torch (imports torch; run it alone).

The registry holds every operator overload the dispatcher knows under the accepted namespaces
and every higher-order operator, as the serializer spells them, in a process that imported
what the server's upload loader imports (:data:`REGISTERING_MODULES`): the names an uploaded
program can resolve there. ``tests/sandbox`` regenerates it in a fresh interpreter and fails on
any difference, so a torch upgrade cannot widen the allowlist unseen::

    python -m pteforge.server.sandbox.operators_torch   # then review the diff
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

from pteforge.children.forkserver import SANDBOX_PRELOAD

from .operators import HIGHER_ORDER, OPERATOR_NAMESPACES, OPS_PREFIX, REGISTRY_FILE, Registry

# Besides what the upload loader imports, the modules that register the accepted namespaces,
# named so the registry does not depend on what those happen to import.
REGISTERING_MODULES = (
    "torch",
    "torch._higher_order_ops",  # higher_order
    "torch.ao.quantization.fx._decomposed",  # quantized_decomposed
    "executorch.exir",  # quantized_decomposed embedding_byte, embedding_4bit, ...
    "torchao",  # torchao, and the prims torch._inductor adds
    *SANDBOX_PRELOAD,
)


def registered_operators() -> frozenset[str]:
    """Overloads and higher-order operators this process's torch registers, as serialized."""
    import torch
    from torch._ops import _higher_order_ops

    found = set()
    for name in torch._C._dispatch_get_all_op_names():
        namespace, _, rest = name.partition("::")
        if namespace in OPERATOR_NAMESPACES:
            op, _, overload = rest.partition(".")
            found.add(f"{OPS_PREFIX}{namespace}.{op}.{overload or 'default'}")
    found.update(f"{OPS_PREFIX}{HIGHER_ORDER}.{name}" for name in _higher_order_ops)
    return frozenset(found)


def build_registry() -> tuple[Registry, dict[str, float]]:
    """Import the registering modules, then read the registry; seconds spent on each step."""
    start = time.perf_counter()
    for module in REGISTERING_MODULES:
        importlib.import_module(module)
    imported = time.perf_counter()
    operators = registered_operators()
    done = time.perf_counter()
    import torch

    version = torch.__version__.split("+")[0]
    return Registry(version, operators), {"imports": imported - start, "read": done - imported}


def main(argv: list[str] | None = None) -> int:
    """Write the registry (default: the package's file); its size and timings go to stderr."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=REGISTRY_FILE)
    args = parser.parse_args(argv)
    registry, seconds = build_registry()
    args.output.write_text(json.dumps(registry.to_json(), indent=1) + "\n")
    print(json.dumps({"operators": len(registry.operators), "seconds": seconds}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
