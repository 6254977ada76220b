"""The /v2 Open Inference Protocol feature of the server: ``build_inference_router``."""

from pteforge.server.inference.resolver import ArtifactResolver, ResolvedArtifact
from pteforge.server.inference.routes import build_inference_router

__all__ = ["ArtifactResolver", "ResolvedArtifact", "build_inference_router"]
