"""What only the SQLite backend has: the file, its pragmas, its guard triggers, and the
translation of ``sqlite3`` errors by result code. The contract both backends keep is in
``test_store_contract.py``.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agenttrail.errors import AppendOnlyViolation, InputError, StoreError
from agenttrail.log.chain import verify
from agenttrail.log.store import open_store
from agenttrail.log.store.sqlite import ROWS_PER_INSERT, sqlite_error
from agenttrail.model import NewEvent, NewSession

# -- the database refuses changes (guard rails) ------------------------------------------------


def _raw(db_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(db_path, isolation_level=None)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE session_events SET payload = x'a0' WHERE seq = 1",
        "DELETE FROM session_events WHERE seq = 1",
        "INSERT OR REPLACE INTO session_events VALUES ('s', 1, 'x', x'a0', x'00', NULL, NULL)",
        "REPLACE INTO session_events VALUES ('s', 2, 'x', x'a0', x'00', NULL, NULL)",
        "INSERT INTO session_events VALUES ('s', 1, 'x', x'a0', x'00', NULL, NULL) "
        "ON CONFLICT DO UPDATE SET payload = excluded.payload",
        "INSERT INTO session_events VALUES ('s', 9, 'x', x'a0', x'00', NULL, NULL)",
        # one statement of several rows, as an append writes them: the gap is refused
        "INSERT INTO session_events VALUES ('s', 3, 'x', x'a0', x'00', NULL, NULL), "
        "('s', 5, 'x', x'a0', x'00', NULL, NULL)",
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


def test_an_append_longer_than_one_insert_statement_keeps_seq_and_chain(db_path: Path) -> None:
    # An append writes ROWS_PER_INSERT rows per statement; a head that is not a multiple of
    # it puts each statement's first row mid-page.
    count = 2 * ROWS_PER_INSERT + 3
    with open_store(db_path) as store:
        store.create_session(NewSession(id="s"))
        store.append("s", {"type": "x", "n": 0})
        results = store.append_batch(
            "s", [NewEvent({"type": "x", "n": n}) for n in range(1, count)]
        )
        assert [r.seq for r in results] == list(range(2, count + 1))
        read = list(store.read("s"))
        assert [(e.seq, e.payload["n"]) for e in read] == [(n + 1, n) for n in range(count)]
        assert [e.hash for e in read[1:]] == [r.hash for r in results]
        (verdict,) = verify(store, ["s"])
        assert (verdict.ok, verdict.events) == (True, count)


# In a fresh interpreter: sqlite3's adapters are the process's, registered on import.
_ADAPTER_OF_BYTES = """
import sqlite3, sys
def own(value):
    return value.hex()
if sys.argv[1] == "own":
    sqlite3.register_adapter(bytes, own)
import agenttrail.log.store.sqlite
adapter = sqlite3.adapters.get((bytes, sqlite3.PrepareProtocol))
value = b"\\x00\\xff payload"
stored = sqlite3.connect(":memory:").execute("SELECT ?", (value,)).fetchone()[0]
print(adapter is own, adapter is not None and adapter(value) is value, repr(stored))
"""


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        # the store binds bytes through the registry's identity: no miss per value
        ("none", "False True b'\\x00\\xff payload'"),
        # a program's own adapter for bytes is left as it was, and still applies
        ("own", "True False '00ff207061796c6f6164'"),
    ],
)
def test_bytes_are_bound_through_an_identity_adapter_unless_the_program_has_one(
    program: str, expected: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _ADAPTER_OF_BYTES, program],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == expected


def test_a_log_file_is_in_wal_mode_with_full_sync_and_16_kib_pages(db_path: Path) -> None:
    # docs/log-format.md, Tables: WAL with synchronous = FULL; 16 KiB pages (sqlite.py says why).
    with open_store(db_path) as store:
        conn = store._conn  # type: ignore[attr-defined]
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert conn.execute("PRAGMA user_version").fetchone() == (6,)
    raw = _raw(db_path)
    try:
        assert raw.execute("PRAGMA page_size").fetchone() == (16384,)
    finally:
        raw.close()


def test_a_refusal_reaches_callers_as_an_agenttrail_error(db_path: Path) -> None:
    with open_store(db_path) as store:
        sid = store.create_session(NewSession()).id
        store.append(sid, {"type": "x"})
        translate = store._translate  # type: ignore[attr-defined]
        conn = store._conn  # type: ignore[attr-defined]
        with pytest.raises(AppendOnlyViolation, match="append-only"), translate():
            conn.execute("DELETE FROM session_events")
        assert [e.seq for e in store.read(sid)] == [1]


def test_sqlite_errors_are_translated_by_result_code_not_by_message(db_path: Path) -> None:
    # Any guard trigger's RAISE(ABORT, …) is SQLITE_CONSTRAINT_TRIGGER, whatever it says; a
    # message that merely mentions "append-only" is not a refusal.
    conn = _raw(db_path)
    try:
        conn.execute("CREATE TABLE t (x)")
        conn.execute(
            "CREATE TRIGGER t_guard BEFORE INSERT ON t "
            "BEGIN SELECT RAISE(ABORT, 'some other words'); END"
        )
        errors: list[sqlite3.Error] = []
        for statement in ("INSERT INTO t VALUES (1)", 'SELECT * FROM "append-only"'):
            with pytest.raises(sqlite3.Error) as raised:
                conn.execute(statement)
            errors.append(raised.value)
    finally:
        conn.close()
    refused, missing = (sqlite_error(db_path, e) for e in errors)
    assert type(refused) is AppendOnlyViolation
    assert str(refused) == f"{db_path}: some other words"
    assert type(missing) is StoreError
    assert str(missing) == f"{db_path}: no such table: append-only"
    not_a_database = sqlite3.DatabaseError("file is not a database")
    assert type(sqlite_error(db_path, not_a_database)) is StoreError  # no result code


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
