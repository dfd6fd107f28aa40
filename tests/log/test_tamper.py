"""Tamper figures as a test (issue 18): any single-byte change to any evidence column of a v2
log, by someone who dropped the triggers, is caught by verify, naming the session and the
first bad seq (or the session row).

The columns changed are every column of ``sessions`` (but ``created_at``, not evidence:
docs/log-format.md, What the chain covers), of ``session_events``, ``erasures``,
``trace_rows`` and ``session_event_keys``, and of the log's own rows: ``tombstones``,
``log_keys`` and their heads, ``log_heads``. One
cell, one byte of it (for an integer, one byte of its 8-byte form), XORed with a non-zero
byte, in a fresh copy of a real SQLite log per example.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agenttrail.evidence.audit import audit
from agenttrail.log.chain import log_chain_problems
from agenttrail.log.store import open_store
from agenttrail.log.store._rules import TRACE_FIELDS
from agenttrail.model import NewSession, events
from tests._secrets import AWS_SECRET
from tests.loan_session import SESSION_ID as LOAN
from tests.loan_session import record_loan_session

SESSIONS = {"s", "t", "e", LOAN}

EVIDENCE = {
    "sessions": (
        "id",
        "title",
        "agent",
        "user",
        "workspace",
        "started",
        "metadata",
        "head_seq",
        "head_hash",
        "chain_version",
        "trace_count",
        "trace_hash",
        "key_count",
        "key_hash",
    ),
    "session_events": ("session_id", "seq", "created_at", "payload", "hash", "salt", "digest"),
    "erasures": ("session_id", "seq", "erasure_seq"),
    "trace_rows": (*TRACE_FIELDS, "hash"),  # not id: docs/log-format.md says why
    "session_event_keys": ("session_id", "key", "seq", "hash"),
    "tombstones": ("session_id", "head_seq", "head_hash", "deleted_at", "reason", "hash"),
    "log_keys": ("name", "key", "hash"),
    "log_heads": ("name", "count", "hash"),
}
"""The evidence columns of each table of a v2 log."""

KEYS = {
    "sessions": "rowid",
    "session_events": "rowid",
    "erasures": "session_id, seq",
    "trace_rows": "rowid",
    "session_event_keys": "session_id, key",
    "tombstones": "rowid",
    "log_keys": "rowid",
    "log_heads": "rowid",
}
"""How a row is found again (``erasures`` and ``session_event_keys`` are WITHOUT ROWID
tables)."""

LOG_TABLES = {
    "tombstones": ("tombstone row 1 (session ", "the tombstone head"),
    "log_keys": ("log key row 1 (name ", "the log key head"),
    "log_heads": ("the tombstone head", "tombstone head", "the log key head", "log key head"),
}
"""The tables of the log's own rows, and how verify's problem with each begins."""

Cell = tuple[str, tuple[object, ...], str]
"""``(table, key, column)`` of one stored value."""


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Cell]]:
    """A log with a v2 session ``s`` (six events, one erased, four with idempotency keys),
    the loan session of
    tests/loan_session.py (trace rows), an untouched session ``t`` and an empty one ``e``;
    and every non-empty evidence cell of it."""
    db = tmp_path_factory.mktemp("tamper") / "log.db"
    with open_store(db) as store:
        store.create_session(
            NewSession(
                id="s",
                title="keys",
                agent="harvey",
                user="ada",
                workspace="/w",
                started="2026-06-24T10:00:00.000000Z",
                metadata={"team": "risk"},
            )
        )
        for number, text in enumerate(("my key?", "sk-live-0123", "yes", "thanks")):
            store.append("s", events.message("user", text), key=f"line-{number}")
        store.erase("s", [2], by="dpo", reason="leak")
        store.append("s", events.message("user", "after"))
        store.create_session(NewSession(id="t", title="other"))
        store.append("t", events.message("user", "hello"))
        store.create_session(NewSession(id="e", title="empty", user="bo"))
        record_loan_session(store)
        # A secret, so that the log draws its redaction key (log_keys), and a session removed
        # by retention (tombstones).
        store.append("t", events.message("user", f"aws_secret_access_key = {AWS_SECRET}"))
        store.create_session(NewSession(id="gone"))
        store.append("gone", events.message("user", "bye"))
        store.remove_session("gone", reason="retention")
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cells = [
            (table, tuple(row[:-1]), column)
            for table, columns in EVIDENCE.items()
            for column in columns
            for row in conn.execute(f'SELECT {KEYS[table]}, "{column}" FROM {table}')
            if row[-1] not in (None, b"", "")
        ]
    return db, cells


def _changed(value: object, index: int, flip: int) -> object:
    """``value`` with one byte XORed with ``flip``: of its bytes, or of its 8-byte form."""
    if isinstance(value, int):  # SQLite's 8-byte two's complement
        raw = bytearray(value.to_bytes(8, "big", signed=True))
        raw[index % 8] ^= flip
        return int.from_bytes(raw, "big", signed=True)
    raw = bytearray(value.encode() if isinstance(value, str) else bytes(value))  # type: ignore[arg-type]
    raw[index % len(raw)] ^= flip
    return bytes(raw) if isinstance(value, bytes) else bytes(raw).decode("utf-8", "replace")


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_single_byte_change_to_evidence_is_caught(
    log: tuple[Path, list[Cell]], tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    source, cells = log
    # Each column as likely as any other, whatever its table's size: then a row of it.
    columns = sorted({(table, column) for table, _, column in cells})
    table, column = data.draw(st.sampled_from(columns), label="column")
    rows = [key for t, key, c in cells if (t, c) == (table, column)]
    key = data.draw(st.sampled_from(rows), label="row")
    where = " AND ".join(f"{name.strip()} = ?" for name in KEYS[table].split(","))
    index = data.draw(st.integers(0, 2**16), label="byte")
    flip = data.draw(st.integers(1, 255), label="xor")
    db = tmp_path_factory.mktemp("copy") / "log.db"
    shutil.copyfile(source, db)
    conn = sqlite3.connect(db, isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'"):
        conn.execute(f"DROP TRIGGER {name}")
    (value,) = conn.execute(f'SELECT "{column}" FROM {table} WHERE {where}', key).fetchone()
    new = _changed(value, index, flip)
    assume(new != value)  # text whose changed byte decodes back to the same character
    try:
        conn.execute(f'UPDATE {table} SET "{column}" = ? WHERE {where}', (new, *key))
    except sqlite3.IntegrityError:
        assume(False)  # a key changed into another row's: not a single-byte change
    finally:
        conn.close()
    with open_store(db, create=False) as store:
        verdicts = audit(store)
        log_problems = log_chain_problems(store)
    bad = [v for v in verdicts if not v.ok]
    if table in LOG_TABLES:  # the log's own rows: named by the tombstone's session, or the key
        assert not bad and len(log_problems) == 1, f"{table}.{column}: {value!r} -> {new!r}"
        assert log_problems[0].startswith(LOG_TABLES[table]), log_problems
        return
    assert not log_problems
    assert bad, f"{table}.{column} of row {key}: {value!r} -> {new!r} passed verify"
    first = bad[0]
    assert first.session_id in {*SESSIONS, repr(new), new}
    # named: the first bad seq (or the session row's column), or the trace row
    assert first.reason or first.trace_problems
    assert first.bad_seq is not None or first.trace_problems or first.where == "session row"
    untouched = {v.session_id for v in verdicts if v.ok}
    assert untouched <= SESSIONS - {first.session_id}
