"""ClaimService over gRPC: proto in, domain call, proto out."""

from __future__ import annotations

from trainyard.claim.v1 import claim_service_pb2_grpc


class ClaimServicer(claim_service_pb2_grpc.ClaimServiceServicer):
    """Methods not overridden here answer UNIMPLEMENTED in the standard error shape."""
