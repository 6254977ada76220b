"""Starting and stopping the gRPC frontend inside the app's lifespan (same process and
event loop as uvicorn)."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2_grpc as rpc

from pteforge.contracts.errors import ErrorCode
from pteforge.server.errors import ServiceError
from pteforge.server.grpc_api.service import (
    OPEN_METHODS,
    CurrentState,
    InferenceService,
    Unreadable,
    call_headers,
)
from pteforge.server.grpc_api.status import grpc_status
from pteforge.server.inference.sequences import session_scope

INFER_METHOD = "/ModelInfer"
"""The unary call whose message may be large (up to the receive limit)."""

STOP_GRACE_S = 5.0
"""Seconds calls in flight get to finish when the server stops."""


class GrpcPortError(ServiceError, code=ErrorCode.INTERNAL_ERROR):
    """The gRPC port cannot be bound (another process listens on it)."""


async def start_grpc_server(
    current: CurrentState, host: str, port: int, max_message_bytes: int
) -> grpc.aio.Server:
    """The gRPC service listening on ``host:port`` and started; ``GrpcPortError`` when the
    port is taken. Port reuse is off, so a second server cannot silently share the port."""
    server = grpc.aio.server(
        interceptors=[AuthenticateBeforeReading(current)],
        options=[
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", -1),
        ],
    )
    rpc.add_GRPCInferenceServiceServicer_to_server(InferenceService(current), server)
    try:
        server.add_insecure_port(_address(host, port))
    except RuntimeError:
        raise _port_error(host, port) from None
    await server.start()
    return server


def check_grpc_port(host: str, port: int) -> None:
    """``GrpcPortError`` now if ``host:port`` cannot be bound, so ``serve`` says so in one
    line before it starts anything (the lifespan's own bind stays the final word)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as grpc does
        try:
            probe.bind((host, port))
        except OSError:
            raise _port_error(host, port) from None


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _port_error(host: str, port: int) -> GrpcPortError:
    return GrpcPortError(
        f"cannot listen for gRPC on {_address(host, port)}: the port is in use (or not "
        "allowed); pass --grpc-port PORT (or set PTEFORGE_GRPC_PORT), or --grpc-port 0 to "
        "turn gRPC off"
    )


class AuthenticateBeforeReading(grpc.aio.ServerInterceptor):
    """Authenticates each call from its metadata before its request message is read.

    grpcio reads a unary call's whole message (up to the receive limit) before the handler
    runs, so a client without a token made the server hold 200 MiB a call (8 calls at
    once: 2.7 GB) before its UNAUTHENTICATED. Interceptors run before that read: a caller
    that is not authenticated gets a handler that refuses without reading (a stream
    handler reads only when asked; HTTP/2 flow control holds the rest back), and the
    handlers still authenticate as before (a cache hit). A caller whose project already
    holds its whole share of request memory is refused unread the same way (its message's
    size is known only once read). Open calls (``OPEN_METHODS``) take no request fields, so
    theirs is never read."""

    def __init__(self, current: CurrentState) -> None:
        self.current = current
        self._readable: dict[str, grpc.RpcMethodHandler] = {}  # by method: built once

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        if handler.request_streaming:  # ModelStreamInfer authenticates before it reads
            return self._readable_handler(details.method, handler)
        if details.method.rsplit("/", 1)[-1] in OPEN_METHODS:
            unread = partial(_without_request, handler)
            return _stream_unary(handler, unread)
        state = self.current()
        if state is not None:
            try:
                caller = await state.authenticate(call_headers(details.invocation_metadata))
                if details.method.endswith(INFER_METHOD):
                    state.memory.check_room(session_scope(caller))
            except Exception as exc:
                return _stream_unary(handler, partial(_refuse, *grpc_status(exc)))
        return self._readable_handler(details.method, handler)

    def _readable_handler(self, method: str, handler: grpc.RpcMethodHandler) -> Any:
        readable = self._readable.get(method)
        if readable is None:
            readable = self._readable[method] = _read_or_refused(handler)
        return readable


def _read_or_refused(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler``, whose message protobuf cannot parse is INVALID_ARGUMENT naming why (on
    a stream: that request's ``error_message``, the stream left open): grpcio answered
    UNKNOWN ("Unexpected DecodeError") and logged a traceback a call."""
    read = partial(_read, handler.request_deserializer)
    if handler.stream_stream is not None:
        return grpc.stream_stream_rpc_method_handler(
            handler.stream_stream,
            request_deserializer=read,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_unary is None:
        return handler
    return grpc.unary_unary_rpc_method_handler(
        partial(_unless_unreadable, handler),
        request_deserializer=read,
        response_serializer=handler.response_serializer,
    )


def _read(deserialize: Callable[[bytes], Any], data: bytes) -> Any:
    try:
        return deserialize(data)
    except DecodeError as exc:
        return Unreadable(str(exc))


async def _unless_unreadable(handler: grpc.RpcMethodHandler, request: Any, context: Any) -> Any:
    if isinstance(request, Unreadable):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
    return await handler.unary_unary(request, context)


def _stream_unary(handler: grpc.RpcMethodHandler, behavior: Callable[..., Any]) -> Any:
    return grpc.stream_unary_rpc_method_handler(
        behavior,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


async def _without_request(handler: grpc.RpcMethodHandler, _: object, context: Any) -> Any:
    return await handler.unary_unary(handler.request_deserializer(b""), context)


async def _refuse(code: grpc.StatusCode, message: str, _: object, context: Any) -> Any:
    await context.abort(code, message)
