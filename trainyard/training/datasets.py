"""Datasets: the built-in fixture, chat JSON Lines an org uploaded, selection by tags,
the checks a create makes, and the immutable snapshot a run reads.

Rows are chats, `{"messages": [{"role", "content"}], "id"?, "name"?, "tags"?}`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence

from trainyard.training import planning

ROLES = ("system", "user", "assistant")
MAX_ROWS = 1_000_000
FIXTURE_ROWS = 160


@dataclasses.dataclass(frozen=True)
class Row:
    id: str
    name: str
    tags: tuple[str, ...]
    messages: tuple[tuple[str, str], ...]

    def has_system(self) -> bool:
        return any(role == "system" for role, _ in self.messages)

    def trainable(self, loss_mask: str) -> bool:
        """Whether the row gives the loss anything: non-empty assistant text (or any
        non-empty text when the whole sequence is trained)."""
        return any(
            content.strip() and (loss_mask == "full_sequence" or role == "assistant")
            for role, content in self.messages
        )

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "tags": list(self.tags),
            "messages": [{"role": r, "content": c} for r, c in self.messages],
        }


class DatasetError(ValueError):
    """Rows a job cannot be made of. `reason` is the contract's error reason, `field` the
    field at fault; `metadata` holds safe values only (a line number, a count): the
    message never quotes a row."""

    def __init__(
        self, message: str, *, reason: str, field: str, metadata: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.reason, self.field, self.metadata = reason, field, dict(metadata or {})


# -- the fixture ---------------------------------------------------------------------------


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))


def fixture_rows(count: int = FIXTURE_ROWS) -> list[Row]:
    """`fixture:synthetic-tiny-v1`: four string tasks a small model learns in minutes,
    the same rows on every machine (made once a process: every create and preparation
    of a fixture job reads them)."""
    return list(_fixture_rows(count))


@functools.cache
def _fixture_rows(count: int) -> tuple[Row, ...]:
    rng = random.Random(20261129)
    tasks = {
        "reverse": ("Reverse: {w}", lambda w: w[::-1]),
        "upper": ("Uppercase: {w}", lambda w: w.upper()),
        "double": ("Say twice: {w}", lambda w: f"{w} {w}"),
        "length": ("Count letters: {w}", lambda w: str(len(w))),
    }
    rows = []
    for i in range(count):
        tag = list(tasks)[i % len(tasks)]
        prompt, answer = tasks[tag]
        word = _word(rng)
        rows.append(
            Row(
                id=f"fx-{i + 1:04d}",
                name=f"{tag} {i // len(tasks) + 1}",
                tags=(tag,),
                messages=(("user", prompt.format(w=word)), ("assistant", answer(word))),
            )
        )
    return tuple(rows)


# -- uploaded rows -------------------------------------------------------------------------


def _unusable(line: int) -> DatasetError:
    return DatasetError(
        "The dataset has a row that is not a chat.",
        reason="DATASET_UNUSABLE",
        field="dataset.uri",
        metadata={"line": str(line)},
    )


def parse_jsonl(data: bytes) -> list[Row]:
    """Chat rows from JSON Lines; a line that is not a chat names its line number only."""
    rows: list[Row] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise _unusable(number) from None
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
            raise _unusable(number)
        messages = []
        for message in doc["messages"]:
            if (
                not isinstance(message, dict)
                or message.get("role") not in ROLES
                or not isinstance(message.get("content", ""), str)
            ):
                raise _unusable(number)
            messages.append((message["role"], message.get("content", "")))
        tags = doc.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise _unusable(number)
        identity = doc.get("id")
        if not isinstance(identity, str) or not identity or len(identity) > 128:
            identity = "r-" + hashlib.sha256(json.dumps(messages).encode()).hexdigest()[:16]
        if identity in seen:  # the same chat twice stays two examples, with stable ids
            seen[identity] += 1
            identity = f"{identity}-{seen[identity]}"
        else:
            seen[identity] = 1
        name = doc.get("name")
        if not isinstance(name, str) or not name:
            name = next((c for r, c in messages if r == "user"), "")[:80]
        rows.append(Row(identity, name[:200], tuple(tags), tuple(messages)))
        if len(rows) > MAX_ROWS:
            raise _unusable(number)
    return rows


# -- selection and the checks of a create --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Stats:
    selected_chats: int
    selected_messages: int
    trainable_chats: int
    nonempty_text_messages: int

    @property
    def is_trainable(self) -> bool:
        return self.trainable_chats > 0


def select(rows: Sequence[Row], tags: Iterable[str]) -> list[Row]:
    """The union of rows carrying any of `tags`; all rows when none are given."""
    wanted = list(dict.fromkeys(tags))
    if not wanted:
        return list(rows)
    known = {tag for row in rows for tag in row.tags}
    if any(tag not in known for tag in wanted):
        raise DatasetError(
            "names a tag no row carries", reason="DATASET_SELECTION_INVALID", field="dataset.tags"
        )
    chosen = set(wanted)
    return [row for row in rows if chosen.intersection(row.tags)]


def stats(rows: Sequence[Row], loss_mask: str) -> Stats:
    return Stats(
        selected_chats=len(rows),
        selected_messages=sum(len(r.messages) for r in rows),
        trainable_chats=sum(r.trainable(loss_mask) for r in rows),
        nonempty_text_messages=sum(bool(c.strip()) for r in rows for _, c in r.messages),
    )


def check(rows: Sequence[Row], *, system_prompt: str, loss_mask: str) -> Stats:
    """The dataset admission of a create: empty, unusable, or in conflict with a prompt."""
    found = stats(rows, loss_mask)
    if found.selected_chats == 0:
        raise DatasetError(
            "The dataset selection holds no rows.", reason="DATASET_EMPTY", field="dataset"
        )
    if not found.is_trainable:
        raise DatasetError(
            "The dataset selection holds no trainable text.",
            reason="DATASET_UNUSABLE",
            field="dataset",
        )
    if system_prompt:
        conflicts = sum(r.has_system() for r in rows)
        if conflicts:
            raise DatasetError(
                f"{conflicts} selected rows carry their own system message; "
                "system_prompt would add a second.",
                reason="DATASET_CONFLICT",
                field="dataset.system_prompt",
                metadata={"conflicts": str(conflicts)},
            )
    return found


# -- the snapshot --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The immutable copy a run reads: the selected rows in order, each with its frozen
    split, as canonical JSON Lines named by their sha256."""

    items: list[tuple[Row, str]]
    data: bytes
    sha256: str

    @property
    def message_count(self) -> int:
        return sum(len(row.messages) for row, _ in self.items)


def eval_ids(rows: Sequence[Row], loss_mask: str) -> set[str]:
    """The eval split: among trainable rows, the `eval_examples` whose identity hashes
    lowest. Membership depends on the rows alone, so every job on unchanged data holds
    out the same examples."""
    trainable = [row for row in rows if row.trainable(loss_mask)]
    count = planning.eval_count(len(trainable))
    ranked = sorted(trainable, key=lambda row: hashlib.sha256(row.id.encode()).hexdigest())
    return {row.id for row in ranked[:count]}


def read_snapshot(data: bytes) -> list[tuple[Row, str]]:
    """A snapshot's rows and their frozen splits, as `build_snapshot` wrote them."""
    items = []
    for line in data.splitlines():
        doc = json.loads(line)
        messages = tuple((m["role"], m["content"]) for m in doc["messages"])
        row = Row(doc["id"], doc["name"], tuple(doc["tags"]), messages)
        items.append((row, str(doc["split"])))
    return items


def build_snapshot(
    rows: Sequence[Row], loss_mask: str, held_out: Callable[[Row], bool] | None = None
) -> Snapshot:
    """The snapshot with its eval split: the `held_out` rows, or by default the product
    API's split (`eval_ids`)."""
    if held_out is None:
        ids = eval_ids(rows, loss_mask)
        held_out = lambda row: row.id in ids  # noqa: E731
    items = [(row, "eval" if held_out(row) else "train") for row in rows]
    lines = [
        json.dumps({**row.to_json(), "split": split}, sort_keys=True, separators=(",", ":"))
        for row, split in items
    ]
    data = ("\n".join(lines) + "\n").encode()
    return Snapshot(items=items, data=data, sha256=hashlib.sha256(data).hexdigest())
