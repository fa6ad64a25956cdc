"""A service's gRPC server lets its clients (the gateway, executors) ping a quiet stream:
it never answers GOAWAY too_many_pings, which would end every stream on the connection."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.core.config import Config
from services.core.server import build
from services.core.store import Store, open_store
from tests.support import ServiceThread

NAME = "trainyard.test.v1.ProbeService"


def _noop(server: grpc.aio.Server, store: Store) -> None:
    """Registers nothing: health alone is enough to hold a stream open."""


def test_pings_on_a_quiet_stream_never_end_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = Config.from_env({"TRAINYARD_HOME": str(home)})
    store = open_store(config.database_url)
    served = ServiceThread(
        lambda: build(
            config, name="probe", full_name=NAME, register=_noop, roles={}, store=store, port=0
        )
    )
    stopped = False
    # Far more eager than the gateway or an executor: under gRPC's default policy the
    # server sends this client away after its third ping on a stream that carries no data.
    options = [
        ("grpc.keepalive_time_ms", 300),
        ("grpc.keepalive_timeout_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    try:
        with grpc.insecure_channel(served.target, options=options) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service=NAME)
            )
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
            ended = threading.Event()
            watch.add_done_callback(lambda _: ended.set())
            # Twenty pings' time with nothing else on the stream.
            assert not ended.wait(6.0), watch.code()
            # The stream still carries what the service says: it is shutting down.
            served.stop()
            stopped = True
            assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        if not stopped:
            served.stop()
