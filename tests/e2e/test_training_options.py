"""Training options over REST on a stack started the README's way: a job asking for
several is frozen with them, trains to success with the local executor, and counts the
examples its `max_seq_length` cut; a bad option is refused naming its field."""

from __future__ import annotations

from tests.support import StackProcess, reason, wait_for_job

OPTIONS = {
    "max_steps": 6,
    "save_steps": 6,
    "max_seq_length": 48,
    "zero_stage": 2,
    "gradient_checkpointing": True,
    "packing": True,
    "lr_scheduler_type": "cosine",
    "warmup_steps": 2,
}
JOB = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
    "hyperparameters": OPTIONS,
}


def test_a_job_with_options_is_frozen_with_them_and_trains_to_success(
    each_stack: StackProcess,
) -> None:
    with each_stack.member_client() as api:
        created = api.post("/v1/train/jobs", json=JOB)
        assert created.status_code == 200, created.text
        frozen = created.json()["hyperparameters"]
        assert {k: frozen[k] for k in OPTIONS} == OPTIONS
        # What the job left out is the base's, frozen beside what it asked.
        assert (frozen["mixed_precision"], frozen["zero_offload"]) == ("fp32", "none")
        job = wait_for_job(
            api, created.json()["id"], lambda j: j["status"] in ("succeeded", "failed")
        )
        assert job["status"] == "succeeded", job.get("failure_code")
        assert {k: job["hyperparameters"][k] for k in OPTIONS} == OPTIONS
        series = {
            s["name"]: {p["step"]: p["value"] for p in s["points"]}
            for s in api.get(f"/v1/train/jobs/{job['id']}/metrics").json()["series"]
        }
        assert sorted(series["loss"]) == list(range(1, 7))
        assert series["truncated_examples"][1] > 0  # 48 tokens cut some of the fixture's chats
        assert series["learning_rate"][6] == 0.0  # the cosine ends at 0


def test_a_bad_option_is_refused_naming_its_field_and_creates_nothing(
    each_stack: StackProcess,
) -> None:
    with each_stack.member_client() as api:
        for hyperparameters, field in (
            ({"zero_stage": 7}, "hyperparameters.zero_stage"),
            ({"zero_offload": "cpu", "zero_stage": 0}, "hyperparameters.zero_offload"),
            ({"lr_scheduler_type": "Zq9-polynomial"}, "hyperparameters.lr_scheduler_type"),
        ):
            bad = api.post("/v1/train/jobs", json={**JOB, "hyperparameters": hyperparameters})
            assert bad.status_code == 400 and reason(bad) == "invalid_request"
            assert bad.json()["fields"] == [field] and "Zq9" not in bad.text
        fp16_on_cpu = {
            **JOB,
            "hyperparameters": {"mixed_precision": "fp16"},
            "resources": {"budget": 100, "devices": ["cpu"]},
        }
        bad = api.post("/v1/train/jobs", json=fp16_on_cpu)
        assert bad.status_code == 400 and bad.json()["fields"] == [
            "hyperparameters.mixed_precision"
        ]
        assert "fp16" not in bad.json()["supported"]
        assert api.get("/v1/train/jobs").json()["total_size"] == 0  # the org's own: none made
