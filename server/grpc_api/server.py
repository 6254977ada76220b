"""Starting and stopping the gRPC frontend inside the app's lifespan (same process and
event loop as uvicorn)."""

from __future__ import annotations

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
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        server.add_insecure_port(address)
    except RuntimeError:
        raise GrpcPortError(
            f"cannot listen for gRPC on {address}: the port is in use (or not allowed); pass "
            "--grpc-port PORT (or set PTEFORGE_GRPC_PORT), or --grpc-port 0 to turn gRPC off"
        ) from None
    await server.start()
    return server
