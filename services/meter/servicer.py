"""MeterService over gRPC: proto in, domain call, proto out."""

from __future__ import annotations

from trainyard.meter.v1 import meter_service_pb2_grpc


class MeterServicer(meter_service_pb2_grpc.MeterServiceServicer):
    """Methods not overridden here answer UNIMPLEMENTED in the standard error shape."""
