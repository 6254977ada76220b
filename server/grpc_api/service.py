"""``inference.GRPCInferenceService``: the Open Inference Protocol over gRPC.

Each call reads the running app's ``InferenceState`` (``None`` outside its lifespan:
UNAVAILABLE), authenticates with its ``authorization`` metadata entry like /v2 does its
header, resolves models with ``work.model_of`` and runs requests with ``work.run_decoded``,
so gRPC serves the same models, with the same checks and statistics, as HTTP.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple, TypeVar

from google.protobuf import json_format
from starlette.datastructures import ImmutableMultiDict
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as rpc

from pteforge.runtime import InferResult, PoolClosedError
from pteforge.runtime.oip_codec import model_metadata
from pteforge.server.auth.dependencies import Principal
from pteforge.server.grpc_api.codec import encode_response, metadata_response
from pteforge.server.grpc_api.plans import RequestPlans
from pteforge.server.grpc_api.status import grpc_status, refuse_unimplemented
from pteforge.server.http.memory import HeldBytes
from pteforge.server.inference.dependencies import InferenceState
from pteforge.server.inference.model_config import model_config
from pteforge.server.inference.repository import SERVED_EXTENSIONS, load_model, repository_index
from pteforge.server.inference.sequences import session_scope
from pteforge.server.inference.statuses import NotFoundError, NotRunnableError
from pteforge.server.inference.work import (
    check_ready,
    count_undecodable,
    model_of,
    model_statistics,
    response_parameters,
    run_decoded,
    served_version,
)

T = TypeVar("T")
CurrentState = Callable[[], InferenceState | None]
"""The running app's ``InferenceState``, or ``None`` outside its lifespan."""


@dataclass(frozen=True)
class CallHeaders:
    """A gRPC call's text metadata, as the headers token auth reads."""

    headers: Mapping[str, str]


def call_headers(metadata: Iterable[tuple[str, Any]] | None) -> CallHeaders:
    """A call's text ``metadata`` entries as headers (gRPC keys are lower-case)."""
    entries = [(key, value) for key, value in metadata or () if isinstance(value, str)]
    return CallHeaders(ImmutableMultiDict(entries))  # all kept: two authorizations are refused


async def infer(
    state: InferenceState,
    principal: Principal,
    request: Any,
    plans: RequestPlans,
    stream: HeldBytes | None = None,
) -> Any:
    """Run one ``ModelInferRequest`` for ``principal`` (decoded through ``plans``, the
    layouts already checked): its ``ModelInferResponse``. The message and its decoded
    inputs count in ``state.memory`` until it is answered, as a request in flight of its
    own, or within the place of the ``stream`` it came on."""
    place = stream.within() if stream else state.memory.holding(session_scope(principal))
    with place as held:
        held.grow(request.ByteSize())
        return await _infer_held(state, principal, request, held, plans)


async def _infer_held(
    state: InferenceState,
    principal: Principal,
    request: Any,
    held: HeldBytes,
    plans: RequestPlans,
) -> Any:
    model, version = request.model_name, request.model_version or None
    artifact, signature = await model_of(state, principal, model, version)
    started = time.perf_counter()
    try:
        decoded = plans.decode(request, signature)
    except Exception:
        count_undecodable(state, principal, model, version, artifact, started)
        raise
    held.grow_by_run(decoded, signature)

    async def encode(result: InferResult) -> Any:
        parameters = response_parameters(result)
        served = served_version(artifact)
        return encode_response(model, decoded, signature, result.outputs, parameters, served)

    return await run_decoded(
        state, principal, model, version, artifact, signature, decoded, encode, started=started
    )


class Unreadable(NamedTuple):
    """A request message protobuf cannot parse (a string that is not UTF-8, bad wire bytes),
    as the server's deserializer hands it on."""

    reason: str

    @property
    def message(self) -> str:
        return f"the request message cannot be read: {self.reason} (is every string UTF-8?)"


OPEN_METHODS = frozenset({"ServerLive", "ServerReady"})
"""The calls that need no token (and take no request fields)."""


@refuse_unimplemented(rpc.GRPCInferenceServiceServicer)
class InferenceService(rpc.GRPCInferenceServiceServicer):
    """The gRPC service over the running app's state (see the module docstring)."""

    def __init__(self, current: CurrentState) -> None:
        self.current = current
        self.plans = RequestPlans()  # the request layouts this service has checked

    def _state(self) -> InferenceState:
        state = self.current()
        if state is None:
            raise PoolClosedError("the inference runtime is not running")
        return state

    async def _caller(self, context: Any) -> tuple[InferenceState, Principal]:
        state = self._state()
        return state, await state.authenticate(call_headers(context.invocation_metadata()))

    async def _answer(self, context: Any, work: Callable[[], Awaitable[T]]) -> T:
        """``work()``'s answer, or the call aborted with the status its error maps to."""
        try:
            return await work()
        except Exception as exc:
            code, message = grpc_status(exc)
        await context.abort(code, message)
        raise AssertionError("context.abort returned")  # pragma: no cover

    async def ServerLive(self, request: Any, context: Any) -> Any:
        """The server process answers (no token needed)."""
        return pb.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: Any) -> Any:
        """Whether the runtime pool can serve (no token needed)."""
        state = self.current()
        return pb.ServerReadyResponse(ready=state is not None and state.pool.ready)

    async def ServerMetadata(self, request: Any, context: Any) -> Any:
        """Name, version and the protocol extensions served."""

        async def work() -> Any:
            state, _ = await self._caller(context)
            extensions = list(SERVED_EXTENSIONS)
            return pb.ServerMetadataResponse(
                name="pteforge", version=state.server_version, extensions=extensions
            )

        return await self._answer(context, work)

    async def ModelReady(self, request: Any, context: Any) -> Any:
        """Whether the caller has the model and it can run here (false when it has not, or
        it is delegated to a backend this host cannot execute)."""

        async def work() -> Any:
            state, principal = await self._caller(context)
            try:
                await check_ready(state, principal, request.name, request.version or None)
            except (NotFoundError, NotRunnableError):
                return pb.ModelReadyResponse(ready=False)
            return pb.ModelReadyResponse(ready=True)

        return await self._answer(context, work)

    async def ModelMetadata(self, request: Any, context: Any) -> Any:
        """The inputs and outputs of a method (``-1`` for dynamic dimensions)."""

        async def work() -> Any:
            state, principal = await self._caller(context)
            name, version = request.name, request.version or None
            artifact, signature = await model_of(state, principal, name, version)
            return metadata_response(model_metadata(name, signature, artifact.version))

        return await self._answer(context, work)

    async def ModelConfig(self, request: Any, context: Any) -> Any:
        """Triton's model configuration extension: the method's ``ModelConfig``."""

        async def work() -> Any:
            state, principal = await self._caller(context)
            name, version = request.name, request.version or None
            artifact, signature = await model_of(state, principal, name, version)
            return pb.ModelConfigResponse(config=model_config(name, signature, artifact.version))

        return await self._answer(context, work)

    async def RepositoryIndex(self, request: Any, context: Any) -> Any:
        """The caller's models, by name, version and method (the model repository
        extension; ``ready``: only those that can run here)."""

        async def work() -> Any:
            entries = await repository_index(*await self._caller(context), request.ready)
            models = [pb.RepositoryIndexResponse.ModelIndex(**asdict(e)) for e in entries]
            return pb.RepositoryIndexResponse(models=models)

        return await self._answer(context, work)

    async def RepositoryModelLoad(self, request: Any, context: Any) -> Any:
        """Answers once the model can run (it loads on demand); NOT_FOUND as ``ModelReady``
        would say false. There is no unload."""

        async def work() -> Any:
            caller = await self._caller(context)
            await load_model(*caller, request.model_name, request.parameters.keys())
            return pb.RepositoryModelLoadResponse()

        return await self._answer(context, work)

    async def ModelInfer(self, request: Any, context: Any) -> Any:
        """Run a method; ``sequence_*`` parameters run it in a session, as on /v2."""

        async def work() -> Any:
            return await infer(*await self._caller(context), request, self.plans)

        return await self._answer(context, work)

    async def ModelStatistics(self, request: Any, context: Any) -> Any:
        """The statistics extension: the caller's models, or the one named."""

        async def work() -> Any:
            state, principal = await self._caller(context)
            name, version = request.name or None, request.version or None
            answer = await model_statistics(state, principal, name, version)  # NOT_FOUND too
            return json_format.ParseDict(
                answer, pb.ModelStatisticsResponse(), ignore_unknown_fields=True
            )

        return await self._answer(context, work)

    async def ModelStreamInfer(
        self, requests: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        """Each request's response (or ``error_message``), in order; a sequence's steps
        arrive one after another on the stream, so a decode loop keeps its state.

        The token is checked again at each request (a cache hit within the token TTL), so
        a revoked token ends its open streams with UNAUTHENTICATED, as it does new calls.
        An open stream is one of its project's requests in flight until it ends (each held
        ~9 KB however idle, and one token opened 20,000: 185 MB), so past
        ``PTEFORGE_REQUESTS_PER_PROJECT`` a new one is RESOURCE_EXHAUSTED."""

        async def opened() -> HeldBytes:
            state, principal = await self._caller(context)
            return state.memory.holding(session_scope(principal))

        with await self._answer(context, opened) as place:
            async for request in requests:
                state, principal = await self._answer(context, lambda: self._caller(context))
                if isinstance(request, Unreadable):
                    yield pb.ModelStreamInferResponse(error_message=request.message)
                    continue
                try:
                    response = await infer(state, principal, request, self.plans, place)
                except Exception as exc:
                    yield pb.ModelStreamInferResponse(error_message=grpc_status(exc)[1])
                    continue
                yield pb.ModelStreamInferResponse(infer_response=response)
