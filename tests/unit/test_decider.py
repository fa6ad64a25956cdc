"""The decision base's math: calibration error, the objective's terms, the projection off
the protected directions, the base's build, and outputs that load back as they graded."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
import torch

from executor.models import decider
from executor.trainers.decisions import data, grading, objective, outputs, projection
from executor.wire.plan import Job, Plan, Task, Term
from trainyard.training import decisions
from trainyard.training.decisions import Decision, Question

YES_NO = Question("q", "choice", "pick", ("a", "b"))


def test_ece_is_the_binned_gap_between_confidence_and_accuracy() -> None:
    # Bins of width 1/15: 0.9 falls in bin 13 (twice: one right, one wrong), 0.62 in bin 9
    # (right), 0.25 in bin 3 (right).
    confidence = [0.9, 0.9, 0.62, 0.25]
    correct = [True, False, True, True]
    expected = 2 / 4 * abs(0.5 - 0.9) + 1 / 4 * abs(1 - 0.62) + 1 / 4 * abs(1 - 0.25)
    assert grading.ece(confidence, correct) == pytest.approx(expected)  # 0.4825
    assert grading.ece([1.0, 0.999], [True, True]) == pytest.approx(0.0005)  # 1.0 is bin 14


def test_grades_read_the_answers_against_the_targets() -> None:
    answers = [[0.9, 0.1], [0.1, 0.9], [0.62, 0.38], [0.25, 0.25, 0.25, 0.25]]
    targets = [[1.0, 0.0], [1.0, 0.0], [0.7, 0.3], [1.0, 0.0, 0.0, 0.0]]
    g = grading.grade(answers, targets)
    assert g.accuracy == 0.75  # the tie goes to the first option, as it does for targets
    log_loss = -(math.log(0.9) + math.log(0.1) + 0.7 * math.log(0.62) + 0.3 * math.log(0.38))
    assert g.log_loss == pytest.approx((log_loss - math.log(0.25)) / 4)
    assert g.ece == pytest.approx(0.4825)


def test_hard_margin_is_a_hinge_on_the_gold_logit_over_the_hardest_negative() -> None:
    logits = torch.tensor([[2.0, 1.8, 0.0], [0.0, 3.0, 1.0]])
    value = objective.hard_margin(logits, torch.tensor([0, 1]), margin=0.5)
    assert float(value) == pytest.approx((0.5 - 0.2 + 0.0) / 2)


def test_pairwise_margin_compares_rows_of_a_group_that_differ() -> None:
    # a: p = [.5, .5], gold 0; b: p = [.25, .75], gold 1; c (another group) is unpaired.
    logits = torch.tensor([[0.0, 0.0], [0.0, math.log(3)], [5.0, 0.0]])
    value = objective.pairwise_margin(logits, [0, 1, 0], ["g", "g", "h"], margin=0.5)
    # (a, b): ln .5 − ln .25 = ln 2 ≥ 0.5, no loss; (b, a): ln .75 − ln .5 = ln 1.5 < 0.5.
    assert float(value) == pytest.approx((0.5 - math.log(1.5)) / 2)
    assert float(objective.pairwise_margin(logits, [0, 0, 0], ["g", "g", "h"])) == 0.0


def test_consistency_is_the_symmetric_kl_of_a_group_s_views() -> None:
    logits = torch.tensor([[0.0, 0.0], [0.0, math.log(3)], [0.0, 9.0]])
    value = objective.consistency(logits, [1, 1, 0], ["g", "g", "g"])
    # KL(a‖b) + KL(b‖a) = Σ (pa − pb)(ln pa − ln pb) = .25 ln 2 + .25 ln 1.5
    assert float(value) == pytest.approx(0.25 * math.log(3))


def test_the_objective_weighs_each_term_on_top_of_cross_entropy() -> None:
    rows = [
        Decision("x", YES_NO, (1.0, 0.0), "g"),
        Decision("y", YES_NO, (0.0, 1.0), "g"),
    ]
    logits = torch.tensor([[0.0, 0.0], [0.0, math.log(3)]])
    terms = [
        {"kind": "pairwise_margin", "weight": 2.0, "margin": 0.5},
        {"kind": "hard_margin", "weight": 1.0},
    ]
    total, parts = objective.objective(logits, rows, [Term.of(t) for t in terms])
    ce = -(math.log(0.5) + math.log(0.75)) / 2
    hinge = (0.5 + 0.0) / 2  # gold margins of 0 and ln 3 against the default 0.5
    assert parts["cross_entropy"] == pytest.approx(ce)
    assert float(total) == pytest.approx(ce + 2 * (0.5 - math.log(1.5)) / 2 + hinge)


def test_a_noul_is_answered_by_one_logit() -> None:
    model = decider.build()
    noul = decisions.SUITES["spam"].question
    states = ["winner prize today", "lunch notes"]
    logits = decider.logits_of(model, states, noul)
    assert torch.equal(logits[:, 0], torch.zeros(2))
    ids, offsets, opt_ids, opt_offsets = decider.inputs(states, noul, model.arch.buckets)
    with torch.no_grad():
        query = model.head(model.encode(ids, offsets))
        options = model.encode(opt_ids, opt_offsets)
    z = query @ (options[1] - options[0])
    assert torch.allclose(logits[:, 1], z, atol=1e-5)
    probs = torch.softmax(logits, dim=1)
    assert torch.allclose(probs[:, 1], torch.sigmoid(z), atol=1e-6)
    assert probs[0, 1] > 0.5 > probs[1, 1]  # the base knows spam


def test_the_base_knows_its_suites_and_not_the_queue() -> None:
    model = decider.build()
    for name in decisions.KNOWN_SUITES:
        assert grading.grade_model(model, decider.holdout(name)).accuracy >= 0.9
    assert grading.grade_model(model, decider.holdout("queue")).accuracy < 0.6


def test_the_base_builds_to_the_same_bytes_every_time() -> None:
    first, second = decider._pretrain(), decider._pretrain()
    assert decider.state_sha256(first) == decider.state_sha256(second)
    assert decider.weights_sha256(decider.build()) == decider.state_sha256(first)
    # And on every machine: the recipe's bytes are pinned (a change bumps RECIPE and this).
    assert decider.state_sha256(first) == decider.BASE_SHA256
    for tensor in first.values():  # on the float32 grid of 2^-16
        assert torch.equal(
            torch.round(tensor.double() / decider.GRID) * decider.GRID, tensor.double()
        )


def test_the_projection_removes_exactly_the_protected_components() -> None:
    generator = torch.Generator().manual_seed(1)
    vectors = [torch.randn(50, generator=generator, dtype=torch.float64) for _ in range(6)]
    vectors.append(vectors[0] * 2 + vectors[1])  # a dependent one adds no direction
    basis = projection.orthonormal(vectors)
    assert basis.shape == (50, 6)
    g = torch.randn(50, generator=generator)
    for strength in (1.0, 0.5):
        projector = projection.Projector({"w": basis}, strength)
        grad = g.clone()
        share = projector.project("w", grad)
        inside = basis @ (basis.T @ g)
        assert torch.allclose(grad, g - strength * inside, atol=1e-5)
        assert share == pytest.approx(float((strength * inside).norm() / g.norm()), rel=1e-5)
        if strength == 1.0:
            for v in vectors:  # what is left is orthogonal to every protected vector
                assert abs(float(grad.double() @ v)) < 1e-4 * float(v.norm())


def test_a_projected_readout_step_leaves_the_protected_answers_as_they_were() -> None:
    model = decider.build()
    for name, p in model.named_parameters():
        p.requires_grad_(name in decider.HEAD)
    head = {n: p for n, p in model.named_parameters() if p.requires_grad}
    projector = projection.protected_subspace(model, decider.known_rows(), head, strength=1.0)
    protected = [r for name in decisions.KNOWN_SUITES for r in decider.holdout(name)]

    def flat(model: decider.Decider) -> torch.Tensor:
        return torch.tensor([p for answer in decider.answers(model, protected) for p in answer])

    before = flat(model)
    queue = decisions.split(decisions.fixture_rows())[0][:48]

    def step(project: bool) -> torch.Tensor:
        trial = decider.build()
        trial.load_state_dict(model.state_dict())
        for name, p in trial.named_parameters():
            p.requires_grad_(name in decider.HEAD)
        logits = decider.logits_of(trial, [r.state for r in queue], queue[0].question)
        objective.objective(logits, queue, [])[0].backward()
        params = {n: p for n, p in trial.named_parameters() if p.requires_grad}
        shares = projector.apply(params) if project else {}
        assert not project or 0 < shares["head.weight"] < 1
        with torch.no_grad():
            for p in params.values():
                assert p.grad is not None
                p.sub_(2.0 * p.grad)
        return flat(trial)

    assert (step(project=False) - before).abs().max() > 0.05
    assert (step(project=True) - before).abs().max() < 1e-4


def _trained() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    base = {k: v.clone() for k, v in decider.base_state().items()}
    trained = {k: v.clone() for k, v in base.items()}
    generator = torch.Generator().manual_seed(2)
    trained["head.weight"] += 0.3 * torch.randn(trained["head.weight"].shape, generator=generator)
    return base, trained


def test_a_capability_reloads_and_answers_as_it_was_graded(tmp_path: Path) -> None:
    base, trained = _trained()
    delta, served = outputs.served_from_delta(trained, base, decider.HEAD)
    assert set(delta) == set(decider.HEAD)
    question = decisions.SUITES["queue"].question
    rows = decider.holdout("queue")
    meta = {
        "base_model": "fixture-tiny-decider", "revision": "v1",
        "base_sha256": decider.state_sha256(base), "adaptation": {"mode": "readout"},
    }  # fmt: skip
    outputs.write_capability(tmp_path, served, delta, question, meta, rows[:5])
    doc = json.loads((tmp_path / "capability.json").read_text())
    assert doc["serves"] == "head" and doc["temperature"] == 1.0
    assert doc["question"] == {
        "key": "queue", "type": "choice", "instructions": "which queue",
        "labels": ["billing", "bug", "other"],
    }  # fmt: skip
    readme = (tmp_path / "README.md").read_text()
    assert doc["base_sha256"] == meta["base_sha256"] and meta["base_sha256"] in readme
    assert "trainyard models export fixture-tiny-decider -o base" in readme
    loaded = decider.load(tmp_path)
    probe = json.loads((tmp_path / "probe.json").read_text())
    assert loaded.answer(probe["states"]) == probe["answers"]
    graded = decider.Decider()
    graded.load_state_dict(served)
    assert decider.answers(loaded.model, rows) == decider.answers(graded, rows)


def test_a_checkpoint_reloads_whole(tmp_path: Path) -> None:
    base, trained = _trained()
    _, served = outputs.served_from_delta(trained, base, sorted(trained))
    question = decisions.SUITES["spam"].question
    outputs.write_checkpoint(
        tmp_path, served, question, {"base_model": "x"}, decider.holdout("spam")[:4]
    )
    loaded = decider.load(tmp_path)
    probe = json.loads((tmp_path / "probe.json").read_text())
    assert loaded.question == question
    assert loaded.answer(probe["states"]) == probe["answers"]


def _plan(steps: int, ebs: int) -> Plan:
    job = {"planned_steps": steps, "effective_batch_size": ebs, "hyperparameters": {"seed": 3}}
    return Plan(Job.of(job), Task(), Path("."), Path("."))


def test_steps_walk_whole_groups_in_a_seeded_order() -> None:
    train = decisions.split(decisions.fixture_rows())[0]
    steps = data.step_batches(train, _plan(40, 12))
    assert len(steps) == 40 and steps == data.step_batches(train, _plan(40, 12))
    epoch = [i for s in steps for i in s][: len(train)]
    assert sorted(epoch) == list(range(len(train)))
    runs = [train[i].group for i in epoch]
    assert sum(a != b for a, b in itertools.pairwise(runs)) == len({r.group for r in train}) - 1


def test_the_verdict_holds_each_protected_suite_to_the_budget() -> None:
    base = grading.Grades(1.0, 0.1, 0.03)
    budget = {"accuracy": 0.02, "ece": 0.02}
    assert grading.within_budget(base, grading.Grades(0.98, 0.3, 0.05), budget)
    assert not grading.within_budget(base, grading.Grades(0.97, 0.1, 0.03), budget)
    assert not grading.within_budget(base, grading.Grades(1.0, 0.1, 0.06), budget)
    assert grading.within_budget(base, grading.Grades(0.5, 2.0, 0.5), {})
    protected = {"role": "protected", "within_budget": False}
    target = {"role": "target", "within_budget": False}
    assert grading.verdict([target]) == "accepted"
    assert grading.verdict([target, protected]) == "rejected"
