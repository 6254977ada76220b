"""``AsyncClient``: the asyncio client. Runs the shared operations over ``httpx.AsyncClient``;
its methods are those of ``Client``, awaited."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import ExitStack, asynccontextmanager, closing
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


def awaited(
    op: Callable[Concatenate[Operations, P], Op[T]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """An ``AsyncClient`` method that runs operation ``op`` (its signature and docstring)."""

    @functools.wraps(op)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(op(self._ops, *args, **kwargs))

    return method


class AsyncClient(ClientCore[httpx.AsyncClient]):
    """A pteforge service, for asyncio; see ``Client`` (same arguments, same calls)."""

    def _open(self, options: dict[str, Any]) -> httpx.AsyncClient:
        return httpx.AsyncClient(**options)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _run(self, op: Op[T]) -> T:
        with closing(op):  # a failed call ends the operation too, its `with` blocks exited
            try:
                call = next(op)
                while True:
                    call = op.send(await self._exchange(call))
            except StopIteration as stop:
                return stop.value

    async def _exchange(self, call: Call) -> Reply:
        attempts = Attempts(call, self._policy, self.url)
        while True:
            try:
                reply = await self._send(call)
            except TRANSPORT_ERRORS as exc:
                await asyncio.sleep(attempts.after_error(exc, isinstance(exc, RETRYABLE_ERRORS)))
                continue
            delay = attempts.after_reply(reply)
            if delay is None:
                return attempts.result(reply)
            await asyncio.sleep(delay)

    async def _send(self, call: Call) -> Reply:
        with ExitStack() as stack:
            request = self._http.build_request(**request_args(call, stack))
            response = await self._http.send(request, stream=call.sink is not None)
            try:
                return await self._receive(call, response)
            finally:
                await response.aclose()

    async def _receive(self, call: Call, response: httpx.Response) -> Reply:
        if call.sink is None or response.status_code not in call.ok:
            return Reply(response.status_code, response.headers, await response.aread())
        call.sink.start(response.status_code, response.headers)
        async for chunk in response.aiter_bytes():
            if not call.sink.feed(chunk):
                break
        return Reply(response.status_code, response.headers)

    # programs
    async def upload_program(
        self, programs: Mapping[str, ProgramSource] | ProgramSource, name: str | None = None
    ) -> Program:
        """Upload one ``torch.export`` program per method (``ExportedProgram`` or ``.pt2``
        path; a lone one is ``forward``); files are streamed from disk."""
        with TemporaryDirectory(prefix="pteforge-upload-") as scratch:
            files = await asyncio.to_thread(program_files, programs, Path(scratch))
            return await self._run(self._ops.upload_program(files, name))

    get_program = awaited(Operations.get_program)
    list_programs = awaited(Operations.list_programs)
    delete_program = awaited(Operations.delete_program)

    # jobs
    compile = awaited(Operations.compile)
    wait = awaited(Operations.wait)
    get_job = awaited(Operations.get_job)
    list_jobs = awaited(Operations.list_jobs)
    cancel_job = awaited(Operations.cancel_job)

    # artifacts
    get_artifact = awaited(Operations.get_artifact)
    list_artifacts = awaited(Operations.list_artifacts)
    delete_artifact = awaited(Operations.delete_artifact)
    upload_artifact = awaited(Operations.upload_artifact)

    download = awaited(Operations.download)

    backends = awaited(Operations.backends)

    # models
    deploy = awaited(Operations.deploy)
    set_tokenizer = awaited(Operations.set_tokenizer)
    list_models = awaited(Operations.list_models)
    get_model = awaited(Operations.get_model)
    delete_model_version = awaited(Operations.delete_model_version)

    # inference
    infer = awaited(Operations.infer)

    # profiles (a profile job, followed to its profile)
    profile = awaited(profile)

    # text generation (a model version with a tokenizer)
    generate = awaited(generate)
    chat = awaited(chat)

    @asynccontextmanager
    async def session(
        self, artifact: Ref, sequence_id: str | int | None = None
    ) -> AsyncIterator[AsyncSession]:
        """A sequence whose calls share the program's state (all methods of ``artifact``);
        raises SessionsUnavailableError when the server has no sessions."""
        check_sessions(await self._run(self._ops.extensions()), self.url)
        yield AsyncSession(self, artifact, SequenceState(sequence_id))


class AsyncSession(SequenceSession[AsyncClient]):
    """Calls of one sequence; ``end=True`` on the last frees it on the server (otherwise
    the server's idle timeout does)."""

    async def infer(self, method: str, inputs: Inputs, *, end: bool = False) -> InferResult:
        params = self.state.parameters(end)
        result = await self._client.infer(self._artifact, method, inputs, parameters=params)
        self.state.answered(params)
        return result
