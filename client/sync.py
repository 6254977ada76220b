"""``Client``: the blocking client. Runs the shared operations over ``httpx.Client``."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from pteforge.client.calls import Attempts, Call, Reply
from pteforge.client.core import ClientCore
from pteforge.client.files import ProgramSource, program_files
from pteforge.client.generation import chat, generate
from pteforge.client.models import InferResult, Program
from pteforge.client.operations import Op, Operations, Ref
from pteforge.client.profiles import profile
from pteforge.client.sessions import SequenceSession, SequenceState, check_sessions
from pteforge.client.tensors import Inputs
from pteforge.client.transport import RETRYABLE_ERRORS, TRANSPORT_ERRORS, request_args

T = TypeVar("T")


P = ParamSpec("P")


def blocking(
    op: Callable[Concatenate[Operations, P], Op[T]],
) -> Callable[Concatenate[Client, P], T]:
    """A ``Client`` method that runs operation ``op`` (its signature and docstring)."""

    @functools.wraps(op)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(op(self._ops, *args, **kwargs))

    return method


class Client(ClientCore[httpx.Client]):
    """A pteforge service. ``url`` and ``token`` default to ``PTEFORGE_URL`` and
    ``PTEFORGE_TOKEN``, then to what ``pteforge login`` saved. Programs, jobs and artifacts
    may be passed as objects or ids. Idempotent calls are retried on 503 and broken
    connections (``retries`` times, with backoff)."""

    def _open(self, options: dict[str, Any]) -> httpx.Client:
        return httpx.Client(**options)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self, op: Op[T]) -> T:
        with closing(op):  # a failed call ends the operation too, its `with` blocks exited
            try:
                call = next(op)
                while True:
                    call = op.send(self._exchange(call))
            except StopIteration as stop:
                return stop.value

    def _exchange(self, call: Call) -> Reply:
        attempts = Attempts(call, self._policy, self.url)
        while True:
            try:
                reply = self._send(call)
            except TRANSPORT_ERRORS as exc:
                time.sleep(attempts.after_error(exc, isinstance(exc, RETRYABLE_ERRORS)))
                continue
            delay = attempts.after_reply(reply)
            if delay is None:
                return attempts.result(reply)
            time.sleep(delay)

    def _send(self, call: Call) -> Reply:
        with ExitStack() as stack:
            request = self._http.build_request(**request_args(call, stack))
            response = self._http.send(request, stream=call.sink is not None)
            stack.callback(response.close)
            if call.sink is None or response.status_code not in call.ok:
                return Reply(response.status_code, response.headers, response.read())
            call.sink.start(response.status_code, response.headers)
            for chunk in response.iter_bytes():
                if not call.sink.feed(chunk):
                    break
            return Reply(response.status_code, response.headers)

    # programs
    def upload_program(
        self, programs: Mapping[str, ProgramSource] | ProgramSource, name: str | None = None
    ) -> Program:
        """Upload one ``torch.export`` program per method (``ExportedProgram`` or ``.pt2``
        path; a lone one is ``forward``); files are streamed from disk."""
        with TemporaryDirectory(prefix="pteforge-upload-") as scratch:
            files = program_files(programs, Path(scratch))
            return self._run(self._ops.upload_program(files, name))

    get_program = blocking(Operations.get_program)
    list_programs = blocking(Operations.list_programs)
    delete_program = blocking(Operations.delete_program)

    # jobs
    compile = blocking(Operations.compile)
    wait = blocking(Operations.wait)
    get_job = blocking(Operations.get_job)
    list_jobs = blocking(Operations.list_jobs)
    cancel_job = blocking(Operations.cancel_job)

    # artifacts
    get_artifact = blocking(Operations.get_artifact)
    list_artifacts = blocking(Operations.list_artifacts)
    delete_artifact = blocking(Operations.delete_artifact)
    upload_artifact = blocking(Operations.upload_artifact)

    download = blocking(Operations.download)

    backends = blocking(Operations.backends)

    # models
    deploy = blocking(Operations.deploy)
    set_tokenizer = blocking(Operations.set_tokenizer)
    list_models = blocking(Operations.list_models)
    get_model = blocking(Operations.get_model)
    delete_model_version = blocking(Operations.delete_model_version)

    # inference
    infer = blocking(Operations.infer)

    # profiles (a profile job, followed to its profile)
    profile = blocking(profile)

    # text generation (a model version with a tokenizer)
    generate = blocking(generate)
    chat = blocking(chat)

    @contextmanager
    def session(self, artifact: Ref, sequence_id: str | int | None = None) -> Iterator[Session]:
        """A sequence whose calls share the program's state (all methods of ``artifact``);
        raises SessionsUnavailableError when the server has no sessions."""
        check_sessions(self._run(self._ops.extensions()), self.url)
        yield Session(self, artifact, SequenceState(sequence_id))


class Session(SequenceSession[Client]):
    """Calls of one sequence; ``end=True`` on the last frees it on the server (otherwise
    the server's idle timeout does)."""

    def infer(self, method: str, inputs: Inputs, *, end: bool = False) -> InferResult:
        params = self.state.parameters(end)
        result = self._client.infer(self._artifact, method, inputs, parameters=params)
        self.state.answered(params)
        return result
