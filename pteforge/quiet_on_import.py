"""Importing this module quiets third-party noise: for fork-server preload lists.

A ``multiprocessing`` fork server is a fresh interpreter that can only be told which modules
to import, so this is the one module whose import has an effect: put it first in a preload
list and every child forked from that server inherits :func:`pteforge.quiet.quiet_third_party`.
"""

from pteforge.quiet import quiet_third_party

quiet_third_party()
