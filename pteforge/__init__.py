"""pteforge: compile multi-method ExecuTorch programs and run them in the native runtime.

The layers live in the repository's top-level folders and are imported as
``pteforge.server``, ``pteforge.manager``, ``pteforge.backends``, ``pteforge.runtime``
and ``pteforge.storage``. Dependencies point one way: server -> manager, runtime,
storage; manager -> backends.
"""

__version__ = "0.1.0"
