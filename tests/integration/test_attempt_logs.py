"""An attempt's log as stored and read, on SQLite and PostgreSQL: pieces appended in order
read back whole by bytes, lines and tail, each part placed in the whole; past the cap the
end is kept; a job's tombstone takes its logs."""

from __future__ import annotations

import pytest

from services.core import attempt_logs, lifecycle
from services.core.states import JobStatus, PreparationStatus
from services.core.store import Store, utcnow
from services.core.tables import JobRow

TEXT = (
    "step 1\nstep 2 é\n" + "x" * 5000 + "\nTraceback (most recent call last):\nRuntimeError: boom\n"
)


def job(store: Store, job_id: str = "job_0000000000000001") -> str:
    now = utcnow()
    with store.unit() as session:
        session.add(
            JobRow(
                id=job_id, org="acme", project="p", number=1, status=JobStatus.FAILED,
                spec={}, plan={}, preparation={"status": PreparationStatus.VERIFIED},
                attempt_count=1, event_seq=0, create_time=now, update_time=now,
            )
        )  # fmt: skip
    return job_id


def write(store: Store, job_id: str, text: str, attempt: int = 1) -> None:
    with store.unit() as session:
        row = session.get(JobRow, job_id)
        assert row is not None
        for piece in (text[i : i + 700] for i in range(0, len(text), 700)):
            attempt_logs.append(session, row, attempt, piece)


def read(store: Store, job_id: str, how: str, *args: int, attempt: int = 1) -> attempt_logs.Part:
    with store.unit(write=False) as session:
        return getattr(attempt_logs.Log(session, job_id, attempt), how)(*args)  # type: ignore[no-any-return]


def test_a_log_reads_back_whole_by_bytes_lines_and_tail(store: Store) -> None:
    job_id = job(store)
    write(store, job_id, TEXT[:3000])
    write(store, job_id, TEXT[3000:])  # a second report goes on where the first ended
    whole = TEXT.encode()
    assert read(store, job_id, "bytes", 0, 1 << 20).text == TEXT
    tail = read(store, job_id, "tail", 2)
    assert tail.text == "Traceback (most recent call last):\nRuntimeError: boom\n"
    assert (tail.offset, tail.next_offset, tail.size) == (
        len(whole) - len(tail.text),
        len(whole),
        len(whole),
    )
    assert tail.first_line == 4
    second = read(store, job_id, "lines", 2, 1)
    assert (second.text, second.offset, second.first_line) == ("step 2 é\n", 7, 2)
    # A byte range never splits a character: `é` is bytes 14 and 15.
    cut = read(store, job_id, "bytes", 15, 4)
    assert (cut.text, cut.offset, cut.first_line) == ("\nxxx", 16, 2)
    assert read(store, job_id, "bytes", 7, 8).text == "step 2 "
    past = read(store, job_id, "bytes", len(whole), 10)
    assert (past.text, past.next_offset) == ("", len(whole))
    # Another attempt's log is its own.
    assert read(store, job_id, "tail", 5, attempt=2).text == ""
    with store.unit(write=False) as session:
        assert attempt_logs.sizes(session, job_id) == {1: len(whole)}


def test_past_the_cap_a_log_keeps_its_end(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attempt_logs, "MAX_LOG_BYTES", 2000)
    job_id = job(store)
    write(store, job_id, TEXT)
    whole = read(store, job_id, "bytes", 0, 1 << 20)
    assert whole.start > 0 and whole.offset == whole.start and TEXT.endswith(whole.text)
    assert len(TEXT.encode()) - whole.start <= 2000 + 700 * 2
    assert read(store, job_id, "tail", 1).text == "RuntimeError: boom\n"


def test_a_jobs_tombstone_takes_its_logs(store: Store) -> None:
    job_id = job(store)
    write(store, job_id, TEXT)
    with store.unit() as session:
        row = session.get(JobRow, job_id)
        assert row is not None
        lifecycle.tombstone(session, row)
    assert read(store, job_id, "bytes", 0, 1 << 20).size == 0
