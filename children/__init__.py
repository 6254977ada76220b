"""pteforge.children: the one facility for disposable, sandboxed child processes.

Every process manager of pteforge (the sandbox's upload loaders, ``.pte`` validation, the
compile workers' lowering children, the runtime pool's workers) starts children the same
way and reads their deaths the same way, from the modules here:

- :mod:`~pteforge.children.limits`: :class:`ChildLimits` and :func:`apply_limits` (address
  space, CPU time, no core dumps), the minimal environment (:func:`child_env`) and the
  default signal handling a child takes;
- :mod:`~pteforge.children.death`: :class:`ChildDeath`, one classification of how a child
  ended (a signal, out of memory, a timeout, a failure) with one table of out-of-memory
  markers;
- :mod:`~pteforge.children.reply`: :class:`ChildReply`, the typed JSON answer of a one-job
  child, validated at both ends;
- :mod:`~pteforge.children.forkserver`: the fork servers' preload lists, in one place, and
  the function that starts a preloaded fork server.

Why a layer of its own, below ``server`` and ``runtime`` and above ``contracts``: both of
those use it, so it cannot live in ``server``; and ``pteforge.runtime``'s package imports the
runtime pool (numpy, ExecuTorch), which the sandbox's launcher must not pay for, nor run,
before its limits are in force. This package imports only the standard library, pydantic
and ``contracts``, and this ``__init__`` imports nothing, so a child can apply its limits
first.
"""
