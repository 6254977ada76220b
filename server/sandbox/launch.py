"""Entry script of every disposable worker: apply resource limits, then run the worker module.

Run as a script (``python -P launch.py MEMORY CPU SCRATCH MODULE ARGS...``) so that the
limits and the confinement (``SCRATCH`` is the only directory it may write) are in force
before any package (torch above all) is imported; no ``preexec_fn`` is needed, which keeps
spawning safe from a threaded server. :mod:`pteforge.children.limits` imports only the
standard library.
"""

import runpy
import sys
from pathlib import Path

from pteforge.children.limits import ChildLimits, apply_limits


def main() -> None:
    memory, cpu, scratch, module = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    apply_limits(ChildLimits(memory_bytes=memory, cpu_seconds=cpu))
    from pteforge.children.confine import confine
    from pteforge.server.sandbox.isolation import job_confinement

    confine(job_confinement(Path(scratch), sys.argv[5:]))
    sys.argv = [module, *sys.argv[5:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
