"""What a decision job leaves: a capability (the changed tensors as W − W₀, with a README
saying how to apply it) or the whole model, each with a probe of answers to check."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save
from torch import nn

from executor.models.decider import TEMPERATURE, Decider, answers, config_json, question_json
from trainyard.training.catalog import DECIDER_BASE
from trainyard.training.decisions import Decision, Question


def served_from_delta(
    trained: Mapping[str, torch.Tensor], base: Mapping[str, torch.Tensor], names: Sequence[str]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(delta, served): the float32 delta W − W₀ of each named tensor, and the weights a
    loader rebuilds from it (W₀ + delta, which may differ from W in the last bit). The
    trainer grades and probes these, so what loads is exactly what was graded."""
    delta = {k: (trained[k].float() - base[k].float()).contiguous() for k in sorted(names)}
    served = {k: v.clone() for k, v in base.items()}
    for k, d in delta.items():
        served[k] = (base[k].float() + d).contiguous()
    return delta, served


def write_probe(out: Path, model: nn.Module, rows: Sequence[Decision], question: Question) -> None:
    probe_rows = list(rows)
    got = answers(model, probe_rows)
    doc = {
        "question": question.key,
        "temperature": TEMPERATURE,
        "states": [r.state for r in probe_rows],
        "answers": got,
    }
    (out / "probe.json").write_text(json.dumps(doc, indent=2))


def write_capability(
    out: Path,
    served: Mapping[str, torch.Tensor],
    delta: Mapping[str, torch.Tensor],
    question: Question,
    meta: Mapping[str, Any],
    probe_rows: Sequence[Decision],
) -> None:
    """`capability.json`, `delta.safetensors` (the changed tensors as W − W₀), the probe,
    and a README saying how to apply it outside Trainyard."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "delta.safetensors").write_bytes(save(dict(sorted(delta.items()))))
    mode = str((meta.get("adaptation") or {}).get("mode", "full"))
    capability = {
        **meta,
        "form": "delta",
        "serves": "head" if mode == "readout" else "full",
        "tensors": sorted(delta),
        "question": question_json(question),
        "temperature": TEMPERATURE,
        "config": config_json(),
    }
    (out / "capability.json").write_text(json.dumps(capability, indent=2, sort_keys=True))
    (out / "README.md").write_text(readme(capability))
    model = Decider()
    model.load_state_dict(dict(served))
    write_probe(out, model, probe_rows, question)


# How to use a capability, in the bundle: the base by name and sha256, and W = W₀ + Δ.
README = """# A capability of {base_model}

A delta to its base's weights that answers `{key}` ({type}: {labels}) at temperature
{temperature}. `capability.json` describes it in full; `probe.json` holds answers to check.

Base: `{base_model}` (revision {revision}), base_sha256 `{base_sha256}`.
Get it (the sha256 of its `model.safetensors` is that base_sha256):

    trainyard models export {base_model} -o base

Apply the delta (W = W₀ + Δ for each tensor in `delta.safetensors`) and answer the probe's
states, with this directory as `capability` (the model's code is Trainyard's `executor.decider`):

```python
import json
from safetensors.torch import load_file
from executor.decider import Answerer, Decider, question_of

weights = load_file("base/model.safetensors")
for name, delta in load_file("capability/delta.safetensors").items():
    weights[name] = weights[name] + delta  # W = W₀ + Δ
model = Decider()
model.load_state_dict(weights)
doc = json.load(open("capability/capability.json"))
answerer = Answerer(model, question_of(doc["question"]), doc["temperature"])
print(answerer.answer(json.load(open("capability/probe.json"))["states"]))  # probe.json's answers
```
"""


def readme(capability: Mapping[str, Any]) -> str:
    """The bundle's README.md: a capability is of no use to someone who cannot tell which
    base it applies to, or how."""
    question = capability["question"]
    return README.format(
        base_model=capability.get("base_model", DECIDER_BASE),
        revision=capability.get("revision", ""),
        base_sha256=capability["base_sha256"],
        key=question["key"],
        type=question["type"],
        labels=", ".join(question["labels"]),
        temperature=capability["temperature"],
    )


def write_checkpoint(
    out: Path,
    served: Mapping[str, torch.Tensor],
    question: Question,
    meta: Mapping[str, Any],
    probe_rows: Sequence[Decision],
) -> None:
    """The whole model: `model.safetensors`, `decider.json` (config and meta), the probe."""
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in sorted(served.items())}
    (out / "model.safetensors").write_bytes(save(state))
    doc = {
        **meta,
        "config": config_json(),
        "question": question_json(question),
        "temperature": TEMPERATURE,
    }
    (out / "decider.json").write_text(json.dumps(doc, indent=2, sort_keys=True))
    model = Decider()
    model.load_state_dict(state)
    write_probe(out, model, probe_rows, question)
