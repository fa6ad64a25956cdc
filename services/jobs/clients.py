"""ClientService (`trainyard.client.v1`) over gRPC, served by the JobService process until
interactive training clients are built (issue 15) and placed where their engine runs."""

from __future__ import annotations

from trainyard.client.v1 import client_service_pb2_grpc


class ClientServicer(client_service_pb2_grpc.ClientServiceServicer):
    """Methods not overridden here answer UNIMPLEMENTED in the standard error shape."""
