"""Webhooks' pure parts: the address guard, the retry schedule, the signature a receiver
verifies with `standardwebhooks`' own `Webhook.verify`, one attempt's HTTP (against an
in-memory transport: nothing leaves the process), thresholds and the settings."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from services.core import errors
from services.core.config import Config, ConfigError
from services.core.webhooks import crossed, payload
from services.meter.webhooks.delivery import headers, next_attempt, send
from services.meter.webhooks.guard import Guard, Refused, Target
from services.meter.webhooks.sealing import Sealer, new_secret

# Refused by default: loopback, private, link-local (the cloud metadata address), IPv6
# loopback and unspecified, an IPv4-mapped loopback, 0.0.0.0, shared, multicast and
# documentation space, and IPv6 forms carrying a private IPv4 address inside.
REFUSED = [
    "http://127.0.0.1:8080/hook",
    "https://127.0.0.1/hook",
    "https://10.0.0.1/",
    "https://172.16.3.4/",
    "https://192.168.1.1/",
    "https://169.254.169.254/latest/meta-data",
    "https://[::1]:9000/",
    "https://[::]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:10.0.0.1]/",
    "https://0.0.0.0/",
    "https://100.64.0.1/",
    "https://224.0.0.1/",
    "https://192.0.2.1/",
    "https://[fe80::1]/",
    "https://[fc00::1]/",
    "https://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
    "https://[64:ff9b::a00:1]/",  # NAT64 of 10.0.0.1
]


def resolver(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError("no such name")
        return table[host]

    return resolve


def refused_at_create(guard: Guard, url: str) -> errors.ValidationError:
    with pytest.raises(errors.ValidationError) as caught:
        guard.check_at_create(url)
    assert caught.value.metadata["field"] == "url"
    if url:
        assert url not in str(caught.value) and url not in repr(caught.value.to_status())
    return caught.value


@pytest.mark.parametrize("url", REFUSED)
def test_an_address_that_is_not_public_is_refused_at_create_and_at_delivery(url: str) -> None:
    guard = Guard(resolver=resolver({}))
    refused_at_create(guard, url)
    with pytest.raises(Refused) as caught:
        guard.target(url)
    assert caught.value.category == "address_not_allowed"


def test_a_public_address_needs_https() -> None:
    guard = Guard(resolver=resolver({}))
    guard.check_at_create("https://8.8.8.8/hook")
    guard.check_at_create("https://[2606:4700::1111]:8443/hook?team=a")
    refused_at_create(guard, "http://8.8.8.8/hook")
    target = guard.target("https://[2606:4700::1111]:8443/hook?team=a")
    assert target.address == ipaddress.ip_address("2606:4700::1111")
    assert (target.port, target.target) == (8443, "/hook?team=a")


def test_a_configured_network_is_allowed_over_http_and_no_other() -> None:
    guard = Guard(["127.0.0.1/32", "10.1.0.0/16"], resolver=resolver({}))
    guard.check_at_create("http://127.0.0.1:8080/hook")
    guard.check_at_create("http://[::ffff:127.0.0.1]:8080/hook")  # the same address
    guard.check_at_create("http://10.1.2.3/hook")
    for url in ("http://127.0.0.2/", "http://10.2.0.1/", "http://[::1]:8080/"):
        refused_at_create(guard, url)
    target = guard.target("http://127.0.0.1:8080/hook")
    assert (target.connect_url, target.host_header) == (
        "http://127.0.0.1:8080/hook",
        "127.0.0.1:8080",
    )


def test_a_name_resolving_to_a_private_address_is_refused() -> None:
    names = {
        "inside.example": ["10.0.0.7"],
        "mixed.example": ["93.184.216.34", "127.0.0.1"],
        "public.example": ["93.184.216.34"],
    }
    guard = Guard(resolver=resolver(names))
    refused_at_create(guard, "https://inside.example/hook")
    refused_at_create(guard, "https://mixed.example/hook")  # one bad address refuses all
    guard.check_at_create("https://public.example/hook")
    for url in ("https://inside.example/hook", "https://mixed.example/hook"):
        with pytest.raises(Refused) as caught:
            guard.target(url)
        assert caught.value.category == "address_not_allowed"
    # The attempt connects to the address checked, naming the host in Host (and in TLS).
    target = guard.target("https://public.example/hook")
    assert target.connect_url == "https://93.184.216.34:443/hook"
    assert target.host_header == "public.example"


def test_a_name_that_rebinds_after_the_create_is_refused_at_delivery() -> None:
    names = {"hooks.example": ["93.184.216.34"]}
    guard = Guard(resolver=resolver(names))
    guard.check_at_create("https://hooks.example/")
    names["hooks.example"] = ["169.254.169.254"]
    with pytest.raises(Refused):
        guard.target("https://hooks.example/")


def test_a_name_that_does_not_resolve_passes_over_https_only() -> None:
    guard = Guard(resolver=resolver({}))
    guard.check_at_create("https://later.example/hook")
    refused_at_create(guard, "http://later.example/hook")
    with pytest.raises(Refused) as caught:
        guard.target("https://later.example/hook")
    assert caught.value.category == "name_not_resolved"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "ftp://8.8.8.8/",
        "https://user:pw@8.8.8.8/",
        "https://8.8.8.8/#frag",
        "https://8.8.8.8/a b",
        "https://8.8.8.8:99999/",
        "https:///nohost",
        "https://8.8.8.8/" + "a" * 2048,
        "javascript:alert(1)",
    ],
)
def test_a_malformed_url_is_refused_naming_the_field_only(url: str) -> None:
    refused_at_create(Guard(resolver=resolver({})), url)


def test_the_retry_schedule_is_standard_webhooks_for_24_hours() -> None:
    first = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    schedule = Config.from_env({}).webhook_retry_schedule
    now, attempts, gaps = first, 0, []
    while True:
        attempts += 1  # the attempt made `now` failed
        due = next_attempt(schedule, 86_400, first, attempts, now)
        if due is None:
            break
        gaps.append((due - now).total_seconds())
        now = due
    # 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, then what is left of the 24 h, then it has failed.
    assert gaps[:6] == [5, 300, 1800, 7200, 18000, 36000]
    assert now == first + dt.timedelta(hours=24) and len(gaps) == 7
    # A shrunken schedule repeats its last gap.
    assert next_attempt((0, 0.5), 10, first, 5, first) == first + dt.timedelta(seconds=0.5)


def test_a_signature_verifies_with_standardwebhooks_and_a_changed_body_does_not() -> None:
    secret = new_secret()
    assert secret.startswith("whsec_")
    now = dt.datetime.now(dt.UTC)
    body = payload("job.succeeded", {"job_id": "job_0123456789abcdef"}, now)
    sent = headers(secret, "msg_0123456789abcdef", body, now)
    assert Webhook(secret).verify(body, sent)["data"] == {"job_id": "job_0123456789abcdef"}
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace("succeeded", "failed"), sent)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, sent)


def test_a_sealed_secret_opens_only_for_its_endpoint() -> None:
    sealer, secret = Sealer(b"k" * 32), new_secret()
    sealed = sealer.seal("acme", "wh_0123456789abcdef", secret)
    assert secret.encode() not in sealed
    assert sealer.open("acme", "wh_0123456789abcdef", sealed) == secret
    with pytest.raises(errors.Unavailable):
        sealer.open("globex", "wh_0123456789abcdef", sealed)


def attempt(answer: httpx.Response) -> tuple[object, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer

    async def main() -> object:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as client:
            target = Target("https", "hooks.example", 443, "/in", ipaddress.ip_address("8.8.8.8"))
            now = dt.datetime.now(dt.UTC)
            return await send(client, target, new_secret(), "msg_1", '{"a":1}', now)

    return asyncio.run(main()), seen


def test_an_attempt_posts_to_the_checked_address_and_reads_its_status_only() -> None:
    outcome, seen = attempt(httpx.Response(204))
    assert (outcome.status_code, outcome.error) == (204, "")  # type: ignore[attr-defined]
    (request,) = seen
    assert str(request.url) == "https://8.8.8.8/in"
    assert request.headers["host"] == "hooks.example"
    assert request.extensions["sni_hostname"] == "hooks.example"
    assert {"webhook-id", "webhook-timestamp", "webhook-signature"} <= set(request.headers)
    assert request.content == b'{"a":1}'


def test_an_answer_other_than_2xx_fails_the_attempt_and_a_redirect_is_not_followed() -> None:
    outcome, _ = attempt(httpx.Response(500, text="stack trace of the receiver"))
    assert (outcome.status_code, outcome.error) == (500, "http_status")  # type: ignore[attr-defined]
    moved = httpx.Response(302, headers={"location": "http://127.0.0.1/"})
    outcome, seen = attempt(moved)
    assert (outcome.status_code, outcome.error, len(seen)) == (302, "http_status", 1)  # type: ignore[attr-defined]


def test_a_threshold_is_crossed_once_by_the_charge_that_reaches_it() -> None:
    assert crossed(0, 40, 100, [50, 80, 100]) == []
    assert crossed(40, 85, 100, [50, 80, 100]) == [50, 80]
    assert crossed(85, 100, 100, [100, 80, 50]) == [100]
    assert crossed(100, 130, 100, [50, 80, 100]) == []
    assert crossed(0, 10, 0, [50]) == []  # no cap, no threshold


def test_the_settings_are_read_and_a_bad_network_is_refused_at_start() -> None:
    config = Config.from_env(
        {
            "TRAINYARD_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32, ::1/128",
            "TRAINYARD_WEBHOOK_RETRY_SCHEDULE": "0,0.5,1",
            "TRAINYARD_WEBHOOK_RETRY_WINDOW_SECONDS": "5",
        }
    )
    assert config.webhook_allowed_networks == ("127.0.0.1/32", "::1/128")
    assert (config.webhook_retry_schedule, config.webhook_retry_window_seconds) == ((0, 0.5, 1), 5)
    assert Config.from_env({}).webhook_allowed_networks == ()
    for env in (
        {"TRAINYARD_WEBHOOK_ALLOWED_NETWORKS": "localhost"},
        {"TRAINYARD_WEBHOOK_RETRY_SCHEDULE": "0,-5"},
        {"TRAINYARD_WEBHOOK_TIMEOUT_SECONDS": "120"},
    ):
        with pytest.raises(ConfigError):
            Config.from_env(env)


def test_a_payload_is_the_specifications_shape() -> None:
    now = dt.datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=dt.UTC)
    assert json.loads(payload("job.failed", {"job_id": "j"}, now)) == {
        "type": "job.failed",
        "timestamp": "2026-03-04T05:06:07.890Z",
        "data": {"job_id": "j"},
    }
