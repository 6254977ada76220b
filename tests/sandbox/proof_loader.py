"""Run unprotected ``torch.export.load`` (as a careless server would) on archives given in argv.

Used by the tests, in a throwaway subprocess, to show that the hostile archives are real
exploits against torch 2.13 and not strawmen.
"""

from __future__ import annotations

import sys

import torch


def main() -> None:
    for path in sys.argv[1:]:
        try:
            ep = torch.export.load(path)
            ep.module()(*ep.example_inputs[0])
        except Exception as e:  # the payloads often break the load after they ran
            print(f"{path}: {type(e).__name__}", file=sys.stderr)


if __name__ == "__main__":
    main()
