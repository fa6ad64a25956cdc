"""Replicas as configuration: how many a stack may run and on which database, and the
gateway config that puts every replica of a service behind one cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gateway.render import CIRCUIT_LIMIT, SERVICES, render
from infra.stack import replica_names
from services.core.config import Config, ConfigError
from tests.support import assert_envoy_accepts

PG = "postgresql://postgres@127.0.0.1:5432/test"


def test_replicas_default_to_one_and_read_from_the_environment() -> None:
    assert Config.from_env({}).replicas == 1
    env = {"TRAINYARD_REPLICAS": "3", "TRAINYARD_DATABASE_URL": PG}
    assert Config.from_env(env).replicas == 3


@pytest.mark.parametrize("replicas", ["0", "17", "-1"])
def test_replicas_outside_one_to_sixteen_are_refused(replicas: str) -> None:
    env = {"TRAINYARD_REPLICAS": replicas, "TRAINYARD_DATABASE_URL": PG}
    with pytest.raises(ConfigError, match="TRAINYARD_REPLICAS must be from 1 to 16"):
        Config.from_env(env)


def test_more_than_one_replica_on_sqlite_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"TRAINYARD_REPLICAS above 1 needs .* PostgreSQL"):
        Config.from_env({"TRAINYARD_REPLICAS": "2"})


def test_the_first_replica_keeps_the_service_name() -> None:
    assert replica_names("jobs", 1) == ["jobs"]
    assert replica_names("jobs", 3) == ["jobs", "jobs-2", "jobs-3"]


def rendered(ports: dict[str, int | list[int]]) -> str:
    return render(
        listen_host="127.0.0.1",
        listen_port=1,
        admin_port=2,
        admin_socket="/tmp/a.sock",
        ports=ports,
    )


def test_two_ports_a_service_render_two_endpoints_a_cluster(tmp_path: Path) -> None:
    ports = {name: [3000 + 2 * i, 3001 + 2 * i] for i, name in enumerate(SERVICES)}
    text = rendered(dict(ports))
    config = yaml.safe_load(text)
    clusters = {c["name"]: c for c in config["static_resources"]["clusters"]}
    # Besides the services, Envoy's admin socket (its metrics and readiness, on loopback).
    assert set(clusters) == {*SERVICES, "admin"}
    for name in SERVICES:
        cluster = clusters[name]
        (locality,) = cluster["load_assignment"]["endpoints"]
        got = [e["endpoint"]["address"]["socket_address"] for e in locality["lb_endpoints"]]
        assert got == [{"address": "127.0.0.1", "port_value": p} for p in ports[name]]
        assert cluster.get("lb_policy", "ROUND_ROBIN") == "ROUND_ROBIN"
        # A thousand executors' streams do not trip the claims cluster's breakers.
        (limits,) = cluster["circuit_breakers"]["thresholds"]
        assert CIRCUIT_LIMIT >= 10_000
        assert limits == dict.fromkeys(
            ("max_connections", "max_pending_requests", "max_requests", "max_retries"),
            CIRCUIT_LIMIT,
        )
    # The gateway is ready while one replica of each serves.
    (manager,) = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"]
    (health,) = [
        f for f in manager["typed_config"]["http_filters"] if f["name"].endswith("health_check")
    ]
    minimums = health["typed_config"]["cluster_min_healthy_percentages"]
    assert minimums == {name: {"value": 50} for name in SERVICES}

    # A call to a dead replica goes to the other; a read even once it was sent.
    routes = manager["typed_config"]["route_config"]["virtual_hosts"][0]["routes"]

    def retried_on(path: str) -> set[str]:
        """What the first route that takes a gRPC call to `path` retries it on."""
        match = next(
            r
            for r in (route["match"] for route in routes)
            if r.get("path") == path or path.startswith(r.get("prefix", "\0"))
        )
        (route,) = [r["route"] for r in routes if r["match"] is match]
        return set(route.get("retry_policy", {}).get("retry_on", "").split(","))

    sent_once = {"connect-failure", "refused-stream", "reset-before-request"}
    assert retried_on("/trainyard.job.v1.JobService/CreateJob") == sent_once
    assert retried_on("/trainyard.job.v1.JobService/GetJob") == {*sent_once, "reset"}
    assert retried_on("/trainyard.claim.v1.ClaimService/Connect") == {""}

    assert_envoy_accepts(text, tmp_path)


def test_one_port_a_service_renders_as_it_always_has() -> None:
    one = {name: 3000 + i for i, name in enumerate(SERVICES)}
    assert rendered(dict(one)) == rendered({name: [port] for name, port in one.items()})
    config = yaml.safe_load(rendered(dict(one)))
    for cluster in config["static_resources"]["clusters"]:
        (locality,) = cluster["load_assignment"]["endpoints"]
        assert len(locality["lb_endpoints"]) == 1
