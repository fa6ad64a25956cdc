"""A language job's examples: its frozen split, encoded, and the order the steps walk."""

from __future__ import annotations

import hashlib
import random
from typing import Any

from executor.models import fixture
from executor.wire.plan import Plan


def examples(plan: Plan, codec: fixture.Codec | None = None) -> tuple[list[Any], list[Any], str]:
    """The job's frozen split: the snapshot the job holds, or for the built-in fixture,
    rebuilt with the same code that froze it; either is checked against its sha256."""
    from trainyard.training import datasets

    job = plan.job
    mask = job.loss_mask
    if plan.snapshot_path is not None:
        data = plan.snapshot_path.read_bytes()
        items, sha256 = datasets.read_snapshot(data), hashlib.sha256(data).hexdigest()
    else:
        snapshot = datasets.build_snapshot(
            datasets.select(datasets.fixture_rows(), list(job.dataset_tags)), mask
        )
        items, sha256 = snapshot.items, snapshot.sha256
    if job.snapshot_sha256 and sha256 != job.snapshot_sha256:
        raise SystemExit("dataset_changed")
    prompt = job.system_prompt
    max_len = job.hyperparameters.max_seq_length
    train: list[Any] = []
    held: list[Any] = []
    for row, split in items:
        if not row.trainable(mask):
            continue
        messages = [(r, c) for r, c in row.messages if c.strip()]
        if prompt:
            messages = [("system", prompt), *messages]
        encoded = fixture.encode(
            messages, loss_mask=mask, max_seq_length=max_len, codec=codec or fixture.BYTES
        )
        (held if split == "eval" else train).append(encoded)
    return train, held, sha256


def step_batches(count: int, plan: Plan) -> list[list[int]]:
    """Every optimizer step's examples, in order: each epoch a seeded permutation, cut
    into effective batches (a partial last one is still a step), for exactly the
    planned steps. The same job always walks the same order, so a resume continues it."""
    ebs = plan.job.effective_batch_size
    seed = plan.job.hyperparameters.seed
    planned = plan.job.planned_steps
    steps: list[list[int]] = []
    epoch = 0
    while len(steps) < planned:
        order = list(range(count))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        steps += [order[i : i + ebs] for i in range(0, count, ebs)]
        epoch += 1
    return steps[:planned]


def my_share(batch: list[int], plan: Plan) -> list[list[int]]:
    """This rank's micro-batches of one global batch."""
    per_device = plan.job.hyperparameters.per_device_train_batch_size
    share = mine(batch, plan)
    return [share[i : i + per_device] for i in range(0, len(share), per_device)] or [[]]


def mine(batch: list[int], plan: Plan) -> list[int]:
    """This rank's examples of one global batch."""
    return batch[plan.task.rank :: plan.task.world_size]
