"""The trainer for decision jobs on `fixture-tiny-decider` (HIP-1333 §3, §4, §8), run by
`executor.train` when a job names that base.

It reads the job's decision rows and their frozen split, trains the decider (the head
alone for `readout`, everything for `full`) with DeepSpeed on one process for exactly the
planned steps in a seeded order, adds the objective's terms, keeps the update off the
protected suites' directions by `protect.projection.strength`, distills the base's
answers on them when asked, evaluates the target suite's holdout at the checkpoint
cadence and serves the best, grades the base and the served model on every suite, and
judges the protected ones against `protect.budget`. Events as `executor.protocol` says.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from executor.protocol import emit, emit_end, evaluation_block
from executor.train import Plan
from trainyard.training import decisions
from trainyard.training.decisions import Decision

MOMENTUM = 0.9
# A metric series name; a suite key outside this alphabet is spelled inside it.
_SAFE = "abcdefghijklmnopqrstuvwxyz0123456789_.-"


def series_part(name: str) -> str:
    cleaned = "".join(c if c in _SAFE else "_" for c in name.lower())
    return cleaned[:40] or "_"


# -- data --------------------------------------------------------------------------------


def rows_of(plan: Plan) -> tuple[list[Decision], list[Decision], str]:
    """(train, holdout, sha256): the snapshot the job holds with its frozen split, or for
    the built-in fixture, rebuilt by the code that froze it (as the job's preparation
    does); either is checked against the job's sha256."""
    from trainyard.training import datasets

    job = plan.job
    if plan.snapshot_path is not None:
        data = plan.snapshot_path.read_bytes()
        items, sha256 = decisions.read_snapshot(data), hashlib.sha256(data).hexdigest()
    else:
        if job["dataset"]["uri"] != decisions.FIXTURE_DATASET:
            raise SystemExit("dataset_not_found")
        snapshot = datasets.build_snapshot(
            datasets.select(
                [decisions.to_row(d) for d in decisions.fixture_rows()],
                job["dataset"].get("tags", []),
            ),
            (job.get("objective") or {}).get("loss_mask", "assistant_only"),
            decisions.held_out_row,
        )
        items = [(decisions.from_row(row), split) for row, split in snapshot.items]
        sha256 = snapshot.sha256
    expected = (job.get("preparation") or {}).get("snapshot_sha256", "")
    if expected and sha256 != expected:
        raise SystemExit("dataset_changed")
    train = [row for row, split in items if split != "eval"]
    held = [row for row, split in items if split == "eval"]
    if not train:
        raise SystemExit("dataset_empty")
    return train, held, sha256


def step_batches(rows: Sequence[Decision], plan: Plan) -> list[list[int]]:
    """Every step's rows, in order: each epoch a seeded permutation of the rows' groups
    (a row without a group is its own), flattened and cut into effective batches, for
    exactly the planned steps. A group's rows travel together, so the pair terms meet
    their pairs; the same job always walks the same order, so a resume continues it."""
    ebs = int(plan.job["effective_batch_size"])
    seed = int(plan.hp.get("seed", 0))
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(row.group or f"\0{i}", []).append(i)
    units = list(groups.values())
    steps: list[list[int]] = []
    epoch = 0
    while len(steps) < plan.planned_steps:
        order = list(range(len(units)))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        flat = [i for u in order for i in units[u]]
        steps += [flat[i : i + ebs] for i in range(0, len(flat), ebs)]
        epoch += 1
    return steps[: plan.planned_steps]


def suite_holdout(name: str) -> list[Decision]:
    if name not in decisions.SUITES:
        raise SystemExit("suite_not_found")
    return decisions.split(decisions.SUITES[name].rows())[1]


def suite_train(name: str) -> list[Decision]:
    if name not in decisions.SUITES:
        raise SystemExit("suite_not_found")
    return decisions.split(decisions.SUITES[name].rows())[0]


def verdict(grades: Sequence[Mapping[str, Any]]) -> str:
    """`accepted` when every protected suite stayed within the budget (none: accepted)."""
    return (
        "accepted"
        if all(g["within_budget"] for g in grades if g["role"] == "protected")
        else "rejected"
    )


def within_budget(base: Any, trained: Any, budget: Mapping[str, Any]) -> bool:
    """Accuracy down at most `accuracy`, calibration error up at most `ece`; an absent
    bound does not bind."""
    ok = True
    if budget.get("accuracy") is not None:
        ok = ok and trained.accuracy >= base.accuracy - float(budget["accuracy"]) - 1e-12
    if budget.get("ece") is not None:
        ok = ok and trained.ece <= base.ece + float(budget["ece"]) + 1e-12
    return ok


# -- the run -----------------------------------------------------------------------------


def run(plan: Plan, stop: dict[str, bool]) -> int:
    import deepspeed
    import torch
    import torch.distributed as dist

    from executor import decider

    if plan.world != 1:
        raise SystemExit("decider_trains_on_one_process")
    job, hp = plan.job, plan.hp
    train, held, dataset_sha = rows_of(plan)
    question = train[0].question
    model = decider.build()
    base_state = {k: v.clone() for k, v in model.state_dict().items()}
    base_sha = decider.state_sha256(base_state)
    mode = str(job["adaptation"]["mode"])
    if mode == "auto":
        mode = "full"
    if mode not in ("full", "readout"):
        raise SystemExit("unsupported_adaptation")
    for name, p in model.named_parameters():
        p.requires_grad_(mode == "full" or name in decider.HEAD)
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    terms = list((job.get("objective") or {}).get("terms") or [])
    protect = dict(job.get("protect") or {})
    protected_names = [str(s) for s in protect.get("suites") or []]
    protected_train = [row for name in protected_names for row in suite_train(name)]
    budget = dict(protect.get("budget") or {})

    projector = None
    if protected_train and protect.get("projection") is not None:
        strength = (protect.get("projection") or {}).get("strength")
        projector = decider.protected_subspace(
            model, protected_train, trainable, 1.0 if strength is None else float(strength)
        )
        emit(
            type="log",
            line=f"projection: λ {projector.strength}, directions {projector.directions()}, "
            f"{projector.nbytes / 2**20:.1f} MiB",
        )
    preserve: list[Decision] = []
    preserve_answers: list[list[float]] = []
    if protected_train and protect.get("distillation"):
        preserve = protected_train
        preserve_answers = decider.answers(model, preserve)

    # SGD with momentum, not AdamW: its step is a linear combination of the gradients it
    # was given, so a gradient kept off the protected directions keeps the update off them
    # too. Adam's per-coordinate scaling would turn a projected gradient back into them.
    optimizer = torch.optim.SGD(
        list(trainable.values()), lr=float(hp["learning_rate"]), momentum=MOMENTUM, nesterov=True
    )
    weight_decay = float(hp.get("weight_decay", 0.0))
    warmup = int(hp.get("warmup_steps", 0))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / (warmup + 1))
    )
    # DeepSpeed's shared-memory CPU allreduce compiles for over a minute on first use.
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    ebs = int(job["effective_batch_size"])
    engine, _, _, _ = deepspeed.initialize(
        model=model,
        optimizer=optimizer,
        lr_scheduler=scheduler,
        dist_init_required=False,
        config={
            # The effective batch is one micro-batch: the pair terms see all of it.
            "train_micro_batch_size_per_gpu": ebs,
            "gradient_accumulation_steps": 1,
            "zero_optimization": {"stage": 0},
            "zero_allow_untested_optimizer": True,
            "gradient_clipping": 1.0,
            "bf16": {"enabled": False},
            "steps_per_print": 10**9,
            "wall_clock_breakdown": False,
        },
    )
    module = engine.module
    batches = step_batches(train, plan)
    save_every = int(hp.get("save_steps", 10))
    patience = int(hp.get("early_stopping_patience", 0)) if held else 0
    seed = int(hp.get("seed", 0))
    state: dict[str, Any] = {
        "step": 0,
        "best_loss": None,
        "best_step": None,
        "evals": [],
        "bad_evals": 0,
        "served": None,
    }
    if plan.resume_dir is not None:
        _, client = engine.load_checkpoint(str(plan.resume_dir), tag="state")
        state.update({k: v for k, v in (client or {}).items() if k in state})
        emit(type="log", line=f"resumed at step {state['step']}")
    emit(type="status", status="running")
    loop_started = time.monotonic()
    stop_reason = "max_steps" if "max_steps" in hp else "completed"
    step = int(state["step"])
    while step < plan.planned_steps:
        if stop["asked"]:
            stop_reason = "cancelled"
            break
        batch = [train[i] for i in batches[step]]
        engine.train()
        logits = decider.logits_of(engine, [r.state for r in batch], question)
        loss, _ = decider.objective(logits, batch, terms)
        if preserve:
            # A preservation batch each step, seeded by the step: the base's answers on
            # the protected suites, which the trained model is held to by KL.
            pick = random.Random(seed * 1_000_003 + step).sample(
                range(len(preserve)), min(ebs, len(preserve))
            )
            chosen = [preserve[i] for i in pick]
            for q, idx in decider.by_question(chosen).items():
                ref = torch.tensor([preserve_answers[pick[i]] for i in idx])
                got = decider.logits_of(engine, [chosen[i].state for i in idx], q)
                loss = loss + decider.kl(ref, got) * len(idx) / len(chosen)
        engine.backward(loss)
        if weight_decay:
            # Decay joins the gradient before the projection, so it obeys it too.
            for p in trainable.values():
                if p.grad is not None:
                    p.grad.add_(p.detach(), alpha=weight_decay)
        shares = projector.apply(trainable) if projector is not None else {}
        # What the step is given, after projection and before clipping.
        grads = [p.grad.detach().norm() for p in trainable.values() if p.grad is not None]
        grad_norm = float(torch.stack(grads).norm()) if grads else 0.0
        engine.step()
        step += 1
        emit(type="metric", name="loss", step=step, value=round(loss.item(), 6))
        emit(type="metric", name="learning_rate", step=step, value=scheduler.get_last_lr()[0])
        emit(type="metric", name="grad_norm", step=step, value=round(grad_norm, 6))
        for layer, share in shares.items():
            emit(type="metric", name=f"projection/{layer}", step=step, value=round(share, 6))
        state["step"] = step
        if held and (step % save_every == 0 or step == plan.planned_steps):
            eval_loss = decider.grade_model(module, held).log_loss
            state["evals"].append([step, eval_loss])
            emit(type="metric", name="eval_loss", step=step, value=round(eval_loss, 6))
            if state["best_loss"] is None or eval_loss < state["best_loss"]:
                state.update(best_loss=eval_loss, best_step=step, bad_evals=0)
                state["served"] = {k: v.detach().clone() for k, v in module.state_dict().items()}
            else:
                state["bad_evals"] += 1
                if patience and state["bad_evals"] >= patience:
                    stop_reason = "early_stopping"
                    break
    if step == 0:
        emit(type="status", status="cancelled")
        return 0
    training_seconds = time.monotonic() - loop_started
    if state["served"] is None or not held:
        trained = {k: v.detach().clone() for k, v in module.state_dict().items()}
        served_step = step
    else:
        trained, served_step = state["served"], int(state["best_step"])
    changed = list(decider.HEAD) if mode == "readout" else sorted(trained)
    delta, served = decider.served_from_delta(trained, base_state, changed)

    emit(type="status", status="evaluating")
    served_model = decider.Decider()
    served_model.load_state_dict(served)
    base_model = decider.build()
    suites: list[tuple[str, str, list[Decision]]] = [("target", question.key, held)]
    for name in (job.get("evaluation") or {}).get("suites") or []:
        # A suite also protected is graded once, as protected.
        if name not in [question.key, *protected_names, *(s for _, s, _ in suites)]:
            suites.append(("target", str(name), suite_holdout(str(name))))
    suites += [("protected", name, suite_holdout(name)) for name in protected_names]
    grades: list[dict[str, Any]] = []
    for role, name, rows in suites:
        base_g, trained_g = (
            decider.grade_model(base_model, rows),
            decider.grade_model(served_model, rows),
        )
        for who, g in (("suite", trained_g), ("base", base_g)):
            for figure, value in g.to_json().items():
                emit(
                    type="metric",
                    name=f"{who}/{series_part(name)}/{figure}",
                    step=step,
                    value=round(value, 6),
                )
        grades.append(
            {
                "suite": name,
                "role": role,
                "examples": len(rows),
                "base": base_g.to_json(),
                "trained": trained_g.to_json(),
                "within_budget": role == "protected" and within_budget(base_g, trained_g, budget),
            }
        )
    judged = verdict(grades)

    emit(type="status", status="finalizing")
    engine.save_checkpoint(str(plan.work / "state"), tag="state", client_state=state)
    dist.barrier()
    evaluation = {
        "verdict": judged,
        "grades": grades,
        **(evaluation_block(state, served_step) or {}),
    }
    meta = {
        "base_model": job["base_model"], "revision": job.get("revision", ""), "base_sha256": base_sha,
        "adaptation": job["adaptation"], "step": served_step, "job_id": job.get("id", ""),
    }  # fmt: skip
    out = plan.output_dir
    probe = held[:8] or train[:8]
    if job["output"]["kind"] == "checkpoint":
        decider.write_checkpoint(out, served, question, meta, probe)
    else:
        capability = {**meta, "protect": protect, "evaluation": evaluation}
        decider.write_capability(out, served, delta, question, capability, probe)
    emit_end(
        plan.work / "state",
        out,
        step,
        served_step,
        base_sha256=base_sha,
        dataset_sha256=dataset_sha,
        training_seconds=round(training_seconds, 3),
        evaluation=evaluation,
        outcome={"stop_reason": stop_reason, "downgrades": []},
    )
    return 0
