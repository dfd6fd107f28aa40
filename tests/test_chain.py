"""The hash chain: verify passes on intact logs and finds the first bad seq after any change.

The attacker owns the database: on SQLite they drop the guard triggers, on PostgreSQL they
switch every trigger off (``session_replication_role = replica``, foreign keys included),
then change, delete or insert rows. Each test runs on both backends.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from agenttrail import events
from agenttrail.chain import GENESIS_HASH, event_hash, verify
from agenttrail.store import LogStore, NewSession, open_store
from tests.conftest import is_postgres, owner_connection, postgres_schema, run_cli


def _fill(store: LogStore, session_id: str = "s", n: int = 5) -> None:
    store.create_session(NewSession(id=session_id))
    for i in range(n):
        store.append(session_id, events.message("user" if i % 2 else "assistant", f"m{i} é"))


def _attack(db: str | Path, *statements: str, params: tuple[object, ...] = ()) -> None:
    """Run ``statements`` (``?`` placeholders) as the database's owner, around every guard."""
    if is_postgres(str(db)):
        with owner_connection(str(db)) as pg:
            pg.execute("SET session_replication_role = replica")
            for statement in statements:
                pg.execute(statement.replace("?", "%s"), params if "?" in statement else ())
        return
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'trigger'"
        ).fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        for statement in statements:
            conn.execute(statement, params if "?" in statement else ())
    finally:
        conn.close()


def test_the_hash_is_the_documented_preimage_hashed_with_sha256() -> None:
    # docs/log-format.md, "The hash chain": built here with struct, independently of chain.py.
    prev, seq, created, sid, payload = (
        bytes(range(32)),
        7,
        "2026-06-24T10:00:05.000000Z",
        "sé",
        b"\xa0",
    )
    preimage = (
        b"agenttrail-chain-v1\x00"
        + prev
        + struct.pack(">Q", seq)
        + struct.pack(">I", len(created))
        + created.encode()
        + struct.pack(">I", len(sid.encode()))
        + sid.encode()
        + struct.pack(">Q", len(payload))
        + payload
    )
    assert event_hash(prev, seq, created, sid, payload) == hashlib.sha256(preimage).digest()
    assert bytes(32) == GENESIS_HASH


def test_an_intact_log_verifies(store: LogStore) -> None:
    _fill(store, "a")
    _fill(store, "b", 3)
    store.create_session(NewSession(id="empty"))
    verdicts = {v.session_id: v for v in verify(store)}
    assert all(v.ok for v in verdicts.values())
    assert verdicts["a"].events == 5 and verdicts["empty"].events == 0
    assert verdicts["a"].head_hash == store.get_session("a").head_hash


def test_cli_verify_names_the_session_and_first_bad_seq_after_a_change(db_url: str) -> None:
    with open_store(db_url) as store:
        _fill(store, "s", 6)
        _fill(store, "t", 2)
    assert run_cli("verify", "--db", db_url).returncode == 0
    _attack(
        db_url,
        "UPDATE session_events SET payload = ? WHERE session_id = 's' AND seq = 3",
        params=(b"\xa0",),
    )
    result = run_cli("verify", "--db", db_url)
    assert result.returncode == 1
    assert "FAIL  s  seq 3" in result.stdout
    assert "ok    t" in result.stdout
    assert run_cli("verify", "t", "--db", db_url).returncode == 0


def test_cli_verify_catches_a_deleted_row(db_url: str) -> None:
    with open_store(db_url) as store:
        _fill(store, "s", 6)
    _attack(db_url, "DELETE FROM session_events WHERE seq = 4")
    result = run_cli("verify", "s", "--db", db_url)
    assert (result.returncode, "seq 4" in result.stdout) == (1, True), result.stdout


def test_cli_verify_catches_a_deleted_last_row_by_the_session_head(db_url: str) -> None:
    with open_store(db_url) as store:
        _fill(store, "s", 6)
    _attack(db_url, "DELETE FROM session_events WHERE seq = 6")
    result = run_cli("verify", "--db", db_url)
    assert result.returncode == 1
    assert "FAIL  s  seq 6: seq 6 is missing (head is seq 6)" in result.stdout


def test_cli_verify_catches_an_inserted_row(db_url: str) -> None:
    with open_store(db_url) as store:
        _fill(store, "s", 4)
        forged = next(iter(store.read("s", after_seq=3))).hash
    # A row appended by hand with a correctly chained hash: only the head gives it away.
    data = b"\xa1dtypeex"
    created = "2026-06-24T10:00:05.000000Z"
    digest = event_hash(forged, 5, created, "s", data)
    _attack(
        db_url,
        "INSERT INTO session_events VALUES ('s', 5, ?, ?, ?)",
        params=(created, data, digest),
    )
    result = run_cli("verify", "--db", db_url)
    assert result.returncode == 1
    assert "FAIL  s  seq 5: rows beyond the session head" in result.stdout


def test_rows_moved_to_an_unknown_session_are_reported(db_url: str) -> None:
    with open_store(db_url) as store:
        _fill(store, "s", 3)
    _attack(db_url, "UPDATE session_events SET session_id = 'ghost' WHERE seq = 3")
    with open_store(db_url) as store:
        bad = {v.session_id: v.bad_seq for v in verify(store) if not v.ok}
    assert bad == {"s": 3, "ghost": 1}


_COLUMNS = ("session_id", "seq", "created_at", "payload", "hash")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    row=st.integers(1, 4),
    column=st.sampled_from(_COLUMNS),
    position=st.integers(0, 10_000),
    flip=st.integers(1, 255),
)
def test_verify_detects_any_single_byte_change_of_any_stored_row(
    backend: str, request: pytest.FixtureRequest, row: int, column: str, position: int, flip: int
) -> None:
    with _fresh_log(backend, request) as db:
        with open_store(db) as store:
            _fill(store, "sess", 4)
            store.append("sess", events.tool_result("c1", "x", output="∑ " * 40))
        value = _stored(db, column, row)
        if column == "seq":
            changed: object = value ^ flip
        else:
            raw = bytearray(value.encode() if isinstance(value, str) else value)
            raw[position % len(raw)] ^= flip
            changed = bytes(raw)
            if isinstance(value, str):
                # Text that is still UTF-8 stays text; anything else lands as a BLOB.
                with contextlib.suppress(UnicodeDecodeError):
                    changed = bytes(raw).decode("utf-8")
                if is_postgres(db) and (not isinstance(changed, str) or "\x00" in changed):
                    reject()  # PostgreSQL text holds only UTF-8 without NUL: not storable
        try:
            _attack(
                db,
                f"UPDATE session_events SET {column} = ? WHERE session_id = 'sess' AND seq = ?",
                params=(changed, row),
            )
        except (sqlite3.IntegrityError, psycopg.errors.IntegrityError):
            reject()  # the primary key (or seq > 0) makes this change impossible to store
        with open_store(db) as store:
            verdicts = verify(store)
        assert not all(v.ok for v in verdicts)
        assert any(v.session_id == "sess" and not v.ok for v in verdicts)


@contextlib.contextmanager
def _fresh_log(backend: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new, empty log for one Hypothesis example."""
    if backend == "postgresql":
        with postgres_schema(request.getfixturevalue("postgres_url")) as url:
            yield url
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield str(Path(tmp) / "t.db")


def _stored(db: str, column: str, seq: int) -> Any:
    query = f"SELECT {column} FROM session_events WHERE session_id = 'sess' AND seq = ?"
    if is_postgres(db):
        with owner_connection(db) as pg:
            row = pg.execute(query.replace("?", "%s"), (seq,)).fetchone()
            assert row is not None
            return row[0]
    conn = sqlite3.connect(db)
    try:
        return conn.execute(query, (seq,)).fetchone()[0]
    finally:
        conn.close()
