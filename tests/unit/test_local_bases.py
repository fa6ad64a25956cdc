"""Hugging Face causal LMs on local disk: found, described, and trainable by name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from services.core import errors
from services.core.validation import parse_json_job
from services.jobs import spec
from tests.support import make_local_model
from trainyard.training import pins
from trainyard.training.catalog import Catalog
from trainyard.training.model_files import RESCAN_SECONDS


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


def test_a_folder_whose_weights_are_cut_short_is_no_base(tmp_path: Path) -> None:
    """A model still being copied in: its config and tokenizer there, its weights shorter
    than a safetensors header or with half of one. Neither is listed, neither fails."""
    for name, weights in (("short", b"\x08\x00"), ("half", b"\x40" + b"\x00" * 7 + b'{"w"')):
        folder = tmp_path / name
        make_local_model(folder)
        (folder / "model.safetensors").write_bytes(weights)
    assert Catalog.discover(tmp_path).names == ["fixture-tiny-decider", "fixture-tiny-llm"]


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
    # The job pins the base's files as they are at create: their sha256.
    assert expanded.output.kind == "lora" and expanded.revision == pins.revision(
        models / "tiny-llama"
    )


def test_a_model_copied_in_is_found_without_a_new_catalog(models: Path, tmp_path: Path) -> None:
    root = tmp_path / "models"
    root.mkdir()
    catalog = Catalog.discover(root)
    assert catalog.get("tiny-llama") is None
    # Half copied: its weights are not there yet, so it is not a base.
    (root / "tiny-llama").mkdir()
    shutil.copy(models / "tiny-llama" / "config.json", root / "tiny-llama")
    assert catalog.get("tiny-llama") is None
    for part in (models / "tiny-llama").iterdir():
        shutil.copy(part, root / "tiny-llama")
    assert catalog.get("tiny-llama") is not None
    assert "tiny-llama" in [m.name for m in catalog.to_proto()]


def test_a_known_name_is_checked_again_once_the_interval_passed(
    models: Path, tmp_path: Path
) -> None:
    now = [0.0]
    root = tmp_path / "models"
    shutil.copytree(models / "tiny-llama", root / "tiny-llama")
    catalog = Catalog(models_dir=root, clock=lambda: now[0])
    assert catalog.get("tiny-llama") is not None
    shutil.rmtree(root / "tiny-llama")
    assert catalog.get("tiny-llama") is not None
    now[0] += RESCAN_SECONDS
    assert catalog.get("tiny-llama") is None
    shutil.copytree(models / "tiny-llama", root / "tiny-llama")
    assert "tiny-llama" in catalog.names


def test_an_unknown_base_says_where_bases_come_from_without_a_path(models: Path) -> None:
    job = parse_json_job({"base_model": "absent", "dataset": {"uri": "fixture:synthetic-tiny-v1"}})
    with pytest.raises(errors.DomainError) as refused:
        spec.validate(job, Catalog.discover(models))
    message = refused.value.message
    assert "TRAINYARD_MODELS_DIR" in message and "/v1/train/models" in message
    assert str(models) not in message and "/" + models.name not in message
