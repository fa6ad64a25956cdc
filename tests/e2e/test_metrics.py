"""Metrics and `trainyard status` as an operator meets them on a stack started the README's
way: every URL `stack.json` lists answers Prometheus text that parses; a job created and
trained over REST shows in the RPC counters, the jobs-by-state gauge, the claims, events,
device-seconds, bytes stored and the executor's report lag; a restarted part comes back
on the same URL; and `trainyard status` names every process and the executors."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.support import BIN, StackProcess, alive, bearer, eventually, wait_for_job

JOB = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
    "hyperparameters": {"max_steps": 3},
}
# On a machine no executor serves: the job waits in `preparing`.
PARKED = {**JOB, "resources": {"machines": ["nowhere"]}}
JOBS = "trainyard.job.v1.JobService"
# The sample names each kind of family serves, besides its own.
SUFFIXES = {
    "counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": (),
    "summary": ("_count", "_sum"), "untyped": (), "unknown": (), "info": ("_info",),
}  # fmt: skip


def scrape(url: str) -> list[Sample]:
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200, (url, response.status_code)
    families = list(text_string_to_metric_families(response.text))
    assert families, url
    return [sample for family in families for sample in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    return sum(
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def metric(stack: StackProcess, part: str, name: str, **labels: str) -> float:
    return value(scrape(stack.info()["metrics"][part]), name, **labels)


def test_every_process_serves_metrics_on_loopback_that_parse(stack: StackProcess) -> None:
    info = stack.info()
    assert set(info["metrics"]) == set(info["pids"])  # one URL per process
    for name, url in info["metrics"].items():
        assert url.startswith("http://127.0.0.1:"), (name, url)
        assert scrape(url), name
    envoy = scrape(info["metrics"]["envoy"])
    assert info["metrics"]["envoy"].endswith(f":{info['admin_port']}/stats/prometheus")
    assert value(envoy, "envoy_server_live") == 1
    # Ours are named as Prometheus asks, under one prefix: a counter's samples end `_total`.
    text = httpx.get(info["metrics"]["jobs"], timeout=10).text
    ours = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert ours["trainyard_rpc_handled"] == "counter"
    assert ours["trainyard_rpc_duration_seconds"] == "histogram"
    assert ours["trainyard_jobs"] == "gauge"


def test_a_job_created_over_rest_is_counted_by_method_code_and_state(
    stack: StackProcess, api: httpx.Client
) -> None:
    url = stack.info()["metrics"]["jobs"]
    created = {"service": JOBS, "method": "CreateJob", "code": "OK"}
    before = scrape(url)
    r = api.post("/v1/train/jobs", json=PARKED)
    assert r.status_code == 200, r.text
    refused = api.post("/v1/train/jobs", json={**PARKED, "colour": "blue"})
    assert refused.status_code == 400
    job = wait_for_job(api, r.json()["id"], lambda j: j["status"] == "preparing")
    after = scrape(url)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("trainyard_rpc_handled_total", **created) == 1
    assert grew("trainyard_rpc_duration_seconds_count", service=JOBS, method="CreateJob") == 2
    refusal = {"code": "INVALID_ARGUMENT", "reason": "INVALID_REQUEST"}
    assert grew("trainyard_rpc_handled_total", method="CreateJob", **refusal) == 1
    assert grew("trainyard_jobs") == 1  # the refused one was never a job
    assert value(after, "trainyard_jobs", state=job["status"]) >= 1


def test_a_trained_job_shows_in_claims_events_money_and_report_lag(
    stack: StackProcess, api: httpx.Client
) -> None:
    eventually(
        lambda: metric(stack, "claims", "trainyard_executors_connected"),
        lambda n: n == 1,
        "executors connected",
    )
    parts = ("claims", "meter", "artifacts", "executor")
    before = {part: scrape(stack.info()["metrics"][part]) for part in parts}
    r = api.post("/v1/train/jobs", json=JOB)
    assert r.status_code == 200, r.text
    done = wait_for_job(api, r.json()["id"], lambda j: j["status"] in ("succeeded", "failed"))
    assert done["status"] == "succeeded", done
    after = {part: scrape(stack.info()["metrics"][part]) for part in parts}

    def grew(part: str, name: str, **labels: str) -> float:
        return value(after[part], name, **labels) - value(before[part], name, **labels)

    # At least: jobs other tests left to the platform may run in between.
    assert grew("claims", "trainyard_claims_total", platform="true") >= 1
    assert grew("claims", "trainyard_events_ingested_total", type="metric") >= 3
    assert grew("claims", "trainyard_events_ingested_total", type="result") >= 1
    # Every step's throughput; no MFU on the CPU, which has no dense peak in the table.
    steps = done["progress"]["step"]
    assert grew("claims", "trainyard_training_tokens_per_second_count") >= steps
    assert grew("claims", "trainyard_training_tokens_per_second_sum") > 0
    assert grew("claims", "trainyard_training_mfu_count") == 0
    assert value(after["claims"], "trainyard_rpc_streams_open", method="Connect") >= 1
    assert grew("meter", "trainyard_charged_device_seconds_total", charged="true") > 0
    assert grew("artifacts", "trainyard_stored_bytes", status="stored") > 0  # its model
    # The events the run made were acknowledged as committed, each with its lag.
    assert grew("executor", "trainyard_report_lag_seconds_count") >= 3
    assert grew("executor", "trainyard_report_lag_seconds_sum") > 0
    assert grew("executor", "trainyard_executor_reports_sent_total") >= 1


def test_a_restarted_process_serves_its_metrics_on_the_same_url(stack: StackProcess) -> None:
    before = stack.info()
    old = int(before["pids"]["meter"])
    os.killpg(old, signal.SIGKILL)
    after = eventually(
        lambda: float(stack.info()["pids"]["meter"]), lambda pid: pid != old, "meter restarted"
    )
    assert not alive(old) and alive(int(after))
    info = stack.info()
    assert info["metrics"]["meter"] == before["metrics"]["meter"]
    assert info["restarts"]["meter"] == before["restarts"]["meter"] + 1
    assert value(scrape(info["metrics"]["meter"]), "trainyard_held_device_seconds") >= 0
    table = stack.cli("status").stdout
    (row,) = [line for line in table.splitlines() if line.split()[:1] == ["meter"]]
    assert row.split()[1:3] == [str(int(after)), "yes"]
    assert row.split()[4] == str(info["restarts"]["meter"])


def test_status_names_every_process_and_the_executors_connected(stack: StackProcess) -> None:
    eventually(
        lambda: metric(stack, "claims", "trainyard_executors_connected"),
        lambda n: n == 1,
        "executors connected",
    )
    shown = stack.cli("status").stdout
    rows = {line.split()[0]: line.split() for line in shown.splitlines() if line.split()}
    for name, pid in stack.info()["pids"].items():
        assert rows[name][1:3] == [str(pid), "yes"], shown
    assert rows["jobs"][3] == "serving" and rows["envoy"][3] == "ready"
    assert "executors connected 1" in shown


def test_status_says_plainly_when_no_stack_runs(tmp_path: Path) -> None:
    import subprocess

    home = tmp_path / "home"
    done = subprocess.run(
        [str(BIN / "trainyard"), "status"],
        env={**os.environ, "TRAINYARD_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout.strip() == f"no stack is running under {home}; `make up` starts one"


def test_every_series_the_alerts_and_the_dashboard_read_is_served(stack: StackProcess) -> None:
    """`infra/prometheus/alerts.yml` and `infra/grafana/trainyard.json` name only series
    this stack's processes serve, and `run/prometheus.json` lists where each is scraped."""
    info = stack.info()
    # A call through the gateway, so Envoy's per-class answer counters exist.
    key = stack.create_key("acme", "member")
    assert httpx.get(f"{stack.url}/v1/train/models", headers=bearer(key)).status_code == 200
    served: set[str] = set()
    for url in info["metrics"].values():
        for family in text_string_to_metric_families(httpx.get(url, timeout=10).text):
            # A labelled series no call has made yet is a family without samples.
            served |= {family.name, *(f"{family.name}{end}" for end in SUFFIXES[family.type])}
            served |= {s.name for s in family.samples}
    root = Path(__file__).resolve().parents[2]
    rules = yaml.safe_load((root / "infra/prometheus/alerts.yml").read_text())
    dashboard = json.loads((root / "infra/grafana/trainyard.json").read_text())
    expressions = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    expressions += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    # The series' names, not their labels' (`{…}` matchers and `by (…)` lists dropped).
    bare = [re.sub(r"\{[^}]*\}|\b(?:by|ignoring|on)\s*\([^)]*\)", "", e) for e in expressions]
    named = {n for e in bare for n in re.findall(r"\b(?:trainyard|SeaweedFS|envoy)_\w+", e)}
    assert len(named) >= 14
    assert named <= served, sorted(named - served)
    targets = json.loads((stack.home / "run" / "prometheus.json").read_text())
    scraped = {
        t["labels"]["process"]: f"http://{t['targets'][0]}{t['labels']['__metrics_path__']}"
        for t in targets
    }
    assert scraped == info["metrics"]
