"""Retention: whole sessions leave through the one sanctioned path, and leave a tombstone."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from agenttrail import Recorder
from agenttrail.errors import SessionExists, SessionNotFound
from agenttrail.log.retention import retain
from agenttrail.log.store import open_store
from agenttrail.model import NewSession, events
from tests.conftest import owner_connection, postgres_schema, run_cli
from tests.evidence.test_traces import _session
from tests.log.test_erase import _fts_blocks, _wal


def test_retain_removes_old_sessions_with_their_traces_and_leaves_tombstones(db_url: str) -> None:
    with open_store(db_url) as store:
        old = Recorder.start(store, session_id="old", started="2020-01-01T00:00:00.000000Z")
        old.append(events.message("user", "hi"), created_at="2020-01-01T00:00:01.000000Z")
        loan, _ = _session(store)  # today, with trace rows
        head = store.get_session("old").head_hash
        stones = retain(
            store, 365, reason="records schedule R-7", now=datetime(2026, 11, 29, tzinfo=UTC)
        )
        assert [(s.session_id, s.head_seq, s.head_hash) for s in stones] == [("old", 1, head)]
        assert "records schedule R-7" in stones[0].reason
        assert [s.id for s in store.sessions()] == [loan]
        assert list(store.read("old")) == [] and store.traces(loan)
        assert [t.session_id for t in store.tombstones()] == ["old"]
        with pytest.raises(SessionExists):  # a removed id is never reused
            store.create_session(NewSession(id="old"))
    assert run_cli("verify", "--db", db_url).returncode == 0


def test_the_database_refuses_any_other_removal(db_path: Path) -> None:
    with open_store(db_path) as store:
        sid, _ = _session(store)
    conn = sqlite3.connect(db_path, isolation_level=None)
    for statement in (
        "DELETE FROM session_events",
        "DELETE FROM trace_rows",
        "DELETE FROM sessions",
        "DELETE FROM session_event_keys",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="agenttrail"):
            conn.execute(statement)
    conn.execute(
        "INSERT INTO tombstones (session_id, head_seq, head_hash, deleted_at, reason) "
        "VALUES ('other', 0, x'00', 'now', 'test')"
    )
    for statement in ("DELETE FROM tombstones", "UPDATE tombstones SET reason = 'x'"):
        with pytest.raises(sqlite3.IntegrityError, match="tombstones are permanent"):
            conn.execute(statement)
    conn.close()
    with open_store(db_path) as store:
        assert store.get_session(sid).head_seq > 0


def test_postgresql_refuses_any_other_removal(postgres_url: str) -> None:
    with postgres_schema(postgres_url) as url:
        with open_store(url) as store:
            sid, _ = _session(store)
        with owner_connection(url) as conn:
            for statement in (
                "DELETE FROM session_events",
                "DELETE FROM trace_rows",
                "DELETE FROM sessions",
                "DELETE FROM session_event_keys",
                "TRUNCATE trace_rows",
            ):
                with pytest.raises(psycopg.errors.RestrictViolation, match="agenttrail"):
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO tombstones VALUES "
                "('other', 0, '\\x00', '2020-01-01T00:00:00.000000Z', 'test')"
            )
            for statement in (
                "DELETE FROM tombstones",
                "UPDATE tombstones SET reason = 'x'",
                "TRUNCATE tombstones",
            ):
                permanent = "tombstones are permanent"
                with pytest.raises(psycopg.errors.RestrictViolation, match=permanent):
                    conn.execute(statement)
            # The application's role may not even try; its one way is the retention function.
            conn.execute("SET ROLE agenttrail_writer")
            for statement in ("DELETE FROM session_events", "DELETE FROM tombstones"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
        with open_store(url) as store:
            assert store.get_session(sid).head_seq > 0
            stone = store.remove_session(sid, reason="records schedule R-7")
            assert (stone.session_id, stone.reason) == (sid, "records schedule R-7")
            assert [t.session_id for t in store.tombstones()] == ["other", sid]
            with pytest.raises(SessionNotFound):
                store.remove_session(sid, reason="again")


def test_the_retain_command(db_url: str) -> None:
    with open_store(db_url) as store:
        Recorder.start(store, session_id="s1").append(events.message("user", "x"))
    dry = run_cli("retain", "--older-than", "0", "--dry-run", "--db", db_url)
    assert dry.returncode == 0 and dry.stdout == "would remove s1  1 event\n"
    assert dry.stderr == "1 session would be removed\n"
    # none due: said so, not silence (a new user could not tell it had looked)
    none = run_cli("retain", "--older-than", "365", "--dry-run", "--db", db_url)
    assert (none.stdout, none.stderr) == ("", "0 sessions would be removed\n")
    done = run_cli("retain", "--older-than", "0", "--reason", "test", "--db", db_url)
    assert done.returncode == 0 and done.stdout.startswith("removed s1  1 event  head ")
    assert run_cli("sessions", "--json", "--db", db_url).stdout == ""
    bad = run_cli("retain", "--older-than", "-1", "--db", db_url)
    assert bad.returncode == 2 and "0 days or more" in bad.stderr
    # not a number: said so (it was a traceback, as were the days no date reaches back to)
    nan = run_cli("retain", "--older-than", "nan", "--dry-run", "--db", db_url)
    assert (nan.returncode, nan.stderr) == (
        2,
        "error: --older-than must be 0 days or more, not nan\n",
    )
    for days in ("1e300", "800000", "inf"):
        older = run_cli("retain", "--older-than", days, "--dry-run", "--db", db_url)
        assert (older.returncode, older.stderr) == (0, "0 sessions would be removed\n"), days


def test_a_removed_sessions_text_leaves_the_sqlite_search_index(tmp_path: Path) -> None:
    db = tmp_path / "agenttrail.db"
    secret = "Jane Roe, 12 Elm Street, Springfield"
    with open_store(db) as store:
        old = Recorder.start(store, session_id="old", started="2020-01-01T00:00:00.000000Z")
        old.append(events.message("user", secret), created_at="2020-01-01T00:00:01.000000Z")
        kept = Recorder.start(store, session_id="kept")
        for n in range(30):  # index rows written in several segments
            kept.append(events.message("user", f"note {n}"))
            assert run_cli("search", "note", "--db", str(db)).returncode == 0
    folded = secret.lower().encode()
    assert folded in db.read_bytes() + _wal(db)  # the index's folded copy
    segments = _fts_blocks(db)
    with open_store(db) as store:
        stones = retain(store, 365, now=datetime(2026, 11, 29, tzinfo=UTC))
    assert [s.session_id for s in stones] == ["old"]
    for path in (db, db.with_name(db.name + "-wal")):
        if path.exists():
            assert secret.encode() not in path.read_bytes(), path.name
            assert folded not in path.read_bytes(), path.name
    # FTS5 keeps a deleted row's trigrams in its segments until they merge: every segment
    # block that existed before the removal is gone (merged into new ones, pages zeroed).
    assert segments and not segments & _fts_blocks(db)
    found = run_cli("search", "note 7", "--json", "--db", str(db))
    assert found.returncode == 0 and '"kept"' in found.stdout
    assert run_cli("search", "elm street", "--db", str(db)).stdout == ""
