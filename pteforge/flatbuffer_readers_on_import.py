"""Importing this module loads the generated flatbuffer readers of ETDumps and programs
(:mod:`pteforge.runtime.flatbuffer_readers`): for the preload lists of the fork servers whose
children profile programs (runtime workers, compile workers' lowering children).

Generating a reader runs ``flatc`` and writes a cache directory, which a confined child may
do neither of; its fork server, preloading this module, loads both readers before it forks
one. A failure is logged here and raised at first use.
"""

from pteforge.runtime.flatbuffer_readers import preload_readers

preload_readers()
