"""The runtime worker process: loads programs by verified path, caches them, executes methods.

A worker serves one request at a time over a ``multiprocessing`` connection using the
framing of ``pteforge.runtime.wire``. A crash inside ExecuTorch kills only this process;
the pool notices the closed connection and starts a replacement.

Stateless requests start from the program's initial state (``ProgramInstance``); a request
carrying ``session`` runs on the instance that session owns in this worker, opened by the
request that says ``open`` and dropped after the one that says ``close`` (or by ``drop``).
"""

from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.children.confine import Confinement, confine
from pteforge.contracts.et_errors import failure_message
from pteforge.contracts.runtime_messages import (
    CancelledReply,
    DescribeReply,
    DescribeRequest,
    DropReply,
    DropRequest,
    ErrorReply,
    GenerateRequest,
    InferReply,
    InferRequest,
    ReadyReply,
    WorkerReply,
    WorkerRequest,
)
from pteforge.runtime.artifact_files import copy_size, verified_path
from pteforge.runtime.constant_inputs import held_apart, read_constants
from pteforge.runtime.errors import (
    RuntimeLayerError,
    SessionLostError,
    UnknownMethodError,
    kind_of,
)
from pteforge.runtime.instances import ProgramInstance, opaque_state, run_method
from pteforge.runtime.kernel_guards import KernelGuards, check_inputs, kernel_guards
from pteforge.runtime.lru import ByteLRU
from pteforge.runtime.metadata import (
    MethodSignature,
    ProgramFlatbuffer,
    describe_program,
    read_dynamism,
)
from pteforge.runtime.native_log import LOG_FILE, NativeLog
from pteforge.runtime.state import ProgramState, read_program_state
from pteforge.runtime.validation import check_arrays
from pteforge.runtime.weight_cache import Loading, WeightCache
from pteforge.runtime.wire import HeaderMemo, recv_request, send_message


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker needs; plain data so it crosses the spawn boundary safely."""

    cache_bytes: int
    threads: int = 1  # XNNPACK threads, set before anything loads (see ``runtime.threads``)
    weight_cache_library: str | None = None
    readable: tuple[str, ...] = ()  # what a confined worker may read: the artifact copies

    def confinement(self, scratch: str) -> Confinement:
        """What a worker with scratch directory ``scratch`` may reach once confined: no program
        to start (its fork server preloaded the flatbuffer readers it needs)."""
        library = (self.weight_cache_library,) if self.weight_cache_library else ()
        readable = tuple(Path(p) for p in (*self.readable, *library))
        return Confinement(Path(scratch), readable)


@dataclass
class LoadedProgram:
    """A verified program held in a worker's cache: the instance stateless requests run on,
    and fresh instances kept ready for methods whose state cannot be reset in place."""

    sha256: str
    path: Path
    instance: ProgramInstance
    signatures: dict[str, MethodSignature]
    state: ProgramState
    spares: dict[str, ProgramInstance] = field(default_factory=dict)
    guarded: KernelGuards = field(default_factory=KernelGuards)  # kernel_guards.check_inputs
    loading: Loading = contextlib.nullcontext  # its methods' weight-cache setting


class Executor:
    """Loads, caches and runs programs inside one worker process."""

    def __init__(self, config: WorkerConfig) -> None:
        from executorch.runtime import Runtime

        self.runtime = Runtime.get()
        self.cache_bytes = config.cache_bytes
        self.programs: ByteLRU[str, LoadedProgram] = ByteLRU(config.cache_bytes)
        self.sessions: dict[int, tuple[str, ProgramInstance]] = {}
        self._refill: list[tuple[LoadedProgram, str]] = []
        library = config.weight_cache_library
        self.weights = WeightCache(None if library is None else Path(library))
        self.runtime._legacy_module._unsafe_reset_threadpool(config.threads)
        self.threads = int(self.runtime._legacy_module._threadpool_get_thread_count())
        from pteforge.runtime.generation_worker import LanguageModels

        self.language_models = LanguageModels(self)
        self.headers = HeaderMemo((InferRequest,))  # infer headers read before (``wire``)

    def program(self, sha256: str, path: str) -> tuple[LoadedProgram, bool]:
        """The cached program for ``sha256`` (True) or a freshly verified and loaded one."""
        cached = self.programs.get(sha256)
        if cached is not None:
            return cached, True
        local = verified_path(sha256, path)
        flatbuffer = ProgramFlatbuffer(local)  # read once for state, dynamism and guards
        state = read_program_state(flatbuffer)
        loading = self.weights.admit(sha256, flatbuffer)
        instance = ProgramInstance(
            self.runtime,
            local,
            state or ProgramState({}),
            eager=state is None or state.stateful,
            loading=loading,
        )
        if state is None:  # unreadable flatbuffer: assume every method keeps state
            instance.state = state = opaque_state(instance.program)
        described = describe_program(instance.program, read_dynamism(flatbuffer))
        signatures = held_apart(described, read_constants(flatbuffer))
        guarded = kernel_guards(flatbuffer)
        loaded = LoadedProgram(sha256, local, instance, signatures, state, {}, guarded, loading)
        self.programs.put(sha256, loaded, copy_size(local))  # with its .ptd
        return loaded, False

    def instance(self, loaded: LoadedProgram, *, eager: bool) -> ProgramInstance:
        """Another instance of ``loaded``, with its own memory arenas and state."""
        return ProgramInstance(
            self.runtime, loaded.path, loaded.state, eager=eager, loading=loaded.loading
        )

    def describe(self, request: DescribeRequest) -> DescribeReply:
        """The signatures and state of the request's program (loaded now if need be)."""
        loaded, hit = self.program(request.sha256, request.path)
        return DescribeReply(methods=loaded.signatures, state=loaded.state, hit=hit)

    def stateless(self, loaded: LoadedProgram, name: str) -> tuple[ProgramInstance, Any]:
        """An instance and its method ``name`` in the program's initial state."""
        state = loaded.state.method(name)
        if not state.stateful or state.resettable:
            method = loaded.instance.method(name)
            loaded.instance.reset(name)
            return loaded.instance, method
        fresh = loaded.spares.pop(name, None)
        if fresh is None:
            fresh = self.instance(loaded, eager=False)
        self._refill.append((loaded, name))  # the next one is loaded after replying
        return fresh, fresh.method(name)

    def session(
        self, request: InferRequest | GenerateRequest, sid: int, loaded: LoadedProgram
    ) -> ProgramInstance:
        """The instance of session ``sid``, opened now if the request says so."""
        if request.open:
            instance = self.instance(loaded, eager=True)
            self.sessions[sid] = (request.sha256, instance)
        entry = self.sessions.get(sid)
        if entry is None or entry[0] != request.sha256:
            raise SessionLostError(f"this runtime worker holds no session {sid}")
        return entry[1]

    def infer(
        self, request: InferRequest, inputs: list[np.ndarray]
    ) -> tuple[InferReply, list[np.ndarray]]:
        """Run the request's method on ``inputs``: the reply and the outputs."""
        start = time.perf_counter()
        loaded, hit = self.program(request.sha256, request.path)
        name = request.method
        if name not in loaded.signatures:
            known = ", ".join(sorted(loaded.signatures))
            raise UnknownMethodError(f"the artifact has no method {name!r} (methods: {known})")
        signature = loaded.signatures[name]
        check_arrays(signature, inputs)
        check_inputs(loaded.guarded, name, signature.inputs, inputs)
        if request.session is not None:
            instance = self.session(request, request.session, loaded)
            method = instance.method(name)
        else:  # the instance is held until the method has run: it owns the method's memory
            instance, method = self.stateless(loaded, name)
        loaded_at = time.perf_counter()
        if request.profile:
            from pteforge.runtime.profiling import profile_method

            with loaded.loading():  # it loads the program again, as the worker would
                outputs, profile = profile_method(self.runtime, request.path, signature, inputs)
        else:
            outputs, profile = run_method(method, inputs, name, signature), None
        done = time.perf_counter()
        load_ms, execute_ms = (loaded_at - start) * 1e3, (done - loaded_at) * 1e3
        reply = InferReply(
            load_ms=load_ms, execute_ms=execute_ms, hit=hit, profile=profile, threads=self.threads
        )
        return reply, outputs

    def end_sessions(self, request: WorkerRequest, failed: bool) -> None:
        """Drop the sessions a request ends: ``close``, a failed ``open``, or ``drop``."""
        if isinstance(request, DropRequest):
            for dropped in request.drop:
                self.sessions.pop(dropped, None)
            return
        if not isinstance(request, InferRequest | GenerateRequest) or request.session is None:
            return
        if request.close or (failed and request.open):
            self.sessions.pop(request.session, None)

    def idle(self) -> None:
        """Work done between requests: fresh instances for the methods that used one."""
        while self._refill:
            loaded, name = self._refill.pop()
            if name in loaded.spares or loaded.sha256 not in self.programs:
                continue
            try:
                spare = self.instance(loaded, eager=False)
                spare.method(name)
            except RuntimeLayerError:
                continue  # the next request loads it itself, and reports the error
            loaded.spares[name] = spare


_Answer = tuple[WorkerReply, list[np.ndarray]]  # a reply and the tensors of its frame


def _serve(
    executor: Executor, request: WorkerRequest, arrays: list[np.ndarray], conn: Connection
) -> _Answer:
    if request.op == "describe":
        return executor.describe(request), []
    if request.op == "drop":
        return DropReply(), []
    if request.op == "generate":  # streams its events over ``conn``; this is the last
        return executor.language_models.generate(request, conn), []
    if request.op == "cancel":  # for a generation that had already ended
        return CancelledReply(), []
    return executor.infer(request, arrays)


def _handle(
    executor: Executor, log: NativeLog, conn: Connection, message: tuple[WorkerRequest, Any]
) -> _Answer:
    log.take()  # written before this request started: for the server's log only
    request, arrays = message
    failed = True
    try:
        reply, outputs = _serve(executor, request, arrays, conn)
        failed = False
        return reply, outputs
    except Exception as exc:  # ours, or anything else from ExecuTorch: the request's failure
        text = str(exc) if isinstance(exc, RuntimeLayerError) else f"{type(exc).__name__}: {exc}"
        return ErrorReply(error=kind_of(exc), message=failure_message(text, log.take())), []
    finally:
        executor.end_sessions(request, failed)


def _next(conn: Connection, executor: Executor, log: NativeLog) -> _Answer:
    """Read the next request and serve it; ``EOFError`` once the pool went away."""
    try:
        message = recv_request(conn, executor.headers)
    except RuntimeLayerError as exc:  # a malformed frame: refused, the next one may be fine
        return ErrorReply(error="protocol", message=str(exc)), []
    return _handle(executor, log, conn, message)


def worker_main(conn: Connection, config: WorkerConfig, scratch: str) -> None:
    """Entry point of a worker process: confine itself (it runs uploaded programs), then
    serve requests until the connection closes."""
    try:
        log = NativeLog(Path(scratch) / LOG_FILE)  # the native runtime's, read per request
        confine(config.confinement(scratch))
        executor = Executor(config)
    except Exception as exc:
        send_message(conn, ErrorReply(error="load", message=str(exc)), [])
        return
    # The worker inherits torch's and ExecuTorch's heap from the fork server: frozen, a full
    # garbage collection no longer walks it (~450 ms measured in the server) mid-request.
    gc.freeze()
    send_message(conn, ReadyReply(weight_cache=executor.weights.enabled), [])
    while True:
        try:
            reply, outputs = _next(conn, executor, log)
        except (EOFError, OSError):
            return
        send_message(conn, reply, outputs)
        executor.idle()
        log.take()  # what the request logged besides its error, and the idle work: forwarded
