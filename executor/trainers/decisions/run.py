"""A decision job's run on `fixture-tiny-decider`: it reads the job's decision rows and
their frozen split, trains the decider (the head alone for `readout`, everything for
`full`) in the shared DeepSpeed loop on one process for exactly the planned steps in a
seeded order, adds the objective's terms, keeps the update off the protected suites'
directions by `protect.projection.strength`, distills the base's answers on them when
asked, evaluates the target suite's holdout at the checkpoint cadence and serves the
best, grades the base and the served model on every suite, and judges the protected
ones against `protect.budget`."""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Any

import torch

from executor.models import decider
from executor.trainers import deepspeed
from executor.trainers.base import Emit, Stop
from executor.trainers.decisions import data, grading, objective, outputs, projection
from executor.wire import protocol
from executor.wire.plan import Plan
from trainyard.training import events
from trainyard.training.decisions import Decision, Question

MOMENTUM = 0.9


def run(plan: Plan, emit: Emit) -> int:
    stop = Stop.on_sigterm()
    return deepspeed.distributed(plan, emit, lambda: _train(plan, emit, stop))


@dataclasses.dataclass
class Protection:
    """What the protected suites ask of the run: their names, a projector of the gradient
    (or None), and the rows and base answers distillation holds the model to."""

    suites: list[str]
    projector: projection.Projector | None = None
    preserve: list[Decision] = dataclasses.field(default_factory=list)
    preserve_answers: list[list[float]] = dataclasses.field(default_factory=list)


def protection(
    plan: Plan, model: decider.Decider, trainable: dict[str, Any], say: Emit
) -> Protection:
    protect = plan.job.protect
    found = Protection(list(protect.suites))
    rows = [row for name in protect.suites for row in data.suite_train(name)]
    if rows and protect.projection is not None:
        found.projector = p = projection.protected_subspace(
            model, rows, trainable, protect.projection
        )
        say(
            events.Log(
                f"projection: λ {p.strength}, directions {p.directions()}, "
                f"{p.nbytes / 2**20:.1f} MiB"
            )
        )
    if rows and protect.distillation:
        found.preserve = rows
        found.preserve_answers = decider.answers(model, rows)
    return found


class DecisionSteps:
    """One step over the step's rows (one micro-batch: the pair terms see all of it), a
    preservation batch of the protected suites when distilling, weight decay, and the
    projection, before the optimizer steps."""

    def __init__(
        self,
        engine: Any,
        scheduler: Any,
        plan: Plan,
        rows: tuple[list[Decision], list[Decision]],
        kept: Protection,
        trainable: dict[str, Any],
    ) -> None:
        self.engine, self.scheduler, self.plan, self.kept = engine, scheduler, plan, kept
        self.train, self.held = rows
        self.trainable = trainable
        self.question = self.train[0].question
        self.batches = data.step_batches(self.train, plan)

    def _preserving(self, index: int, loss: Any) -> Any:
        """`loss` plus the KL to the base's answers on a preservation batch seeded by the
        step, the protected suites' rows the trained model is held to."""
        preserve, seed = self.kept.preserve, self.plan.job.hyperparameters.seed
        size = min(self.plan.job.effective_batch_size, len(preserve))
        pick = random.Random(seed * 1_000_003 + index).sample(range(len(preserve)), size)
        chosen = [preserve[i] for i in pick]
        for q, idx in decider.by_question(chosen).items():
            ref = torch.tensor([self.kept.preserve_answers[pick[i]] for i in idx])
            got = decider.logits_of(self.engine, [chosen[i].state for i in idx], q)
            loss = loss + objective.kl(ref, got) * len(idx) / len(chosen)
        return loss

    def step(self, index: int) -> dict[str, float]:
        engine, hp = self.engine, self.plan.job.hyperparameters
        batch = [self.train[i] for i in self.batches[index]]
        engine.train()
        logits = decider.logits_of(engine, [r.state for r in batch], self.question)
        loss, _ = objective.objective(logits, batch, self.plan.job.terms)
        if self.kept.preserve:
            loss = self._preserving(index, loss)
        engine.backward(loss)
        if hp.weight_decay:
            # Decay joins the gradient before the projection, so it obeys it too.
            for p in self.trainable.values():
                if p.grad is not None:
                    p.grad.add_(p.detach(), alpha=hp.weight_decay)
        projector = self.kept.projector
        shares = projector.apply(self.trainable) if projector is not None else {}
        # What the step is given, after projection and before clipping.
        grads = [p.grad.detach().norm() for p in self.trainable.values() if p.grad is not None]
        grad_norm = float(torch.stack(grads).norm()) if grads else 0.0
        engine.step()
        metrics = {
            "loss": round(loss.item(), 6),
            "learning_rate": self.scheduler.get_last_lr()[0],
            "grad_norm": round(grad_norm, 6),
        }
        metrics.update({f"projection/{layer}": round(s, 6) for layer, s in shares.items()})
        return metrics

    def evaluate(self) -> float:
        return grading.grade_model(self.engine.module, self.held).log_loss

    def snapshot(self) -> dict[str, Any]:
        return {k: v.detach().clone() for k, v in self.engine.module.state_dict().items()}


def _mode(plan: Plan) -> str:
    mode = plan.job.adaptation.mode
    if mode == "auto":
        mode = "full"
    if mode not in ("full", "readout"):
        raise SystemExit("unsupported_adaptation")
    return mode


def _train(plan: Plan, emit: Emit, stop: Stop) -> int:
    if plan.task.world_size != 1:
        raise SystemExit("decider_trains_on_one_process")
    hp = plan.job.hyperparameters
    train, held, dataset_sha = data.rows_of(plan)
    model = decider.build()
    base_state = {k: v.clone() for k, v in model.state_dict().items()}
    mode = _mode(plan)
    for name, p in model.named_parameters():
        p.requires_grad_(mode == "full" or name in decider.HEAD)
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    kept = protection(plan, model, trainable, emit)
    # SGD with momentum, not AdamW: its step is a linear combination of the gradients it
    # was given, so a gradient kept off the protected directions keeps the update off them
    # too. Adam's per-coordinate scaling would turn a projected gradient back into them.
    optimizer = torch.optim.SGD(
        list(trainable.values()), lr=hp.learning_rate, momentum=MOMENTUM, nesterov=True
    )
    # The effective batch is one micro-batch: the pair terms see all of it.
    engine, scheduler = deepspeed.engine_of(
        model,
        optimizer,
        hp,
        planned_steps=plan.job.planned_steps,
        micro_batch=plan.job.effective_batch_size,
    )
    steps = DecisionSteps(engine, scheduler, plan, (train, held), kept, trainable)
    progress = deepspeed.train(
        engine, plan, stop, emit, steps, held=bool(held), served_in_state=True
    )
    step = progress.step
    if step == 0:
        emit(events.Status("cancelled"))
        return 0
    training_seconds = time.monotonic() - progress.started
    if progress.served is None or not held:
        trained = steps.snapshot()
        served_step = step
    else:
        trained, served_step = progress.served, int(progress.state["best_step"])
    changed = list(decider.HEAD) if mode == "readout" else sorted(trained)
    delta, served = outputs.served_from_delta(trained, base_state, changed)
    emit(events.Status("evaluating"))
    grades = graded(plan, served, steps.question, held, emit, step)
    emit(events.Status("finalizing"))
    deepspeed.save_state(engine, plan, progress.state)
    block = protocol.evaluation_block(
        progress.evals, progress.state["best_loss"], progress.state["best_step"], served_step
    )
    evaluation = {"verdict": grading.verdict(grades), "grades": grades, **(block or {})}
    base_sha = decider.state_sha256(base_state)
    meta = {
        "base_model": plan.job.base_model,
        "revision": plan.job.revision,
        "base_sha256": base_sha,
        "adaptation": dict(plan.job.adaptation.doc),
        "step": served_step,
        "job_id": plan.job.id,
    }
    probe = held[:8] or train[:8]
    if plan.job.output_kind == "checkpoint":
        outputs.write_checkpoint(plan.output_dir, served, steps.question, meta, probe)
    else:
        capability = {**meta, "protect": dict(plan.job.protect.doc), "evaluation": evaluation}
        outputs.write_capability(plan.output_dir, served, delta, steps.question, capability, probe)
    protocol.end(
        plan.work / "state",
        plan.output_dir,
        base_sha256=base_sha,
        step=step,
        served_step=served_step,
        dataset_sha256=dataset_sha,
        training_seconds=training_seconds,
        evaluated=evaluation,
        stop_reason=progress.stop_reason,
    )
    return 0


def graded(
    plan: Plan,
    served: dict[str, Any],
    question: Question,
    held: list[Decision],
    emit: Emit,
    step: int,
) -> list[dict[str, Any]]:
    """The base and the served model graded on every suite: the target's holdout, the
    suites the job names, and the protected ones (a suite also protected is graded once,
    as protected), each figure a metric at the last step."""
    served_model = decider.Decider()
    served_model.load_state_dict(served)
    base_model = decider.build()
    protected = list(plan.job.protect.suites)
    suites: list[tuple[str, str, list[Decision]]] = [("target", question.key, held)]
    for name in plan.job.evaluation_suites:
        if name not in [question.key, *protected, *(s for _, s, _ in suites)]:
            suites.append(("target", name, data.suite_holdout(name)))
    suites += [("protected", name, data.suite_holdout(name)) for name in protected]
    grades: list[dict[str, Any]] = []
    for role, name, rows in suites:
        base_g = grading.grade_model(base_model, rows)
        trained_g = grading.grade_model(served_model, rows)
        for who, g in (("suite", trained_g), ("base", base_g)):
            for figure, value in g.to_json().items():
                series = f"{who}/{grading.series_part(name)}/{figure}"
                emit(events.Metric(series, step, round(value, 6)))
        budget = plan.job.protect.budget
        grades.append(
            {
                "suite": name,
                "role": role,
                "examples": len(rows),
                "base": base_g.to_json(),
                "trained": trained_g.to_json(),
                "within_budget": role == "protected"
                and grading.within_budget(base_g, trained_g, budget),
            }
        )
    return grades
