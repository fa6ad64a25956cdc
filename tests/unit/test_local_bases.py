"""Hugging Face causal LMs on local disk: found, described, and trainable by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.validation import parse_json_job
from services.jobs import spec
from tests.support import make_local_model
from trainyard.training.catalog import Catalog


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    make_local_model(root / "tiny-llama")
    (root / "not-a-model").mkdir()
    (root / "not-a-model" / "config.json").write_text("{}")
    return root


def test_the_catalog_lists_what_is_on_disk(models: Path) -> None:
    catalog = Catalog.discover(models)
    assert catalog.names == ["fixture-tiny-decider", "fixture-tiny-llm", "tiny-llama"]
    base = catalog.get("tiny-llama")
    assert base is not None and base.parameters > 0
    assert {"q_proj", "v_proj", "down_proj"} <= set(base.targets)
    answer = base.to_proto()
    assert (
        answer.profile.adaptation.mode == "lora"
        and "path" not in str(answer)
        and str(models) not in str(answer)
    )


def test_no_models_dir_lists_only_the_built_in_bases(tmp_path: Path) -> None:
    assert Catalog.discover(tmp_path / "absent").names == [
        "fixture-tiny-decider",
        "fixture-tiny-llm",
    ]


def test_a_job_on_a_local_base_validates_and_expands_from_its_profile(models: Path) -> None:
    catalog = Catalog.discover(models)
    job = parse_json_job(
        {"base_model": "tiny-llama", "dataset": {"uri": "fixture:synthetic-tiny-v1"}}
    )
    expanded = spec.expand(job, spec.validate(job, catalog))
    assert expanded.adaptation.mode == "lora" and list(expanded.adaptation.targets) == [
        "q_proj",
        "v_proj",
    ]
    assert expanded.output.kind == "lora" and expanded.revision == "local"
