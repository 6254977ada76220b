"""The Open Inference Protocol's gRPC service (``inference.GRPCInferenceService``), for
unmodified ``tritonclient.grpc`` clients: ``serve --grpc-port`` (``0`` turns it off)."""

from pteforge.server.grpc_api.server import STOP_GRACE_S, GrpcPortError, start_grpc_server

__all__ = ["STOP_GRACE_S", "GrpcPortError", "start_grpc_server"]
