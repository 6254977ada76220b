"""Measure the resident memory a second method adds when its weights are already loaded.

Run in a fresh process (``python -m pteforge.runtime.memprobe``) so nothing else moves
RSS; ``measure_second_method`` does that and parses the JSON it prints.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.children.limits import memory_figure
from pteforge.runtime.artifact_files import data_beside
from pteforge.runtime.dtypes import numpy_dtype
from pteforge.runtime.instances import to_tensor
from pteforge.runtime.metadata import MethodSignature, describe_program


def _zeros(signature: MethodSignature) -> list[Any]:
    return [
        to_tensor(np.zeros(spec.shape, dtype=numpy_dtype(spec.datatype)))
        for spec in signature.inputs
    ]


def _probe(path: Path, first: str, second: str, library: Path | None) -> dict[str, Any]:
    from executorch.runtime import Runtime

    enabled = False
    if library is not None:
        from pteforge.runtime.native import set_xnnpack_weight_cache

        enabled = set_xnnpack_weight_cache(library, True)
    program = Runtime.get().load_program(path, data_path=data_beside(path))
    signatures = describe_program(program)
    before = memory_figure("VmRSS")
    program.load_method(first).execute(_zeros(signatures[first]))
    after_first = memory_figure("VmRSS")
    program.load_method(second).execute(_zeros(signatures[second]))
    after_second = memory_figure("VmRSS")
    return {
        "weight_cache": enabled,
        "first_method_bytes": after_first - before,
        "second_method_bytes": after_second - after_first,
    }


def measure_second_method(
    path: Path, first: str, second: str, weight_cache_library: Path | None
) -> dict[str, Any]:
    """RSS added by loading and running ``first`` then ``second``, in a fresh process."""
    command = [sys.executable, "-m", "pteforge.runtime.memprobe", str(path), first, second]
    if weight_cache_library is not None:
        command += ["--weight-cache", str(weight_cache_library)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("pte", type=Path)
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--weight-cache", type=Path, default=None)
    args = parser.parse_args()
    print(json.dumps(_probe(args.pte, args.first, args.second, args.weight_cache)), flush=True)


if __name__ == "__main__":
    main()
