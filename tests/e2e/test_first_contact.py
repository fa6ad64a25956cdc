"""What a new user meets on first contact, shown as they meet it: the REST answer, the
CLI's output."""

from __future__ import annotations

import hashlib
import re
import secrets
from pathlib import Path

import httpx

from tests.support import StackProcess, bearer, reason

# -- issue 27 item 3: dataset errors say what is wrong --------------------------------------

CHAT = (
    b'{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]}\n'
)
ROLES = "system, user, assistant"
# Each bad file a newcomer writes, the detail it is refused with and the refusal's metadata:
# what is wrong, where, never the row's own text (the role `bot`, the words `Hi` or `Yo`).
BAD_FILES = {
    "cut.jsonl": (
        CHAT + b'{"messages": [{"role": "user", "content": "Hi',
        "Line 2 is not valid JSON: its first error is at column 43.",
        {"line": "2", "problem": "invalid_json", "column": "43"},
    ),
    "role.jsonl": (
        CHAT + CHAT.replace(b'"user"', b'"bot"'),
        f"Line 2 has messages[0].role that is not one of {ROLES}.",
        {"line": "2", "problem": "unknown_role", "row_field": "messages[0].role"},
    ),
    "parts.jsonl": (
        CHAT.replace(b'"Yo"', b'[{"type": "text", "text": "Yo"}]'),
        "Line 1 has messages[1].content that is not a string: a message's content is its "
        "text, not a list of parts.",
        {"line": "1", "problem": "content_not_text", "row_field": "messages[1].content"},
    ),
    "pairs.jsonl": (
        CHAT * 2 + b'{"prompt": "Hi", "completion": "Yo"}\n',
        'Line 3 is a prompt/completion row, not the chat format: write each as {"messages": '
        '[{"role": "user", "content": PROMPT}, {"role": "assistant", "content": COMPLETION}]}.',
        {"line": "3", "problem": "prompt_completion", "row_field": "messages"},
    ),
}
EMPTY = "The dataset holds no rows: each of its lines is to be one chat."


def _upload(api: httpx.Client, data: bytes) -> httpx.Response:
    """A dataset uploaded over REST as the README says: a grant, the PUT it presigns, and
    the confirmation that reads the bytes back (or the grant's refusal)."""
    digest = hashlib.sha256(data).hexdigest()
    grant = api.post(
        "/v1/train/artifacts",
        json={"kind": "dataset", "name": "rows.jsonl", "sha256": digest, "size": len(data)},
    )
    if grant.status_code != 200 or grant.json()["stored"]:
        return grant
    upload = grant.json()["upload"]
    assert httpx.put(upload["url"], content=data, headers=upload["headers"]).is_success
    return api.post(f"/v1/train/artifacts/{digest}/confirm", json={})


def _cli_lines(detail: str, metadata: dict[str, str]) -> list[str]:
    where = [f"{k}: {v}" for k, v in sorted(metadata.items())]
    if metadata.get("problem") == "unknown_role":
        where.append(f"supported: {ROLES}")
    return [
        f"error: TRAINING_DATASET_UNUSABLE: {detail}",
        "  " + "; ".join(["field: dataset.uri", *where]),
    ]


def test_a_file_that_is_not_chats_is_refused_saying_what_is_wrong_with_it(
    each_stack: StackProcess, tmp_path: Path
) -> None:
    key = each_stack.create_key(f"first-{secrets.token_hex(3)}", "member")
    api = httpx.Client(base_url=each_stack.url, headers=bearer(key), timeout=60)
    for name, (data, detail, metadata) in BAD_FILES.items():
        refused = _upload(api, data)
        assert (refused.status_code, reason(refused)) == (422, "training_dataset_unusable"), name
        problem = refused.json()
        assert (problem["detail"], problem["metadata"]) == (detail, metadata)
        named = ["system", "user", "assistant"] if metadata["problem"] == "unknown_role" else None
        assert problem.get("supported") == named
        assert not {"bot", "Hi", "Yo"} & set(refused.text.replace('"', " ").split())
        (tmp_path / name).write_bytes(data)
        done = each_stack.cli("artifacts", "upload", str(tmp_path / name), check=False, key=key)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr.splitlines() == _cli_lines(detail, metadata), name

    empty = _upload(api, b"")
    assert (empty.status_code, reason(empty)) == (422, "training_dataset_empty")
    assert empty.json()["detail"] == EMPTY
    blank = _upload(api, b"\n\n")
    assert (blank.status_code, reason(blank), blank.json()["detail"]) == (
        422,
        "training_dataset_empty",
        EMPTY,
    )
    (tmp_path / "empty.jsonl").write_bytes(b"")
    done = each_stack.cli(
        "artifacts", "upload", str(tmp_path / "empty.jsonl"), check=False, key=key
    )
    assert (done.returncode, done.stderr.splitlines()) == (
        1,
        [f"error: TRAINING_DATASET_EMPTY: {EMPTY}", "  field: size"],
    )
    assert api.get("/v1/train/artifacts").json().get("artifacts", []) == []  # none was kept


# -- issue 27 item 8: the ledger's sub-cent amounts, `artifacts ls`'s header ----------------


def test_the_ledger_shows_a_sub_cent_amount_to_its_last_digit(stack: StackProcess) -> None:
    org = f"cents-{secrets.token_hex(3)}"
    key = stack.create_key(org)
    stack.cli("admin", "credit", "--org", org, "--amount", "0.00004167", "--name", "tip")
    ledger = stack.cli("ledger", key=key).stdout.splitlines()
    assert [line.split()[2:] for line in ledger] == [
        ["credit", "$0.00004167", "-", "credit/tip"],
        ["credit", "$10.0000", "-", "credit/free"],
    ]


def test_artifacts_ls_prints_its_columns_under_a_header(
    stack: StackProcess, tmp_path: Path
) -> None:
    key = stack.create_key(f"ls-{secrets.token_hex(3)}")
    header = (
        f"{'sha256':<64}  kind       {'bytes':>12}  expires               pinned  "
        f"{'cents/month':>11}  name"
    )
    assert stack.cli("artifacts", "ls", key=key).stdout.splitlines() == [header]
    (tmp_path / "rows.jsonl").write_bytes(CHAT)
    stack.cli("artifacts", "upload", str(tmp_path / "rows.jsonl"), key=key)
    first, row = stack.cli("artifacts", "ls", key=key).stdout.splitlines()
    assert first == header
    digest, kind, size, expires, pinned, cents, name = row.split()
    assert (digest, kind, size, pinned, name) == (
        hashlib.sha256(CHAT).hexdigest(),
        "dataset",
        str(len(CHAT)),
        "no",
        "rows.jsonl",
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|kept", expires)
    assert float(cents) > 0
    titles, values = _spans(header), _spans(row)
    # Each value starts under its column's name; the size and cost, right-aligned, end under it.
    assert [values[i][0] for i in (0, 1, 3, 4, 6)] == [titles[i][0] for i in (0, 1, 3, 4, 6)]
    assert values[2][1] == titles[2][1] and values[5][1] == titles[5][1]


def _spans(line: str) -> list[tuple[int, int]]:
    return [found.span() for found in re.finditer(r"\S+", line)]
