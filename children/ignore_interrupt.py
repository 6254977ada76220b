"""Importing this module makes the process ignore SIGINT: first in every fork server's
preload list, so every child forked from one inherits it.

A terminal's Ctrl-C reaches the whole foreground process group: ``pteforge serve`` and the
fork servers it started, with all their children. The server then stops its children in
order; a runtime worker interrupted on its own would die with a ``KeyboardInterrupt``
traceback in the server's log. Children that must die at once on SIGINT (lowering and
sandbox children) take the default handlers back (:func:`limits.take_default_signals`).
"""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
