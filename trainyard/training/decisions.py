"""Decisions: the rows a decision base trains on, its built-in suites, and the holdout.

A decision row (HIP-1333 §4) is one state and one question about it, with the answer as a
distribution over the question's options, in order:

    {"state": "my card was charged twice",
     "questions": {"queue": {"type": "choice", "instructions": "which queue",
                             "criteria": ["billing", "bug", "other"]}},
     "target": {"queue": [1, 0, 0]}}

`lang` may name the row's language and `group` may tie rows together for the objective
terms (views of one decision for `consistency`, contrasting rows for `pairwise_margin`).
Every row of a dataset asks the same question: its key, type and labels, in order. A
`noul` question has two labels, the negative first, and is answered by one logit; a
`choice` or a `score` by one output an option.

Rows split by their state: about a fifth of the states are held out, chosen by the
state's hash, so the same rows are held out every time and views of a state stay
together. This module is shared by the service that validates a create and snapshots the
rows and by the trainer that reads them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
from collections.abc import Sequence

from trainyard.training import datasets
from trainyard.training.datasets import DatasetError, Row

TYPES = ("choice", "score", "noul")
MAX_LABELS = 64
MAX_STATE = 4096
HOLDOUT_ONE_IN = 5  # about a fifth of the states


@dataclasses.dataclass(frozen=True)
class Question:
    key: str
    type: str
    instructions: str
    labels: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"type": self.type, "instructions": self.instructions, "criteria": list(self.labels)}


@dataclasses.dataclass(frozen=True)
class Decision:
    """One row: a state, the question asked of it, the answer as a distribution."""

    state: str
    question: Question
    target: tuple[float, ...]
    group: str = ""
    lang: str = ""

    @property
    def gold(self) -> int:
        """The option the target weighs most (the first of a tie)."""
        return max(range(len(self.target)), key=lambda i: self.target[i])

    @property
    def id(self) -> str:
        body = json.dumps([self.state, self.question.key, self.target, self.group])
        return "d-" + hashlib.sha256(body.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "state": self.state,
            "questions": {self.question.key: self.question.to_json()},
            "target": {self.question.key: list(self.target)},
        }
        if self.group:
            doc["group"] = self.group
        if self.lang:
            doc["lang"] = self.lang
        return doc


def held_out(state: str) -> bool:
    """Whether a state is in the holdout: by its hash alone, about one in five."""
    return int(hashlib.sha256(state.encode()).hexdigest()[:8], 16) % HOLDOUT_ONE_IN == 0


def split(rows: Sequence[Decision]) -> tuple[list[Decision], list[Decision]]:
    """(train, holdout), each in the rows' order."""
    train = [r for r in rows if not held_out(r.state)]
    holdout = [r for r in rows if held_out(r.state)]
    return train, holdout


# -- uploaded rows -------------------------------------------------------------------------


def _bad(line: int, what: str) -> DatasetError:
    # The message names the line and what is wrong with it, never the row's text.
    return DatasetError(
        f"Line {line} of the dataset is not a decision row: {what}.",
        reason="TRAINING_DATASET_UNUSABLE",
        field="dataset.uri",
        metadata={"line": str(line)},
    )


def _question(line: int, doc: object) -> Question:
    if not isinstance(doc, dict) or len(doc) != 1:
        raise _bad(line, "questions must hold exactly one question")
    ((key, body),) = doc.items()
    if not isinstance(key, str) or not 1 <= len(key.encode()) <= 256:
        raise _bad(line, "a question key is 1 to 256 bytes")
    if not isinstance(body, dict) or set(body) - {"type", "instructions", "criteria"}:
        raise _bad(line, "a question holds type, instructions and criteria only")
    kind, instructions, labels = (
        body.get("type"),
        body.get("instructions", ""),
        body.get("criteria"),
    )
    if kind not in TYPES:
        raise _bad(line, "the question's type is choice, score or noul")
    if not isinstance(instructions, str) or len(instructions) > MAX_STATE:
        raise _bad(line, "instructions must be text")
    if (
        not isinstance(labels, list)
        or not 2 <= len(labels) <= MAX_LABELS
        or not all(isinstance(label, str) and label for label in labels)
        or len(set(labels)) != len(labels)
    ):
        raise _bad(line, "criteria must be 2 to 64 distinct labels")
    if kind == "noul" and len(labels) != 2:
        raise _bad(line, "a noul question has two labels, the negative first")
    return Question(key, kind, instructions, tuple(labels))


def parse_row(line: int, raw: bytes) -> Decision:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise _bad(line, "it is not JSON") from None
    if not isinstance(doc, dict):
        raise _bad(line, "it is not a JSON object")
    unknown = set(doc) - {"state", "questions", "target", "lang", "group"}
    if unknown:
        raise _bad(line, "it holds a field other than state, questions, target, lang, group")
    state = doc.get("state")
    if not isinstance(state, str) or not state.strip() or len(state) > MAX_STATE:
        raise _bad(line, "state must be text of 1 to 4,096 characters")
    question = _question(line, doc.get("questions"))
    target = doc.get("target")
    if not isinstance(target, dict) or set(target) != {question.key}:
        raise _bad(line, "target must name the question's key alone")
    values = target[question.key]
    if (
        not isinstance(values, list)
        or len(values) != len(question.labels)
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    ):
        raise _bad(line, "the target is one number an option")
    if any(v < 0 or not math.isfinite(v) for v in values) or abs(sum(values) - 1) > 1e-6:
        raise _bad(line, "the target must be at or above 0 and sum to 1")
    for name in ("lang", "group"):
        if not isinstance(doc.get(name, ""), str) or len(doc.get(name, "")) > 256:
            raise _bad(line, f"{name} must be text")
    return Decision(
        state, question, tuple(float(v) for v in values), doc.get("group", ""), doc.get("lang", "")
    )


def parse_jsonl(data: bytes) -> list[Decision]:
    """Decision rows from JSON Lines, every one asking the same question."""
    rows: list[Decision] = []
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        row = parse_row(number, raw)
        if rows and row.question != rows[0].question:
            raise _bad(number, "it asks another question than the first row")
        rows.append(row)
    if not rows:
        raise DatasetError(
            "The dataset holds no rows.", reason="TRAINING_DATASET_EMPTY", field="dataset"
        )
    return rows


# -- the built-in suites -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Suite:
    """A question the decision base is graded on, with its seeded rows. `known`: the
    base was built answering it (a suite worth protecting); else it is there to learn."""

    name: str
    question: Question
    vocab: tuple[tuple[str, ...], ...]  # per label, the words that decide it
    known: bool

    def rows(self) -> list[Decision]:
        return _suite_rows(self)


_FILLER = (
    "today", "again", "please", "the", "my", "our", "this", "that", "just", "really", "still",
    "team", "friend", "morning", "evening", "week", "after", "before", "with", "about",
)  # fmt: skip
_CONTRAST = ("not", "never", "no longer")


def _suite_rows(suite: Suite, groups: int = 120) -> list[Decision]:
    """Per group, two views of one decision and, for choice questions, a contrasting row
    of another label sharing their filler: rows for every objective term."""
    rng = random.Random(f"trainyard-decisions-{suite.name}")
    q = suite.question
    rows: list[Decision] = []
    for g in range(groups):
        label = g % len(q.labels)
        filler = rng.sample(_FILLER, 4)
        word = rng.choice(suite.vocab[label])
        other = (label + 1 + rng.randrange(len(q.labels) - 1)) % len(q.labels)
        group = f"{suite.name}-{g:04d}"
        views = [
            f"{filler[0]} {word} {filler[1]} {filler[2]}",
            f"{filler[2]} {filler[1]} {word} {filler[0]}",
        ]
        for state in views:
            rows.append(Decision(state, q, _onehot(label, len(q.labels)), group))
        contrast = f"{filler[0]} {rng.choice(suite.vocab[other])} {filler[3]} {filler[1]}"
        rows.append(Decision(contrast, q, _onehot(other, len(q.labels)), group))
    return rows


def _onehot(index: int, size: int) -> tuple[float, ...]:
    return tuple(1.0 if i == index else 0.0 for i in range(size))


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite(
            "sentiment",
            Question("sentiment", "choice", "how does the writer feel", ("negative", "positive")),
            (("awful", "terrible", "hate", "sad", "angry", "worst"),
             ("great", "lovely", "love", "happy", "glad", "best")),
            known=True,
        ),
        Suite(
            "topic",
            Question("topic", "choice", "what is it about", ("sports", "food", "tech")),
            (("football", "tennis", "match", "goal", "race"),
             ("pizza", "bread", "soup", "salad", "cheese"),
             ("laptop", "software", "server", "phone", "chip")),
            known=True,
        ),
        Suite(
            "spam",
            Question("spam", "noul", "is it spam", ("no", "yes")),
            (("meeting", "lunch", "notes", "draft", "call"),
             ("winner", "prize", "lottery", "bonus", "casino")),
            known=True,
        ),
        Suite(
            "queue",
            Question("queue", "choice", "which queue", ("billing", "bug", "other")),
            (("charged", "refund", "invoice", "payment", "receipt"),
             ("crash", "error", "broken", "freeze", "glitch"),
             ("hello", "thanks", "hours", "address", "question")),
            known=False,
        ),
    )
}  # fmt: skip

KNOWN_SUITES = tuple(name for name, s in SUITES.items() if s.known)
FIXTURE_DATASET = "fixture:decisions-tiny-v1"
# The fixture set teaches the one suite the base does not know.
FIXTURE_SUITE = "queue"


def fixture_rows() -> list[Decision]:
    """`fixture:decisions-tiny-v1`: the `queue` suite's rows, the same on every machine."""
    return SUITES[FIXTURE_SUITE].rows()


# -- through the snapshot ------------------------------------------------------------------
#
# A decision travels through a job's snapshot as a chat, so the snapshot, its preview and
# its reads serve both kinds of base: the question as the system message (JSON), the state
# as the user's, and the answer as the assistant's (JSON: the target, and the group and
# language when the row names them).


def to_row(decision: Decision) -> Row:
    answer: dict[str, object] = {"target": list(decision.target)}
    if decision.group:
        answer["group"] = decision.group
    if decision.lang:
        answer["lang"] = decision.lang
    question = {"key": decision.question.key, **decision.question.to_json()}
    return Row(
        id=decision.id,
        name=decision.state[:200],
        tags=(decision.question.key,),
        messages=(
            ("system", json.dumps(question, sort_keys=True)),
            ("user", decision.state),
            ("assistant", json.dumps(answer, sort_keys=True)),
        ),
    )


def from_row(row: Row) -> Decision:
    (_, question), (_, state), (_, answer) = row.messages
    q, a = json.loads(question), json.loads(answer)
    return Decision(
        state,
        Question(q["key"], q["type"], q["instructions"], tuple(q["criteria"])),
        tuple(float(v) for v in a["target"]),
        a.get("group", ""),
        a.get("lang", ""),
    )


def held_out_row(row: Row) -> bool:
    """Whether a decision carried as a chat is in the holdout (by its state, the user's)."""
    return held_out(row.messages[1][1])


def build_snapshot(rows: Sequence[Decision]) -> datasets.Snapshot:
    """The rows' snapshot, the holdout frozen in it by state."""
    return datasets.build_snapshot([to_row(r) for r in rows], "assistant_only", held_out_row)


def snapshot(rows: Sequence[Decision]) -> tuple[bytes, str]:
    """The snapshot's bytes and sha256."""
    made = build_snapshot(rows)
    return made.data, made.sha256


def read_snapshot(data: bytes) -> list[tuple[Decision, str]]:
    """The rows of a snapshot and their frozen splits (`train` or `eval`)."""
    return [(from_row(row), split) for row, split in datasets.read_snapshot(data)]
