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


# A row that is not a chat is refused with its line, what is wrong with it (`problem`, a
# stable name, and a sentence in the platform's own words) and where in the row (a column,
# a field's path): never the row's text, so a refusal cannot echo what a caller wrote.
CHAT_FORMAT = '{"messages": [{"role": "user", "content": "..."}, ...]}'


def _unusable(line: int, what: str, problem: str, **where: str) -> DatasetError:
    return DatasetError(
        f"Line {line} {what}",
        reason="TRAINING_DATASET_UNUSABLE",
        field="dataset.uri",
        metadata={"line": str(line), "problem": problem, **where},
    )


def _document(line: int, raw: bytes) -> dict[str, object]:
    """A line as a JSON object, or the refusal naming the first position that is not."""
    try:
        doc = json.loads(raw)
    except UnicodeDecodeError as exc:
        byte = str(exc.start + 1)
        what = f"is not UTF-8 text: its first bad byte is byte {byte}."
        raise _unusable(line, what, "not_utf8", byte=byte) from None
    except json.JSONDecodeError as exc:
        what = f"is not valid JSON: its first error is at column {exc.colno}."
        raise _unusable(line, what, "invalid_json", column=str(exc.colno)) from None
    except (ValueError, RecursionError):  # a number of thousands of digits, or deep nesting
        what = "holds JSON past what a row may: a number too long or nesting too deep."
        raise _unusable(line, what, "json_too_large") from None
    if not isinstance(doc, dict):
        raise _unusable(
            line, f"is not a JSON object; a row is one chat, {CHAT_FORMAT}.", "not_object"
        )
    return doc


def _no_messages(line: int, doc: dict[str, object]) -> DatasetError:
    if "prompt" in doc or "completion" in doc:
        return _unusable(
            line,
            "is a prompt/completion row, not the chat format: write each as "
            '{"messages": [{"role": "user", "content": PROMPT}, '
            '{"role": "assistant", "content": COMPLETION}]}.',
            "prompt_completion",
            row_field="messages",
        )
    what = f"has no messages list; a row is one chat, {CHAT_FORMAT}."
    return _unusable(line, what, "no_messages", row_field="messages")


def _message(line: int, index: int, message: object) -> tuple[str, str]:
    at = f"messages[{index}]"
    if not isinstance(message, dict):
        what = f"has {at} that is not an object with a role and a content."
        raise _unusable(line, what, "message_not_object", row_field=at)
    if message.get("role") not in ROLES:
        what = f"has {at}.role that is not one of {', '.join(ROLES)}."
        raise _unusable(
            line, what, "unknown_role", row_field=f"{at}.role", supported=",".join(ROLES)
        )
    content = message.get("content", "")
    if not isinstance(content, str):
        what = (
            f"has {at}.content that is not a string: "
            "a message's content is its text, not a list of parts."
        )
        raise _unusable(line, what, "content_not_text", row_field=f"{at}.content")
    return message["role"], content


def _tags(line: int, doc: dict[str, object]) -> tuple[str, ...]:
    tags = doc.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise _unusable(
            line, "has tags that are not a list of strings.", "tags_not_text", row_field="tags"
        )
    return tuple(tags)


def parse_jsonl(data: bytes) -> list[Row]:
    """Chat rows from JSON Lines; a line that is not a chat is refused naming its line and
    what is wrong with it, never quoting it."""
    rows: list[Row] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        doc = _document(number, raw)
        listed = doc.get("messages")
        if not isinstance(listed, list):
            raise _no_messages(number, doc)
        messages = [_message(number, i, m) for i, m in enumerate(listed)]
        tags = _tags(number, doc)
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
        rows.append(Row(identity, name[:200], tags, tuple(messages)))
        if len(rows) > MAX_ROWS:
            what = f"is past the {MAX_ROWS:,} rows a dataset holds at most."
            raise _unusable(number, what, "too_many_rows")
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


# The refusals that say a selection cannot train at all; an estimate answers them as
# `is_trainable: false` with these reasons, a create refuses with them.
UNTRAINABLE = frozenset({"TRAINING_DATASET_EMPTY", "TRAINING_DATASET_UNUSABLE"})


def select(rows: Sequence[Row], tags: Iterable[str]) -> list[Row]:
    """The union of rows carrying any of `tags`; all rows when none are given."""
    wanted = list(dict.fromkeys(tags))
    if not wanted:
        return list(rows)
    known = {tag for row in rows for tag in row.tags}
    if any(tag not in known for tag in wanted):
        raise DatasetError(
            "names a tag no row carries",
            reason="TRAINING_DATASET_SELECTION_INVALID",
            field="dataset.tags",
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
            "The dataset selection holds no rows.", reason="TRAINING_DATASET_EMPTY", field="dataset"
        )
    if not found.is_trainable:
        raise DatasetError(
            "The dataset selection holds no trainable text.",
            reason="TRAINING_DATASET_UNUSABLE",
            field="dataset",
        )
    if system_prompt:
        conflicts = sum(r.has_system() for r in rows)
        if conflicts:
            raise DatasetError(
                f"{conflicts} selected rows carry their own system message; "
                "system_prompt would add a second.",
                reason="TRAINING_DATASET_CONFLICT",
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


# An example sits on the eval side when its identity's hash falls in the lowest
# `EVAL_PERCENT` of the hash space: a property of the example alone, so rows added later
# take the side their identity gives them and no row already placed ever changes side.
_HASH_SPACE = 1 << 64
_EVAL_BOUND = _HASH_SPACE * planning.EVAL_PERCENT // 100


def identity_hash(identity: str) -> int:
    """Where an example's identity falls in the hash space (the first 64 bits of its
    sha256)."""
    return int.from_bytes(hashlib.sha256(identity.encode()).digest()[:8], "big")


def on_eval_side(identity: str) -> bool:
    """Whether an example with this identity is held out for evaluation once its
    selection has an eval set: its identity alone decides."""
    return identity_hash(identity) < _EVAL_BOUND


def eval_ids(rows: Sequence[Row], loss_mask: str) -> set[str]:
    """The eval split of the product API (`002_…`): the trainable rows whose identity puts
    them on the eval side, so every job on unchanged data holds out the same examples and
    growth never moves one. The policy's bounds hold on top: a selection too small for
    the formula's 8 (under 160 trainable rows), or whose eval side holds fewer than 8,
    trains on everything; past 512 the side keeps its 512 lowest hashes."""
    trainable = [row for row in rows if row.trainable(loss_mask)]
    if planning.eval_count(len(trainable)) == 0:
        return set()
    side = sorted((identity_hash(row.id), row.id) for row in trainable if on_eval_side(row.id))
    if len(side) < planning.MIN_EVAL:
        return set()
    return {identity for _, identity in side[: planning.MAX_EVAL]}


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
