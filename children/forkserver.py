"""The fork servers' preload lists, in one place, and how a preloaded fork server starts.

A child forked from a fork server that already imported torch and ExecuTorch starts in
milliseconds instead of seconds. Each kind of child names here what it imports, so the
lists live next to each other (and :mod:`tests.children` imports each name) rather than in
the modules they warm. ``multiprocessing`` keeps one fork server per process, and its
preload list counts only for whoever starts it first: a process that forks several kinds
of children starts it once with the union (:func:`start_fork_server`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext

_COMMON = ("pteforge.quiet_on_import", "pteforge.children.ignore_interrupt")

RUNTIME_WORKER_PRELOAD = (
    *_COMMON,
    "pteforge.runtime_on_import",
    "pteforge.runtime.worker",
    "pteforge.runtime.generation_worker",
    "pteforge.runtime.profiling",
    "pteforge.flatbuffer_readers_on_import",
    "tokenizers",
    "jinja2.sandbox",
)
"""What a runtime pool worker imports: the native runtime without the compiler, with upstream's
LLM custom operators' kernels (:mod:`pteforge.runtime_on_import`), and generation's tokenizers
and templates, so a first generation does not import them."""

SANDBOX_PRELOAD = (
    *_COMMON,
    "pteforge.runtime_on_import",
    "pteforge.server.sandbox.pt2_worker",
    "pteforge.server.sandbox.pte_worker",
    "torch.export.pt2_archive._package",
    "pteforge.flatbuffer_readers_on_import",
)
"""What the sandbox's loader children import (pt2 archives, ``.pte`` validation: loading a
method of an ``export_llama`` program needs upstream's LLM custom operators' kernels, and
describing its dynamic tensors the program flatbuffer's reader)."""

LOWERING_PRELOAD = (
    *_COMMON,
    "torch",
    "torch.export._trace",
    "torch.export._unlift",
    "torch.export.pt2_archive._package",
    "torch.fx.experimental.validator",
    "torch.utils.serialization",
    "executorch.exir",
    "executorch.exir.backend.canonical_partitioners.all_node_partitioner",
    "executorch.extension.flat_tensor.serialize.serialize",
    "executorch.backends.xnnpack.partition.xnnpack_partitioner",
    "executorch.exir.passes.init_mutable_pass",
    "executorch.runtime",
    "executorch.kernels.quantized",
    "pteforge.manager",
    "pteforge.manager.compiler",
    "pteforge.manager.verify",
    "pteforge.manager.program_manager",
    "pteforge.backends",
    "pteforge.server.sandbox",
    "pteforge.server.programs.bundle",
    "pteforge.server.jobs.lowering_child",
    "pteforge.server.jobs.profile_child",
    "pteforge.runtime.profile_run",
    "pteforge.flatbuffer_readers_on_import",
    "pteforge.server.jobs.warmup",
)
"""What a compile worker's lowering children import: every module a lowering or a profile
imports lazily (found by diffing ``sys.modules`` around one; a profile's took 0.2 s).
Imports only: warming up by lowering in the fork server would save more, but forking a
process that has run torch's thread pools can deadlock the child."""


def preload_union(*lists: Iterable[str]) -> list[str]:
    """The modules of ``lists`` in order, each once."""
    return list(dict.fromkeys(name for names in lists for name in names))


def set_preload(ctx: ForkServerContext, *lists: Iterable[str]) -> ForkServerContext:
    """Have ``ctx``'s fork server (when it starts) import the union of ``lists``."""
    ctx.set_forkserver_preload(preload_union(*lists))
    return ctx


def start_fork_server(*lists: Iterable[str], single_threaded: bool = True) -> ForkServerContext:
    """Start (once per process) the fork server, preloading the union of ``lists``; returns
    its context. A no-op, but for the context, if this process already started it.

    The server starts with the minimal environment of
    :func:`~pteforge.children.confine.clean_environment` (``OMP_NUM_THREADS=1`` when
    ``single_threaded``): its children handle uploads, and a forked child keeps the
    environment its fork server was started with in ``/proc/PID/environ``, whatever it
    then does to ``os.environ``.
    """
    from pteforge.children.confine import clean_environment

    ctx = set_preload(multiprocessing.get_context("forkserver"), *lists)
    with clean_environment(single_threaded=single_threaded):
        forkserver.ensure_running()
    return ctx
