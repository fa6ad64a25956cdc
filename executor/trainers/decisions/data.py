"""A decision job's rows: its frozen split, the suites it is graded and protected on, and
the order the steps walk."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from executor.wire.plan import Plan
from trainyard.training import decisions
from trainyard.training.decisions import Decision


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
        if job.dataset_uri != decisions.FIXTURE_DATASET:
            raise SystemExit("dataset_not_found")
        snapshot = datasets.build_snapshot(
            datasets.select(
                [decisions.to_row(d) for d in decisions.fixture_rows()], list(job.dataset_tags)
            ),
            job.loss_mask,
            decisions.held_out_row,
        )
        items = [(decisions.from_row(row), split) for row, split in snapshot.items]
        sha256 = snapshot.sha256
    if job.snapshot_sha256 and sha256 != job.snapshot_sha256:
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
    ebs = plan.job.effective_batch_size
    seed = plan.job.hyperparameters.seed
    planned = plan.job.planned_steps
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(row.group or f"\0{i}", []).append(i)
    units = list(groups.values())
    steps: list[list[int]] = []
    epoch = 0
    while len(steps) < planned:
        order = list(range(len(units)))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        flat = [i for u in order for i in units[u]]
        steps += [flat[i : i + ebs] for i in range(0, len(flat), ebs)]
        epoch += 1
    return steps[:planned]


def suite_holdout(name: str) -> list[Decision]:
    if name not in decisions.SUITES:
        raise SystemExit("suite_not_found")
    return decisions.split(decisions.SUITES[name].rows())[1]


def suite_train(name: str) -> list[Decision]:
    if name not in decisions.SUITES:
        raise SystemExit("suite_not_found")
    return decisions.split(decisions.SUITES[name].rows())[0]
