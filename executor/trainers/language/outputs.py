"""What a language job leaves: the artifact its `output.kind` names (a whole checkpoint, a
LoRA adapter, or a capability apart from its base, with a README saying how to apply
it), each with a probe: token ids and the served model's logits on them, so anyone can
check that what loads is what trained."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from executor.models import fixture
from executor.models.bases import Loaded
from executor.wire.plan import Plan
from trainyard.training.catalog import FIXTURE_BASE


@dataclasses.dataclass(frozen=True)
class Trained:
    """What the run made: the module trained, the weights it serves (the whole model's or
    the adapter's) and the base's initial weights (a full run's), with where they came from."""

    module: Any
    served: dict[str, Any]
    initial: dict[str, Any]
    base_sha256: str
    served_step: int
    evals: Sequence[tuple[int, float]]
    best_step: int | None


def write(plan: Plan, loaded: Loaded, trained: Trained) -> None:
    """The artifact `output.kind` names, and its probe."""
    out, job = plan.output_dir, plan.job
    mode, kind = job.adaptation.mode, job.output_kind
    module, served = trained.module, trained.served
    out.mkdir(parents=True, exist_ok=True)
    if mode == "lora":
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(module, served)
        merged = module.merge_and_unload() if kind == "checkpoint" else None
        model = merged if merged is not None else module
    else:
        module.load_state_dict(served)
        model = module
    meta = {
        "base_model": job.base_model,
        "revision": job.revision,
        "base_sha256": trained.base_sha256,
        "adaptation": dict(job.adaptation.doc),
        "step": trained.served_step,
        "job_id": job.id,
    }
    if kind == "checkpoint":
        loaded.save(out, model, meta)
    elif kind == "lora":
        module.save_pretrained(str(out), safe_serialization=True)
    else:
        write_capability(out, plan, trained, meta)
    write_probe(out, model, loaded.codec)


def write_capability(out: Path, plan: Plan, trained: Trained, meta: dict[str, Any]) -> None:
    """What the job taught, apart from its base: the adapter's weights or each weight's
    change, `capability.json`, and a README."""
    from safetensors.torch import save

    served, initial = trained.served, trained.initial
    if plan.job.adaptation.mode == "lora":
        weights = {k: v.contiguous() for k, v in sorted(served.items())}
        (out / "lora.safetensors").write_bytes(save(weights))
        form = "lora"
    else:
        delta = {k: (served[k] - initial[k]).contiguous() for k in sorted(served)}
        (out / "delta.safetensors").write_bytes(save(delta))
        form = "delta"
    evals = [[step, loss] for step, loss in trained.evals]
    capability = {
        **meta,
        "form": form,
        "protect": dict(plan.job.protect.doc),
        "evaluation": {"evals": evals, "best_step": trained.best_step},
    }
    (out / "capability.json").write_text(json.dumps(capability, indent=2, sort_keys=True))
    (out / "README.md").write_text(capability_readme(capability))


def write_probe(out: Path, model: Any, codec: fixture.Codec) -> None:
    import torch
    from safetensors.torch import save

    chat = [("user", "Reverse: probe")]
    encoded = fixture.encode(chat, loss_mask="full_sequence", max_seq_length=64, codec=codec)
    probe = torch.tensor([encoded.input_ids])
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=probe.to(next(model.parameters()).device)).logits.float().cpu()
    (out / "probe.safetensors").write_bytes(
        save({"input_ids": probe, "logits": logits.contiguous()})
    )


README = """# A capability of {base_model}

What job {job_id} taught its base, kept apart from it: {what}.
`capability.json` describes it in full; `probe.safetensors` holds input ids and the logits
the trained model gave on them, to check against.

Base: `{base_model}` (revision {revision}), base_sha256 `{base_sha256}`.
{get_base}

Apply it, with this directory as `capability`:

```python
{code}
probe = load_file("capability/probe.safetensors")
with torch.no_grad():
    logits = model(input_ids=probe["input_ids"]).logits
print(torch.allclose(logits, probe["logits"], atol=1e-5))  # True: the model the job served
```
"""
GET_BUILT_IN = """Get it (the sha256 of its `model.safetensors` is that base_sha256):

    trainyard models export {base_model} -o base"""
GET_LOCAL = """It is the Hugging Face model on the deployment's disk: use its directory as `base`
(base_sha256 is the sha256 of its weights saved as one safetensors file, names in order)."""
APPLY = {
    "delta": """import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("base", dtype=torch.float32)
weights = model.state_dict()
for name, delta in load_file("capability/delta.safetensors").items():
    weights[name] = weights[name] + delta  # W = W₀ + Δ
model.load_state_dict(weights)""",
    "lora": """import json
import torch
from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

ad = json.load(open("capability/capability.json"))["adaptation"]
lora = LoraConfig(r=ad["rank"], lora_alpha=ad["alpha"], target_modules=ad["targets"], task_type="CAUSAL_LM")
model = get_peft_model(AutoModelForCausalLM.from_pretrained("base", dtype=torch.float32), lora)
set_peft_model_state_dict(model, load_file("capability/lora.safetensors"))""",
}
WHAT = {
    "delta": "each weight's change, W − W₀, in `delta.safetensors`",
    "lora": "a LoRA adapter's weights (peft's names) in `lora.safetensors`",
}


def capability_readme(capability: dict[str, Any]) -> str:
    """How to load and apply a capability outside Trainyard: which base, by name and
    sha256, and a few lines of Python that rebuild the served model and check the probe."""
    name, form = capability["base_model"], capability["form"]
    return README.format(
        base_model=name,
        job_id=capability["job_id"],
        revision=capability["revision"],
        what=WHAT[form],
        base_sha256=capability["base_sha256"],
        get_base=(GET_BUILT_IN if name == FIXTURE_BASE else GET_LOCAL).format(base_model=name),
        code=APPLY[form],
    )
