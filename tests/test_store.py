"""The store contract on a real SQLite file: append, read, seq, idempotency, limits, guards.

Contents follow eventsourcing's recorder tests (``eventsourcing/tests/persistence.py``): empty
append, duplicate key, atomic batch, concurrent writers, readers never seeing a gap.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail import events
from agenttrail.codec import encode_payload
from agenttrail.errors import (
    AppendOnlyViolation,
    InputError,
    PayloadError,
    PayloadTooLarge,
    SessionExists,
    SessionNotFound,
)
from agenttrail.store import Appended, LogStore, NewEvent, NewSession, open_store


def test_a_new_session_is_empty_and_reads_nothing(store: LogStore) -> None:
    session = store.create_session(NewSession(title="t", agent="a", user="u", workspace="/w"))
    assert session.head_seq == 0
    assert session.head_hash == bytes(32)
    assert list(store.read(session.id)) == []
    assert store.append_batch(session.id, []) == []
    assert [s.id for s in store.sessions()] == [session.id]


def test_appends_get_seq_1_2_3_and_read_back_in_order(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    payloads = [events.message("user", f"m{i}") for i in range(5)]
    seqs = [store.append(sid, p).seq for p in payloads]
    assert seqs == [1, 2, 3, 4, 5]
    read = list(store.read(sid))
    assert [e.seq for e in read] == seqs
    assert [e.payload for e in read] == payloads
    assert [e.seq for e in store.read(sid, after_seq=2, limit=2)] == [3, 4]
    assert store.get_session(sid).head_seq == 5
    assert store.get_session(sid).head_hash == read[-1].hash


def test_read_pages_through_more_rows_than_one_page(store: LogStore) -> None:
    from agenttrail.store.sqlite import READ_PAGE_ROWS

    sid = store.create_session(NewSession()).id
    n = READ_PAGE_ROWS * 2 + 7
    store.append_batch(sid, [NewEvent({"type": "x", "i": i}) for i in range(n)])
    assert [e.payload["i"] for e in store.read(sid)] == list(range(n))
    assert len(list(store.read(sid, after_seq=5, limit=READ_PAGE_ROWS + 3))) == READ_PAGE_ROWS + 3


def test_unknown_payload_shapes_come_back_byte_identical(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    odd = {"kind": "from-a-newer-server", "nested": {"z": [1, 2.5, None, True], "a": "ü"}}
    store.append(sid, odd)
    event = next(store.read(sid))
    assert event.payload == odd
    assert event.data == encode_payload(odd)
    assert event.type is None


def test_idempotent_append_returns_the_first_seq_and_writes_nothing(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    first = store.append(sid, events.message("user", "hi"), key="client-1")
    again = store.append(sid, events.message("user", "hi"), key="client-1")
    assert (first.seq, first.duplicate) == (1, False)
    assert (again.seq, again.duplicate, again.hash) == (1, True, first.hash)
    assert [e.seq for e in store.read(sid)] == [1]
    batch = store.append_batch(
        sid, [NewEvent({"type": "x"}, key="k"), NewEvent({"type": "x"}, key="k")]
    )
    assert [(r.seq, r.duplicate) for r in batch] == [(2, False), (2, True)]


def test_a_batch_is_atomic(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    with pytest.raises(PayloadError, match=r"payload\.bad"):
        store.append_batch(sid, [NewEvent({"type": "ok"}), NewEvent({"bad": (1, 2)})])
    assert list(store.read(sid)) == []
    with pytest.raises(InputError, match="created_at"):
        store.append_batch(sid, [NewEvent({"type": "ok"}), NewEvent({"type": "x"}, "yesterday")])
    assert store.get_session(sid).head_seq == 0


def test_append_batch_creates_the_session_in_the_same_transaction(store: LogStore) -> None:
    created = NewSession(title="imported", agent="claude-code")
    results = store.append_batch("s-1", [NewEvent({"type": "x"})], create=created)
    assert [r.seq for r in results] == [1]
    assert store.get_session("s-1").title == "imported"
    with pytest.raises(SessionNotFound):
        store.append_batch("s-2", [NewEvent({"type": "x"})])
    with pytest.raises(SessionExists):
        store.create_session(NewSession(id="s-1"))


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ([1, 2], "mapping"),
        ({"t": (1, 2)}, r"payload\.t"),
        ({"t": {1: "a"}}, "key 1"),
        ({"t": float("nan")}, "NaN"),
        ({"t": [b"bytes"]}, r"payload\.t\[0\]"),
    ],
)
def test_payloads_that_would_not_read_back_equal_are_refused(
    store: LogStore, payload: object, where: str
) -> None:
    sid = store.create_session(NewSession()).id
    with pytest.raises(PayloadError, match=where):
        store.append(sid, payload)  # type: ignore[arg-type]
    assert store.get_session(sid).head_seq == 0


def test_large_payloads_are_stored_whole_and_the_limit_is_named(db_path: Path) -> None:
    big = "x" * (2 * 1024 * 1024)
    with open_store(db_path) as store:
        sid = store.create_session(NewSession()).id
        store.append(sid, events.tool_result("c1", "read_file", output=big))
        store.append(sid, events.tool_result("c2", "echo", output="0123456789"))
        outputs = [e.payload["output"] for e in store.read(sid)]
        assert outputs == [big, "0123456789"]
    with open_store(db_path, max_payload_bytes=1024 * 1024) as small:
        with pytest.raises(PayloadTooLarge, match="limit of 1,048,576 bytes"):
            small.append(sid, events.tool_result("c3", "read_file", output=big))
        assert small.get_session(sid).head_seq == 2


def test_the_payload_limit_comes_from_the_environment(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTTRAIL_MAX_PAYLOAD_BYTES", "100")
    with open_store(db_path) as store:
        assert store.max_payload_bytes == 100
        sid = store.create_session(NewSession()).id
        with pytest.raises(PayloadTooLarge, match="limit of 100 bytes"):
            store.append(sid, {"type": "x", "text": "y" * 200})


def test_lone_surrogates_and_other_hard_text_read_back_equal(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    texts = ["café \udc81 done", "\ud800", "nul\x00byte", "emoji 👩‍💻 rtl שלום", "\udfff\ud800"]
    for text in texts:
        store.append(sid, events.message("user", text, tag={text: text}))
    assert [e.payload["content"] for e in store.read(sid)] == texts
    assert [e.payload["tag"] for e in store.read(sid)] == [{t: t} for t in texts]


# -- the database refuses changes (guard rails) ------------------------------------------------


def _raw(db_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(db_path, isolation_level=None)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE session_events SET payload = x'a0' WHERE seq = 1",
        "DELETE FROM session_events WHERE seq = 1",
        "INSERT OR REPLACE INTO session_events VALUES ('s', 1, 'x', x'a0', x'00')",
        "REPLACE INTO session_events VALUES ('s', 2, 'x', x'a0', x'00')",
        "INSERT INTO session_events VALUES ('s', 1, 'x', x'a0', x'00') "
        "ON CONFLICT DO UPDATE SET payload = excluded.payload",
        "INSERT INTO session_events VALUES ('s', 9, 'x', x'a0', x'00')",
        "UPDATE session_event_keys SET seq = 2",
        "DELETE FROM sessions",
        "INSERT OR REPLACE INTO sessions (id, created_at) VALUES ('s', 'x')",
        "UPDATE sessions SET head_seq = 0",
    ],
)
def test_the_database_refuses_to_change_stored_events(db_path: Path, statement: str) -> None:
    with open_store(db_path) as store:
        store.create_session(NewSession(id="s"))
        store.append("s", {"type": "x"}, key="k")
        store.append("s", {"type": "y"})
        before = [(e.seq, e.data, e.hash) for e in store.read("s")]
    conn = _raw(db_path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="agenttrail"):
            conn.execute(statement)
    finally:
        conn.close()
    with open_store(db_path) as store:
        assert [(e.seq, e.data, e.hash) for e in store.read("s")] == before
        assert store.get_session("s").head_seq == 2


def test_a_refusal_reaches_callers_as_an_agenttrail_error(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    store.append(sid, {"type": "x"})
    conn = store._conn  # type: ignore[attr-defined]
    with pytest.raises(AppendOnlyViolation, match="append-only"), store._translate():  # type: ignore[attr-defined]
        conn.execute("DELETE FROM session_events")


def test_a_file_that_is_not_a_log_is_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"\x00\xffnot sqlite at all" * 100)
    with pytest.raises(InputError, match="not an agenttrail database"):
        open_store(garbage)
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(InputError, match="not an agenttrail log"):
        open_store(other)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="not an agenttrail database"):
        open_store(empty, create=False)  # reading never turns a file into a log
    assert empty.read_bytes() == b""
    with pytest.raises(InputError, match="no agenttrail database"):
        open_store(tmp_path / "missing.db", create=False)


def test_database_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store(f"sqlite:///{tmp_path}/u.db") as store:
        assert store.url.endswith("/u.db")
    monkeypatch.setenv("AGENTTRAIL_DATABASE_URL", f"sqlite:///{tmp_path}/env.db")
    with open_store() as store:
        assert store.url.endswith("/env.db")
    with pytest.raises(InputError, match="unknown scheme"):
        open_store("mysql://x/y")


# -- concurrency: gapless, unique seq --------------------------------------------------------


def test_threads_sharing_a_store_never_gap_or_duplicate_seq(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    seen: list[int] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        for i in range(50):
            seq = store.append(sid, {"type": "x", "writer": n, "i": i}).seq
            with lock:
                seen.append(seq)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == list(range(1, 401))
    assert [e.seq for e in store.read(sid)] == list(range(1, 401))


def _process_writer(db: str, sid: str, n: int, count: int) -> None:
    with open_store(db) as store:

        def one_thread(t: int) -> None:
            for i in range(count):
                store.append(sid, {"type": "x", "p": n, "t": t, "i": i})

        threads = [threading.Thread(target=one_thread, args=(t,)) for t in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def test_processes_and_threads_appending_to_one_session_never_gap(db_path: Path) -> None:
    with open_store(db_path) as store:
        sid = store.create_session(NewSession()).id
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_process_writer, args=(str(db_path), sid, n, 40)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    with open_store(db_path) as store:
        got = list(store.read(sid))
        assert [e.seq for e in got] == list(range(1, 4 * 2 * 40 + 1))
        writers = {(e.payload["p"], e.payload["t"], e.payload["i"]) for e in got}
        assert len(writers) == 320
        from agenttrail.chain import verify

        assert verify(store)[0].ok


# -- properties (Hypothesis) ---------------------------------------------------------------

_settings = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_settings
@given(
    plan=st.lists(
        st.lists(st.tuples(st.integers(1, 5), st.booleans()), min_size=1, max_size=6),
        min_size=2,
        max_size=5,
    )
)
def test_seq_stays_gapless_and_unique_under_concurrent_batches(
    plan: list[list[tuple[int, bool]]],
) -> None:
    # Each thread appends batches of random size; some events reuse an idempotency key that
    # another thread may already have written, so some appends are duplicates.
    with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp) / "t.db") as store:
        sid = store.create_session(NewSession()).id
        results: list[Appended] = []
        lock = threading.Lock()

        def writer(n: int, batches: list[tuple[int, bool]]) -> None:
            for size, shared in batches:
                batch = [
                    NewEvent({"type": "x", "w": n, "i": i}, key=f"shared-{i}" if shared else None)
                    for i in range(size)
                ]
                got = store.append_batch(sid, batch)
                with lock:
                    results.extend(got)

        threads = [threading.Thread(target=writer, args=(n, b)) for n, b in enumerate(plan)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        written = sorted(r.seq for r in results if not r.duplicate)
        assert written == list(range(1, len(written) + 1))
        assert [e.seq for e in store.read(sid)] == written
        assert store.get_session(sid).head_seq == len(written)


@_settings
@given(texts=st.lists(st.text(st.characters(codec=None, categories=None)), min_size=1, max_size=5))
def test_any_text_round_trips_through_the_store(texts: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp) / "t.db") as store:
        sid = store.create_session(NewSession()).id
        store.append_batch(sid, [NewEvent(events.message("user", t, note={t: [t]})) for t in texts])
        got = [e.payload for e in store.read(sid)]
        assert [p["content"] for p in got] == texts
        assert [p["note"] for p in got] == [{t: [t]} for t in texts]
