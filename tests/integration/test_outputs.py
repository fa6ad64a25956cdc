"""Outputs used where people use them, outside Trainyard: a LoRA adapter the trainer wrote
applies with peft to the base `trainyard models export` writes, and a capability's README
snippet, run as written against that base, rebuilds the model the job served."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from tests.integration.test_trainer import events_of, result, start, task_dir
from trainyard.cli import main


def export_base(name: str, out: Path) -> str:
    """`trainyard models export NAME -o OUT`, as a user runs it; its printed base_sha256."""
    done = CliRunner().invoke(main, ["models", "export", name, "-o", str(out)])
    assert done.exit_code == 0, done.output
    return str(json.loads(done.stdout)["base_sha256"])


def run_readme(bundle: Path, base: Path, where: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the Python in a bundle's README.md as a user would: in a directory holding the
    exported base as `base` and the bundle as `capability`. What it prints."""
    (code,) = re.findall(r"```python\n(.*?)```", (bundle / "README.md").read_text(), re.S)
    where.mkdir()
    shutil.copytree(base, where / "base")
    shutil.copytree(bundle, where / "capability")
    monkeypatch.chdir(where)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(bundle / "README.md"), "exec"), {})
    return printed.getvalue()


def trained(tmp_path: Path, spec: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    work = task_dir(tmp_path, "run", spec)
    return work / "output", result(events_of(start(work)))


def test_a_lora_output_applies_with_peft_to_the_exported_base(tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    spec = {
        "adaptation": {"mode": "lora", "rank": 4},
        "hyperparameters": {"max_steps": 3, "learning_rate": 0.01},
        "output": {"kind": "lora"},
    }
    adapter, done = trained(tmp_path, spec)
    digest = export_base("fixture-tiny-llm", tmp_path / "base")
    assert digest == done["base_sha256"]
    base = tmp_path / "base"
    assert hashlib.sha256((base / "model.safetensors").read_bytes()).hexdigest() == digest
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(base)), str(adapter))
    probe = load_file(str(adapter / "probe.safetensors"))
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=probe["input_ids"]).logits
    assert torch.allclose(logits, probe["logits"], atol=1e-5)
    # The adapter changed the model: the probe is not the base's answer.
    with torch.no_grad(), model.disable_adapter():
        assert not torch.allclose(model(input_ids=probe["input_ids"]).logits, logits, atol=1e-3)


@pytest.mark.parametrize(("mode", "form"), [("full", "delta"), ("lora", "lora")])
def test_a_capability_s_readme_rebuilds_the_served_model_on_the_exported_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, form: str
) -> None:
    spec = {
        "adaptation": {"mode": mode, **({"rank": 4} if mode == "lora" else {})},
        "hyperparameters": {"max_steps": 2, "learning_rate": 0.01},
        "output": {"kind": "capability"},
    }
    bundle, done = trained(tmp_path, spec)
    manifest = json.loads((bundle / "capability.json").read_text())
    assert manifest["form"] == form and manifest["base_sha256"] == done["base_sha256"]
    readme = (bundle / "README.md").read_text()
    assert "fixture-tiny-llm" in readme and done["base_sha256"] in readme
    assert "trainyard models export fixture-tiny-llm -o base" in readme
    base = tmp_path / "base"
    assert export_base("fixture-tiny-llm", base) == done["base_sha256"]
    assert run_readme(bundle, base, tmp_path / "user", monkeypatch) == "True\n"
