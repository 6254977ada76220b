"""Entry script of every disposable worker: apply resource limits, then run the worker module.

Run as a script (``python -P launch.py MEMORY CPU MODULE ARGS...``) so that the limits are in
force before any package (torch above all) is imported; no ``preexec_fn`` is needed, which
keeps spawning safe from a threaded server. :mod:`pteforge.children.limits` imports only the
standard library.
"""

import runpy
import sys

from pteforge.children.limits import ChildLimits, apply_limits


def main() -> None:
    memory, cpu, module = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    apply_limits(ChildLimits(memory_bytes=memory, cpu_seconds=cpu))
    sys.argv = [module, *sys.argv[4:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
