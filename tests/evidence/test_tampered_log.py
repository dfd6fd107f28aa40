"""A log changed by hand around its guards, as an auditor would try it: every change that
removes or alters evidence makes ``agenttrail verify`` fail (exit 1, naming what), in text
and in ``--json`` alike, never a traceback; ``migrate`` refuses to copy it (a copy would
chain what was changed anew); a checkpoint of a session of no events pins its fields
(docs/log-format.md, What the chain covers; docs/evidence.md).

The log holds our loan-advice session (``tests/loan_session.py``: trace rows), a session
with idempotency keys and a secret (so a log key), and a session removed by retention (a
tombstone). The file is changed with ``sqlite3`` after dropping the triggers that guard it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agenttrail.log.store import open_store
from agenttrail.model import NewEvent, NewSession, events
from tests.conftest import run_cli
from tests.loan_session import SESSION_ID, record_loan_session

KEYED = "keyed-session"


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "log.db"
    with open_store(path) as store:
        record_loan_session(store)
        store.append_batch(
            KEYED,
            [
                NewEvent(events.message("user", "my key is AKIAIOSFODNN7EXAMPLE"), key="line-1"),
                NewEvent(events.message("assistant", "noted"), key="line-2"),
            ],
            create=NewSession(title="keys"),
        )
        gone = store.create_session(NewSession(title="to remove")).id
        store.remove_session(gone, reason="retention test")
    return str(path)


def _by_hand(db: str, *statements: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        triggers = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        for (name,) in triggers.fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def _verify(db: str, *args: str) -> tuple[int, str, str]:
    done = run_cli("verify", *args, "--db", db)
    assert "Traceback" not in done.stderr
    return done.returncode, done.stdout, done.stderr


def test_the_log_verifies_before_it_is_changed(db: str) -> None:
    code, out, said = _verify(db)
    assert code == 0 and "FAIL" not in out, out
    assert said == "2 of 2 sessions intact\n"


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        ("DROP TABLE tombstones", "FAIL  log  the log's own rows (tombstones, log keys) cannot "),
        ("DROP TABLE log_keys", "FAIL  log  the log's own rows (tombstones, log keys) cannot "),
        ("DROP TABLE log_heads", "FAIL  log  the log's own rows (tombstones, log keys) cannot "),
        ("DELETE FROM log_heads WHERE name = 'tombstones'", "FAIL  log  the tombstone head is"),
        ("DROP TABLE session_event_keys", f"FAIL  {KEYED}  the key rows cannot be read: "),
    ],
    ids=["tombstones", "log keys", "log heads", "a head row", "keys"],
)
def test_a_table_of_evidence_dropped_fails(db: str, statement: str, named: str) -> None:
    # each passed with exit 0: a table that could not be read counted as one that chained
    _by_hand(db, statement)
    code, out, _ = _verify(db)
    assert code == 1
    assert named in out, out
    code, out, _ = _verify(db, "--json")
    assert code == 1
    lines = [json.loads(line) for line in out.splitlines()]
    assert not all(line.get("ok", False) or line.get("log", {}).get("ok") for line in lines)


def test_a_tombstone_changed_fails_in_json_too(db: str) -> None:
    # text said FAIL, --json said every session ok, exit 0
    _by_hand(db, "UPDATE tombstones SET reason = 'nothing to see'")
    code, out, said = _verify(db)
    assert code == 1
    assert "FAIL  log  tombstone row 1 (session " in out
    assert said == "2 of 2 sessions intact; the log's own rows do not verify\n"
    code, out, _ = _verify(db, "--json")
    assert code == 1
    *sessions, log = [json.loads(line) for line in out.splitlines()]
    assert all(s["ok"] for s in sessions)
    assert log["log"]["ok"] is False
    assert log["log"]["problems"][0].startswith("tombstone row 1 (session ")


@pytest.mark.parametrize(
    "statement",
    [
        f"UPDATE sessions SET trace_hash = 'abc' WHERE id = '{SESSION_ID}'",
        f"UPDATE sessions SET key_hash = 'abc' WHERE id = '{KEYED}'",
        "UPDATE log_heads SET hash = 'abc' WHERE name = 'tombstones'",
        "UPDATE trace_rows SET hash = 'abc' WHERE id = 1",
        "UPDATE session_event_keys SET hash = 7",
    ],
    ids=["trace head", "key head", "log head", "trace row", "key row"],
)
def test_a_hash_changed_into_text_is_a_problem_not_a_traceback(db: str, statement: str) -> None:
    # a TypeError (bytes() of a str) stopped verify, and every session after it unchecked
    _by_hand(db, statement)
    code, out, said = _verify(db)
    assert code == 1
    assert "FAIL" in out and said != "2 of 2 sessions intact\n"


def test_an_id_changed_into_bytes_does_not_stop_a_prefix(db: str) -> None:
    _by_hand(db, f"UPDATE sessions SET id = CAST(id AS BLOB) WHERE id = '{KEYED}'")
    code, out, _ = _verify(db, SESSION_ID[:6])
    assert code == 0 and f"ok    {SESSION_ID}" in out
    assert _verify(db)[0] == 1


@pytest.mark.parametrize(
    ("statement", "refused"),
    [
        (
            "UPDATE tombstones SET reason = 'nothing to see'",
            "error: the log's own rows do not verify: tombstone row 1 (session ",
        ),
        (
            "UPDATE session_event_keys SET key = 'forged' "
            f"WHERE session_id = '{KEYED}' AND seq = 2",
            f"error: session {KEYED} does not verify: key row 2 (seq 2) does not chain (on the "
            "source)",
        ),
        (
            f"UPDATE trace_rows SET turn_seq = 1 WHERE session_id = '{SESSION_ID}' AND id = 2",
            f"error: session {SESSION_ID} does not verify: trace row 2 (result seq ",
        ),
    ],
    ids=["tombstone", "key", "trace row"],
)
def test_migrate_refuses_a_source_changed_by_hand(
    db: str, tmp_path: Path, statement: str, refused: str
) -> None:
    # each was copied, exit 0, and the copy chained anew verified clean
    _by_hand(db, statement)
    copy = str(tmp_path / "copy.db")
    done = run_cli("migrate", "--from", db, "--to", copy)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith(refused), done.stderr
    if Path(copy).exists():
        assert run_cli("verify", "--db", copy).returncode == 0


def test_a_checkpoint_of_no_events_pins_the_sessions_fields(tmp_path: Path) -> None:
    # seq 0 skipped the head comparison: fields rewritten with their genesis passed
    from agenttrail.log.digests import session_genesis

    db = str(tmp_path / "empty.db")
    with open_store(db) as store:
        store.create_session(NewSession("empty-1", title="empty one", user="carol"))
    key = tmp_path / "k.key"
    assert run_cli("keygen", "--out", str(key)).returncode == 0
    signed = tmp_path / "cp.json"
    made = run_cli("checkpoint", "empty-1", "--key", str(key), "-o", str(signed), "--db", db)
    assert made.returncode == 0, made.stderr
    args = ("empty-1", "--checkpoint", str(signed), "--pubkey", f"{key}.pub")
    assert _verify(db, *args)[0] == 0
    fields = ("forged", None, "mallory", None, None, "{}")
    genesis = session_genesis("empty-1", fields).hex()
    _by_hand(
        db,
        f"UPDATE sessions SET title = 'forged', user = 'mallory', head_hash = X'{genesis}' "
        "WHERE id = 'empty-1'",
    )
    code, out, _ = _verify(db, *args)
    assert code == 1
    assert (
        "FAIL  checkpoint empty-1 seq 0: the session's fields are not those the checkpoint" in out
    )


def test_events_whose_session_row_was_deleted_are_named_so(db: str) -> None:
    # it said "seq 1: stored hash does not match the row's bytes": with no row, the v2
    # chain was hashed as v1
    _by_hand(db, f"DELETE FROM sessions WHERE id = '{KEYED}'")
    code, out, _ = _verify(db)
    assert code == 1
    assert f"FAIL  {KEYED}  seq 1: events with no session row\n" in out


def test_an_erasures_row_past_the_last_event_says_so(db: str) -> None:
    # it said "seq 50 has an erasures row but its payload is still stored", of a seq that
    # the session does not have
    _by_hand(
        db,
        f"INSERT INTO erasures (session_id, seq, erasure_seq) VALUES ('{KEYED}', 50, 2)",
    )
    code, out, _ = _verify(db)
    assert code == 1
    assert f"FAIL  {KEYED}  seq 50: seq 50 has an erasures row but the last is seq 2\n" in out
