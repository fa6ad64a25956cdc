"""ArtifactService over gRPC: proto in, domain call, proto out."""

from __future__ import annotations

from trainyard.artifact.v1 import artifact_service_pb2_grpc


class ArtifactServicer(artifact_service_pb2_grpc.ArtifactServiceServicer):
    """Methods not overridden here answer UNIMPLEMENTED in the standard error shape."""
