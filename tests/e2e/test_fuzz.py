"""The REST surface fuzzed from its own OpenAPI document (schemathesis, a fixed seed), and
ten thousand bad requests: no answer is a server error, every answer keeps the contract's
statuses, schemas and content types, every refusal is a problem document, and none
echoes what was sent."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from gateway import rules
from tests.support import StackProcess, bearer

OPENAPI = Path(__file__).resolve().parents[2] / "gateway" / "openapi.json"


# The committed document; the gateway serves the same file (checked below).
schema = schemathesis.openapi.from_path(OPENAPI)
DOCUMENT = json.loads(OPENAPI.read_text())


def test_the_gateway_serves_the_contract(stack: StackProcess) -> None:
    served = httpx.get(f"{stack.url}/v1/train/openapi.json", timeout=30)
    assert served.status_code == 200 and served.json() == json.loads(OPENAPI.read_text())


@schema.parametrize()
@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_keeps_its_contract(
    case: schemathesis.Case, stack: StackProcess, member_key: str
) -> None:
    headers = {"Authorization": f"Bearer {member_key}"}  # over the generated one
    response = case.call(base_url=stack.url, headers=headers, timeout=60)
    # 501 is the contract of an operation declared for a later issue, and says so.
    documented = DOCUMENT["paths"][case.path].get(case.method.lower(), {}).get("responses", {})
    unserved = response.status_code == 501 and "501" in documented
    assert response.status_code < 500 or unserved, response.text
    case.validate_response(
        response,
        checks=[
            checks.status_code_conformance,
            checks.content_type_conformance,
            checks.response_schema_conformance,
        ],
    )


# -- ten thousand bad requests ----------------------------------------------------------


def bad_requests(key: str, count: int, seed: int = 20261130) -> Iterator[tuple[dict, str]]:
    """Requests each carrying a fault and a marker string of its own in what it sends
    (a value, a path segment, a key); the marker must not come back."""
    rng = random.Random(seed)
    routes = [(r.verb, r.template, r.query_params()) for r in rules.rules()]

    def path_of(template: str, marker: str | None = None) -> str:
        segment = marker or f"x{rng.randrange(10**6)}"
        return "/".join(segment if part.startswith("{") else part for part in template.split("/"))

    for index in range(count):
        marker = f"Mk{index:05d}q{rng.randrange(10**6):06d}"
        verb, template, params = rng.choice(routes)
        fault = index % 6
        headers = {"content-type": "application/json", **bearer(key)}
        request: dict = {"method": verb, "url": path_of(template), "headers": headers}
        if fault in (0, 1) and verb in ("GET", "DELETE"):
            request["method"] = "POST"  # a body where none is read: 405, or a POST's body
        if fault == 0:  # a body that is not JSON
            request["content"] = rng.choice(["{", '{"a": ', "[", "nul"]) + marker
        elif fault == 1:  # a JSON body of another shape, the marker as a value
            request["content"] = json.dumps(
                {
                    rng.choice(["base_model", "dataset", "task", "kind", "size"]): [
                        marker,
                        {"v": marker},
                    ]
                }
            )
        elif fault == 2:  # a query value of the wrong type, or a parameter nobody knows
            typed = [name for name, kind in params.items() if kind in ("int", "uint", "bool")]
            name = rng.choice(typed) if typed and rng.random() < 0.7 else "page_sizes"
            request["params"] = {name: marker}
        elif fault == 3:  # a key that is not one
            request["headers"] = {**headers, "authorization": f"Bearer ty_{marker}"}
        elif fault == 4:  # an id that does not exist, in the path
            has_id = "{" in template
            request["url"] = path_of(template, marker) if has_id else f"{template}/{marker}"
        else:  # a path or a method the contract does not have
            request["url"] = rng.choice([f"/v1/train/{marker}", path_of(template) + "/" + marker])
            request["method"] = rng.choice(["PUT", "PATCH", "GET", "POST"])
        if request["method"] in ("GET", "DELETE"):
            request.pop("content", None)
        yield request, marker


def unserved(request: dict) -> bool:  # type: ignore[type-arg]
    """Whether the route asked answers 501 by contract (declared for a later issue)."""
    for rule in rules.rules():
        if rule.regex.fullmatch(request["url"]):
            operation = DOCUMENT["paths"].get(rule.template, {}).get(rule.verb.lower(), {})
            if "501" in operation.get("responses", {}):
                return True
    return False


def test_ten_thousand_bad_requests_are_refused_plainly(
    stack: StackProcess, member_key: str
) -> None:
    failures: list[str] = []
    with httpx.Client(base_url=stack.url, timeout=30) as client:
        for request, marker in bad_requests(member_key, 10_000):
            answer = client.request(**request)
            where = f"{request['method']} {request['url']}"
            if answer.status_code == 501 and unserved(request):
                pass  # declared for a later issue, and refused plainly (checked below)
            elif answer.status_code >= 500:
                failures.append(f"{where}: {answer.status_code}")
            elif answer.status_code < 400:
                failures.append(f"{where}: accepted {answer.status_code}")
            if marker in answer.text or marker in json.dumps(dict(answer.headers)):
                failures.append(f"{where}: echoed what was sent")
            elif answer.headers.get("content-type") != "application/problem+json":
                failures.append(f"{where}: {answer.headers.get('content-type')}")
            if len(failures) >= 20:
                break
    assert failures == []
