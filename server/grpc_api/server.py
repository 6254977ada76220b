"""Starting and stopping the gRPC frontend inside the app's lifespan (same process and
event loop as uvicorn)."""

from __future__ import annotations

import socket

import grpc
from tritonclient.grpc import service_pb2_grpc as rpc

from pteforge.contracts.errors import ErrorCode
from pteforge.server.errors import ServiceError
from pteforge.server.grpc_api.service import CurrentState, InferenceService

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
        options=[
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", -1),
        ]
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
