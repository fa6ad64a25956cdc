"""Renders Envoy's config from `envoy.yaml.tmpl` for a set of upstream service ports: one
cluster per service, one endpoint per replica, balanced round robin per request."""

from __future__ import annotations

import dataclasses
import json
import string
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from google.protobuf import descriptor_pb2

from gateway import rules
from trainyard import rest

HERE = Path(__file__).parent
DESCRIPTOR = HERE / "trainyard.binpb"
TEMPLATE = HERE / "envoy.yaml.tmpl"
LUA = HERE / "rest.lua"
OPENAPI = HERE / "openapi.json"

# The console (gateway/console/): Envoy answers each file from memory, read at config load.
# uPlot comes from npm (`npm ci`, which `make up` runs); the page says so when it is missing.
CONSOLE = HERE / "console"
UPLOT = HERE.parent / "node_modules" / "uplot" / "dist"
CONSOLE_FILES = {
    "/console/": (CONSOLE / "index.html", "text/html; charset=utf-8"),
    "/console/app.js": (CONSOLE / "app.js", "text/javascript; charset=utf-8"),
    "/console/app.css": (CONSOLE / "app.css", "text/css; charset=utf-8"),
    "/console/uplot.js": (UPLOT / "uPlot.iife.min.js", "text/javascript; charset=utf-8"),
    "/console/uplot.css": (UPLOT / "uPlot.min.css", "text/css; charset=utf-8"),
}
# The page runs only its own scripts and talks only to this origin; nothing the API
# answers can run as code there.
CONSOLE_HEADERS = {
    "cache-control": "no-cache",
    "content-security-policy": (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


@dataclasses.dataclass(frozen=True)
class GatewayTls:
    """What Envoy's listener serves TLS with, and what clients verify it with."""

    cert_file: Path
    key_file: Path
    # The CA certificates a client verifies the gateway with: the self-signed pair's own
    # certificate, or the operator's `TRAINYARD_TLS_CA` (empty: the system's CAs).
    ca_file: Path | None
    # Where the gateway asks executors for a client certificate: the CAs it accepts.
    client_ca_file: Path | None = None


# The executors' stream: open for as long as an executor runs, silent while it is idle.
CLAIMS = "trainyard.claim.v1.ClaimService"
CONNECT = f"/{CLAIMS}/Connect"


def _retry(on: str) -> str:
    """A route's retry policy: on the failures `on` names, the call goes to another replica."""
    return (
        f"{{retry_on: '{on}', num_retries: 2, retry_host_predicate: [{{name: "
        "envoy.retry_host_predicates.previous_hosts, typed_config: {'@type': "
        "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate}}], "
        "host_selection_retry_max_attempts: 3}"
    )


# A call that never reached a replica (it is down, or restarting) goes to another one: only
# failures before the service saw the call, so no call runs twice. Not the executors'
# stream: the executor reconnects itself, and a retried stream is buffered.
_RETRY = _retry("connect-failure,refused-stream,reset-before-request")
# A read (`idempotency_level = NO_SIDE_EFFECTS`) is also sent on when its replica died
# under it, since running it twice changes nothing.
_READ_RETRY = _retry("connect-failure,refused-stream,reset-before-request,reset")
# A call to a service spends a token of its key's bucket (the local rate limit filter in
# envoy.yaml.tmpl), whichever header carries the key.
_PER_KEY = (
    "[{actions: [{request_headers: {header_name: authorization, descriptor_key: authorization}}]}, "
    "{actions: [{request_headers: {header_name: x-api-key, descriptor_key: x-api-key}}]}]"
)
# The executors' stream is never buffered whole: it ends when the executor does.
_NO_BUFFER = (
    "{'@type': type.googleapis.com/envoy.extensions.filters.http.buffer.v3.BufferPerRoute, "
    "disabled: true}"
)
# Envoy's default circuit breakers allow 1,024 connections, pending and open requests (and
# 3 retries) at once per cluster; a thousand executors' streams and their calls would trip
# them on claims.
CIRCUIT_LIMIT = 100_000

# Upstream name → the gRPC services it serves. The first is the one its health is
# checked by (Envoy's cluster health check, `trainyard up`, the `x-trainyard-service`
# route); the claims process also serves the training clients, whose calls travel on
# the executors' streams it holds, and the jobs process an org's keys, trail and limits.
SERVES: dict[str, tuple[str, ...]] = {
    "jobs": ("trainyard.job.v1.JobService", "trainyard.org.v1.OrgService"),
    "claims": ("trainyard.claim.v1.ClaimService", "trainyard.client.v1.ClientService"),
    "artifacts": ("trainyard.artifact.v1.ArtifactService",),
    "meter": ("trainyard.meter.v1.MeterService", "trainyard.webhook.v1.WebhookService"),
}
# Upstream name → the gRPC service whose health stands for the upstream's.
SERVICES = {name: served[0] for name, served in SERVES.items()}
# Upstreams that speak HTTP/1.1, not gRPC: name → (the path prefix routed to it, its
# health path). The Tinker wire (services/tinker) serves the official `tinker` SDK.
HTTP_SERVICES = {"tinker": ("/api/v1/", "/api/v1/healthz")}

# Envoy's own answers, in order of precedence: (HTTP status, condition, reason, message).
# A body that fails to transcode has already been rewritten to the gRPC method (the
# transcoder sets `x-envoy-original-path`); a query parameter or route that fails has
# not, and neither has any request of a native gRPC client, whose errors travel in
# trailers and are never rewritten.
_TRANSCODED = "{header: {name: x-envoy-original-path, present_match: true}}"
_NOT_GRPC = (
    "{header: {name: content-type, string_match: {prefix: application/grpc}, "
    "invert_match: true, treat_missing_header_as_empty: true}}"
)
_REST = (
    f"or_filter: {{filters: [{{header_filter: {_TRANSCODED}}}, {{header_filter: {_NOT_GRPC}}}]}}"
)
_READ = "{header: {name: x-envoy-original-method, string_match: {safe_regex: {regex: '^(GET|DELETE)$'}}}}"
# An answer the REST face (gateway/rest.lua) made itself is already in its final shape.
_NOT_ANSWERED = (
    "metadata_filter: {matcher: {filter: envoy.filters.http.lua, path: [{key: answered}], "
    "value: {bool_match: false}}, match_if_key_not_found: true}"
)
_LOCAL_REPLIES = [
    # A read carries no body: what failed to transcode is a query value.
    (400, f"and_filter: {{filters: [{{header_filter: {_TRANSCODED}}}, {{header_filter: {_READ}}}]}}",
     "INVALID_REQUEST", "A query parameter is unknown or not valid."),
    (400, f"header_filter: {_TRANSCODED}", "MALFORMED_JSON",
     "The request body is not a JSON object of the method's shape."),
    (400, _REST, "INVALID_REQUEST", "A query parameter is unknown or not valid."),
    # The gateway's own 403: an executor's call without the client certificate it asks for.
    (403, _REST, "PERMISSION_DENIED",
     "This gateway asks executors for a client certificate its client CAs signed, besides their key."),
    (404, _REST, "NOT_FOUND", "No such route."),
    (413, _REST, "PAYLOAD_TOO_LARGE", "The request body is too large."),
    (429, _REST, "RATE_LIMITED", "Too many requests with this key; retry later."),
    (503, _REST, "UNAVAILABLE", "The service is unavailable; retry later."),
    (504, _REST, "UNAVAILABLE", "The service did not answer in time; retry later."),
]  # fmt: skip


def _mappers() -> str:
    out = []
    for status, condition, reason, message in _LOCAL_REPLIES:
        status_filter = (
            f"status_code_filter: {{comparison: {{op: EQ, value: "
            f"{{default_value: {status}, runtime_key: gateway.local_reply_{status}}}}}}}"
        )
        body = json.dumps(rest.refusal(reason, message, status=status), sort_keys=True)
        out.append(
            f"""            - filter:
                and_filter:
                  filters:
                  - {{{status_filter}}}
                  - {{{condition}}}
                  - {{{_NOT_ANSWERED}}}
              body_format_override:
                text_format_source: {{inline_string: {json.dumps(body)}}}
                content_type: {rest.PROBLEM_CONTENT_TYPE}"""
        )
    return "\n".join(out)


def _lua() -> str:
    """The REST face's script (gateway/rest.lua) with the routes it knows, generated."""
    routes: dict[str, dict[str, dict[str, str]]] = {}
    replies: dict[str, dict[str, str]] = {}
    shapes = rules.shapes()
    for rule in rules.rules():
        routes.setdefault(rule.pattern, {})[rule.verb] = rule.query_params()
        if (answer := rule.method.output_type[1:]) in shapes:
            # A stream's answer is rewritten line by line as it passes (`stream:` marks it).
            prefix = "stream:" if rule.method.server_streaming else ""
            replies.setdefault(rule.pattern, {})[rule.verb] = prefix + answer
    lines = ["ROUTES = {"]
    for pattern, methods in routes.items():
        allow = ", ".join(sorted(methods))
        verbs = ", ".join(
            f"{verb} = {{{', '.join(f'{k} = {json.dumps(v)}' for k, v in sorted(params.items()))}}}"
            for verb, params in sorted(methods.items())
        )
        answers = ", ".join(
            f"{verb} = {json.dumps(m)}" for verb, m in sorted(replies.get(pattern, {}).items())
        )
        lines.append(
            f"  {{pattern = {json.dumps(pattern)}, allow = {json.dumps(allow)}, "
            f"methods = {{{verbs}}}, replies = {{{answers}}}}},"
        )
    lines.append("}")
    titles = ", ".join(
        f"{reason} = {json.dumps(title)}" for reason, (_, title) in rest.STATUSES.items()
    )
    lines.append(f"TITLES = {{{titles}}}")
    lines.append("SHAPES = {")
    lines.extend(
        f"  [{json.dumps(name)}] = {{fields = {{{_lua_kinds(shape['fields'])}}}, "
        f"nulls = {{{', '.join(json.dumps(n) for n in shape['nulls'])}}}}},"
        for name, shape in shapes.items()
    )
    lines.append("}")
    return "\n".join(lines) + "\n\n" + LUA.read_text()


def _lua_kinds(fields: dict[str, object]) -> str:
    """A shape's fields as a Lua table's members: `int`, a message's name, `{map = …}`."""

    def kind(k: object) -> str:
        return f"{{map = {kind(k['map'])}}}" if isinstance(k, dict) else json.dumps(k)

    return ", ".join(f"[{json.dumps(name)}] = {kind(k)}" for name, k in fields.items())


def _routes(http: Sequence[str] = ()) -> str:
    # No idle timeout on the executors' stream: an idle executor keeps one stream for
    # hours, and the HTTP/2 pings on both sides find a peer that is gone.
    out = [
        f"""              - match: {{path: {CONNECT}}}
                route: {{cluster: claims, timeout: 0s, idle_timeout: 0s, rate_limits: {_PER_KEY}}}
                typed_per_filter_config: {{envoy.filters.http.buffer: {_NO_BUFFER}}}""",
        # The contract's own description, read once from the file at config load.
        f"""              - match:
                  path: /v1/train/openapi.json
                  headers: [{{name: ":method", string_match: {{exact: GET}}}}]
                direct_response: {{status: 200, body: {{filename: {OPENAPI}}}}}
                response_headers_to_add: [{{header: {{key: content-type, value: application/json}}}}]""",
    ]
    out.extend(_console_routes())
    # The HTTP upstreams: no timeout (a Tinker future is long-polled), a token of the key's
    # bucket per call (the SDK sends its key as `x-api-key`).
    for name in http:
        prefix = HTTP_SERVICES[name][0]
        out.append(
            f"""              - match: {{prefix: {prefix}}}
                route: {{cluster: {name}, timeout: 0s, retry_policy: {_RETRY}, rate_limits: {_PER_KEY}}}"""
        )
    for name, served in SERVES.items():
        # gRPC health of one service through the gateway: pick it with `x-trainyard-service`.
        out.append(
            f"""              - match:
                  prefix: /grpc.health.v1.Health/
                  headers: [{{name: x-trainyard-service, string_match: {{exact: {name}}}}}]
                route: {{cluster: {name}, timeout: 5s, retry_policy: {_READ_RETRY}}}"""
        )
        # gRPC only: a REST request reaches a service once the transcoder made it one.
        for full in served:
            out.extend(
                f"""              - match:
                  path: /{full}/{method}
                  headers: [{{name: content-type, string_match: {{prefix: application/grpc}}}}]
                route: {{cluster: {name}, timeout: 0s, retry_policy: {_READ_RETRY},
                        rate_limits: {_PER_KEY}}}"""
                for method in _reads().get(full, ())
            )
            out.append(
                f"""              - match:
                  prefix: /{full}/
                  headers: [{{name: content-type, string_match: {{prefix: application/grpc}}}}]
                route: {{cluster: {name}, timeout: 0s, retry_policy: {_RETRY}, rate_limits: {_PER_KEY}}}"""
            )
    return "\n".join(out)


@cache
def _reads() -> dict[str, list[str]]:
    """Each service's methods that change nothing, by the descriptor set's options."""
    files = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTOR.read_bytes()).file
    return {
        f"{file.package}.{service.name}": [
            method.name
            for method in service.method
            if method.options.idempotency_level == descriptor_pb2.MethodOptions.NO_SIDE_EFFECTS
        ]
        for file in files
        for service in file.service
    }


def _console_routes() -> list[str]:
    out = [
        """              - match: {path: /console}
                redirect: {path_redirect: /console/}"""
    ]
    for path, (file, kind) in CONSOLE_FILES.items():
        headers = ", ".join(
            f"{{header: {{key: {key}, value: {json.dumps(value)}}}}}"
            for key, value in {"content-type": kind, **CONSOLE_HEADERS}.items()
        )
        answer = (
            f"{{status: 200, body: {{filename: {file}}}}}"
            if file.exists()
            else "{status: 503, body: {inline_string: "
            '"The console is not installed here: `npm ci` in the checkout installs it."}}'
        )
        out.append(
            f"""              - match:
                  path: {path}
                  headers: [{{name: ":method", string_match: {{exact: GET}}}}]
                direct_response: {answer}
                response_headers_to_add: [{headers}]"""
        )
    return out


def _endpoints(ports: int | Sequence[int]) -> list[int]:
    """A service's replicas' ports; one port is one replica."""
    return [ports] if isinstance(ports, int) else list(ports)


def _lb_endpoints(host: str, ports: int | Sequence[int]) -> str:
    """A cluster's `lb_endpoints` entries, one a replica."""
    return "\n".join(
        f"        - endpoint: {{address: {{socket_address: {{address: {host}, port_value: {port}}}}}}}"
        for port in _endpoints(ports)
    )


def _clusters(ports: Mapping[str, int | Sequence[int]], host: str) -> str:
    out = []
    for name, full in SERVICES.items():
        endpoints = _lb_endpoints(host, ports[name])
        out.append(
            f"""  - name: {name}
    type: STATIC
    connect_timeout: 2s
    circuit_breakers:
      thresholds:
      - {{max_connections: {CIRCUIT_LIMIT}, max_pending_requests: {CIRCUIT_LIMIT}, max_requests: {CIRCUIT_LIMIT},
         max_retries: {CIRCUIT_LIMIT}}}
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        # Ping each service's connection, so one that died under a stream is noticed.
        explicit_http_config:
          http2_protocol_options: {{connection_keepalive: {{interval: 30s, timeout: 20s}}}}
    health_checks:
    - timeout: 2s
      interval: 2s
      no_traffic_interval: 2s
      unhealthy_threshold: 2
      healthy_threshold: 1
      grpc_health_check: {{service_name: {full}}}
    load_assignment:
      cluster_name: {name}
      endpoints:
      - lb_endpoints:
{endpoints}"""
        )
    for name, (_, health) in HTTP_SERVICES.items():
        if name not in ports:
            continue
        endpoints = _lb_endpoints(host, ports[name])
        out.append(
            f"""  - name: {name}
    type: STATIC
    connect_timeout: 2s
    circuit_breakers:
      thresholds:
      - {{max_connections: {CIRCUIT_LIMIT}, max_pending_requests: {CIRCUIT_LIMIT}, max_requests: {CIRCUIT_LIMIT},
         max_retries: {CIRCUIT_LIMIT}}}
    health_checks:
    - timeout: 2s
      interval: 2s
      no_traffic_interval: 2s
      unhealthy_threshold: 2
      healthy_threshold: 1
      http_health_check: {{path: {health}}}
    load_assignment:
      cluster_name: {name}
      endpoints:
      - lb_endpoints:
{endpoints}"""
        )
    return "\n".join(out)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one key may send through one Envoy: requests a second, sustained and in a
    burst (`TRAINYARD_RATE_PER_KEY`, `TRAINYARD_RATE_BURST_PER_KEY`), and the largest
    request body (`TRAINYARD_MAX_BODY_BYTES`)."""

    rate_per_second: int = 300
    rate_burst: int = 600
    max_body_bytes: int = 8 * 1024 * 1024


def render(
    *,
    listen_host: str,
    listen_port: int,
    admin_port: int,
    admin_socket: Path | str,
    ports: Mapping[str, int | Sequence[int]],
    upstream_host: str = "127.0.0.1",
    idle_timeout_seconds: int = 300,
    limits: Limits | None = None,
    tls: GatewayTls | None = None,
    internal_port: int | None = None,
) -> str:
    """The config for `ports`, each service's replicas' ports (or its one port);
    `admin_socket` is the unix socket Envoy's admin listens on, `admin_port` the loopback
    port that serves only its metrics and readiness; `idle_timeout_seconds` cuts any
    request but the executors' stream that has had nothing to send or receive for that
    long. With `tls`, the listener serves TLS (asking executors for a client certificate
    when it names client CAs), and the stack's own processes reach the same routes on a
    plain loopback listener at `internal_port`."""
    limits = limits or Limits()
    # The gateway is ready while each service has a replica serving: one of N is 100/N %.
    healthy = "\n".join(
        f"                {name}: {{value: {100 // len(_endpoints(ports[name]))}}}"
        for name in [*SERVICES, *(n for n in HTTP_SERVICES if n in ports)]
    )
    return string.Template(TEMPLATE.read_text()).substitute(
        listen_host=listen_host,
        listen_port=listen_port,
        admin_port=admin_port,
        admin_socket=admin_socket,
        rate_per_second=limits.rate_per_second,
        rate_burst=limits.rate_burst,
        max_body_bytes=limits.max_body_bytes,
        idle_timeout=idle_timeout_seconds,
        descriptor=DESCRIPTOR,
        services=", ".join(full for served in SERVES.values() for full in served),
        routes=_routes([n for n in HTTP_SERVICES if n in ports]),
        mappers=_mappers(),
        lua=json.dumps(_lua()),
        healthy=healthy,
        clusters=_clusters(ports, upstream_host),
        transport_socket=_transport_socket(tls),
        client_certificates=_client_certificates(tls, internal_port),
        internal_listener=_internal_listener(internal_port),
    )


def _transport_socket(tls: GatewayTls | None) -> str:
    """The listener's TLS: the certificate and key by file (Envoy reads them at start), h2
    and HTTP/1.1 by ALPN, and the client CAs that verify a certificate an executor shows."""
    if tls is None:
        return ""
    validation = (
        f"\n            validation_context: {{trusted_ca: {{filename: {json.dumps(str(tls.client_ca_file))}}}}}"
        if tls.client_ca_file
        else ""
    )
    return f"""      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]
            tls_certificates:
            - certificate_chain: {{filename: {json.dumps(str(tls.cert_file))}}}
              private_key: {{filename: {json.dumps(str(tls.key_file))}}}{validation}
"""


def _client_certificates(tls: GatewayTls | None, internal_port: int | None) -> str:
    """Where the gateway asks executors for a client certificate: a call to ClaimService
    (gRPC, or REST once the transcoder made it one) goes on only over a connection whose
    certificate a client CA verified, or from the stack's own loopback listener. A client
    that shows none is not refused at the handshake, so people's calls need none."""
    if tls is None or tls.client_ca_file is None:
        return ""
    internal = (
        f"""
                  stack-own:
                    permissions: [{{destination_port: {internal_port}}}]
                    principals: [{{any: true}}]"""
        if internal_port
        else ""
    )
    return f"""          - name: envoy.filters.http.rbac
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
              rules:
                action: ALLOW
                policies:
                  not-an-executor-call:
                    permissions: [{{not_rule: {{url_path: {{path: {{prefix: /{CLAIMS}/}}}}}}}}]
                    principals: [{{any: true}}]
                  executor-with-certificate:
                    permissions: [{{any: true}}]
                    # `authenticated: {{}}` alone holds for any TLS connection: the name
                    # (a verified peer certificate's SAN or subject) must be there.
                    principals: [{{authenticated: {{principal_name: {{safe_regex: {{regex: ".+"}}}}}}}}]{internal}
"""


def _internal_listener(port: int | None) -> str:
    """The stack's own processes' way in when the gateway serves TLS: the same routes and
    filters on a plain listener on loopback (keys are asked there as anywhere)."""
    if port is None:
        return ""
    return f"""  - name: internal
    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - filters: [*gateway]

"""
