"""Signed checkpoints: a consistent rewrite of history passes verify alone and fails here."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agenttrail.codec import canonical_json, encode_payload
from agenttrail.ingest.sample import SAMPLE_SESSION_ID, record_sample
from agenttrail.log.digests import chain_hasher_v2, payload_digest, session_genesis, trace_hash
from agenttrail.log.store import open_store
from agenttrail.log.store._rules import TRACE_FIELDS
from agenttrail.model import NewSession, events
from tests.conftest import run_cli
from tests.loan_session import SESSION_ID as LOAN
from tests.loan_session import record_loan_session


def _rewrite_consistently(
    db_path: Path, session_id: str, seq: int, payload: dict[str, object]
) -> None:
    """What someone with write access could do: change an event and recompute every hash
    after it, and the head, so that the chain alone still verifies."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    rows = conn.execute(
        "SELECT seq, created_at, payload, salt FROM session_events WHERE session_id = ? "
        "ORDER BY seq",
        (session_id,),
    ).fetchall()
    fields = conn.execute(
        'SELECT title, agent, "user", workspace, started, metadata FROM sessions WHERE id = ?',
        (session_id,),
    ).fetchone()
    prev = session_genesis(session_id, fields)
    hash_row = chain_hasher_v2(session_id)
    for row_seq, created_at, data, salt in rows:
        if row_seq == seq:
            data = encode_payload(payload)
        digest = payload_digest(salt, data)
        prev = hash_row(prev, row_seq, created_at, digest)
        conn.execute(
            "UPDATE session_events SET payload = ?, digest = ?, hash = ? "
            "WHERE session_id = ? AND seq = ?",
            (data, digest, prev, session_id, row_seq),
        )
    conn.execute("UPDATE sessions SET head_hash = ? WHERE id = ?", (prev, session_id))
    conn.close()


def test_a_checkpoint_catches_a_history_rewritten_by_hand(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        record_sample(store)
    key = tmp_path / "k.pem"
    made = run_cli("keygen", "--out", str(key))
    assert made.returncode == 0, made.stderr
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    head = tmp_path / "head.json"
    signed = run_cli(
        "checkpoint", SAMPLE_SESSION_ID, "--key", str(key), "--db", str(db), "-o", str(head)
    )
    assert signed.returncode == 0, signed.stderr
    statement = json.loads(head.read_text())
    assert (statement["session_id"], statement["seq"]) == (SAMPLE_SESSION_ID, 18)
    pub = ["--checkpoint", str(head), "--pubkey", f"{key}.pub", "--db", str(db)]
    assert run_cli("verify", *pub).returncode == 0
    assert run_cli("verify", SAMPLE_SESSION_ID[:6], *pub).returncode == 0
    # a checkpoint of another session than the one named proves nothing of it: refused
    with open_store(db) as store:
        store.create_session(NewSession("other"))
        store.append("other", events.message("user", "hi"))
    other = run_cli("verify", "other", *pub)
    assert (other.returncode, other.stdout) == (2, "")
    assert other.stderr == (
        f"error: --checkpoint {head}: a checkpoint of session {SAMPLE_SESSION_ID}, not of "
        "other: name that session, or none to verify them all\n"
    )
    # The log grows after the checkpoint: it still extends it.
    with open_store(db) as store:
        store.append(SAMPLE_SESSION_ID, events.message("user", "one more thing"))
    grown = run_cli("verify", *pub)
    assert grown.returncode == 0 and "extends the checkpoint (seq 18) to seq 19" in grown.stdout
    # "What is 2+2?" becomes "What is 2+3?", every hash recomputed: verify alone passes …
    _rewrite_consistently(db, SAMPLE_SESSION_ID, 2, events.message("user", "What is 2+3?"))
    assert run_cli("verify", "--db", str(db)).returncode == 0
    # … and the checkpoint does not.
    caught = run_cli("verify", *pub)
    assert caught.returncode == 1
    assert "seq 18 has another hash than the checkpoint: history was rewritten" in caught.stdout


def test_a_forged_or_foreign_checkpoint_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        record_sample(store)
    for name in ("a", "b"):
        run_cli("keygen", "--out", str(tmp_path / name))
    head = tmp_path / "head.json"
    run_cli(
        "checkpoint",
        SAMPLE_SESSION_ID,
        "--key",
        str(tmp_path / "a"),
        "--db",
        str(db),
        "-o",
        str(head),
    )
    other_key = run_cli(
        "verify", "--checkpoint", str(head), "--pubkey", str(tmp_path / "b.pub"), "--db", str(db)
    )
    assert other_key.returncode == 1 and "signature does not verify" in other_key.stdout
    statement = json.loads(head.read_text())
    statement["seq"] = 17  # edited after signing
    head.write_text(json.dumps(statement))
    edited = run_cli(
        "verify", "--checkpoint", str(head), "--pubkey", str(tmp_path / "a.pub"), "--db", str(db)
    )
    assert edited.returncode == 1 and "signature does not verify" in edited.stdout
    alone = run_cli("verify", "--checkpoint", str(head), "--db", str(db))
    assert alone.returncode == 2 and "go together" in alone.stderr
    assert run_cli("keygen", "--out", str(tmp_path / "a")).returncode == 2  # never overwrites


def test_a_checkpointed_session_that_was_removed_fails_verification(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        record_sample(store)
        store.create_session(NewSession("other"))
    key = tmp_path / "k.pem"
    assert run_cli("keygen", "--out", str(key)).returncode == 0
    head = tmp_path / "head.json"
    signed = run_cli(
        "checkpoint", SAMPLE_SESSION_ID, "--key", str(key), "--db", str(db), "-o", str(head)
    )
    assert signed.returncode == 0, signed.stderr
    with open_store(db) as store:
        store.remove_session(SAMPLE_SESSION_ID, reason="retention")
    result = run_cli("verify", "--checkpoint", str(head), "--pubkey", f"{key}.pub", "--db", str(db))
    assert result.returncode == 1, result.stderr
    other = session_genesis("other", (None, None, None, None, None, "{}")).hex()[:16]
    assert result.stdout == (
        f"ok    other  0 events  head {other}\n"
        f"FAIL  checkpoint {SAMPLE_SESSION_ID} seq 18: session {SAMPLE_SESSION_ID} named by "
        "the checkpoint is missing\n"
    )


def _move_trace_row_consistently(db_path: Path, session_id: str, to_turn: int) -> None:
    """What someone with write access could do to the trace rows: move the first row to
    another turn and recompute every trace hash and the trace head, so that verify alone
    still passes."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    columns = ", ".join(TRACE_FIELDS)
    rows = conn.execute(
        f"SELECT id, {columns} FROM trace_rows WHERE session_id = ? ORDER BY id", (session_id,)
    ).fetchall()
    turn = TRACE_FIELDS.index("turn_seq")
    prev = bytes(32)
    for number, (row_id, *values) in enumerate(rows):
        if number == 0:
            values[turn] = to_turn
        prev = trace_hash(prev, values)
        conn.execute(
            "UPDATE trace_rows SET turn_seq = ?, hash = ? WHERE id = ?",
            (values[turn], prev, row_id),
        )
    conn.execute("UPDATE sessions SET trace_hash = ? WHERE id = ?", (prev, session_id))
    conn.close()


def test_a_checkpoint_pins_the_trace_rows_too(tmp_path: Path) -> None:
    # issue 18: a trace row moved to another turn, the trace chain rebuilt by hand, passes
    # verify alone; the signed checkpoint names the trace row whose hash changed.
    db = tmp_path / "log.db"
    with open_store(db) as store:
        record_loan_session(store)
        rows = len(store.trace_chain(LOAN).rows)
    key = tmp_path / "k.pem"
    assert run_cli("keygen", "--out", str(key)).returncode == 0
    head = tmp_path / "head.json"
    signed = run_cli("checkpoint", LOAN, "--key", str(key), "--db", str(db), "-o", str(head))
    assert signed.returncode == 0, signed.stderr
    statement = json.loads(head.read_text())
    assert statement["type"] == "agenttrail-checkpoint/v2"
    assert statement["trace_count"] == rows > 1 and len(statement["trace_hash"]) == 64
    pub = ["--checkpoint", str(head), "--pubkey", f"{key}.pub", "--db", str(db)]
    assert run_cli("verify", *pub).returncode == 0
    _move_trace_row_consistently(db, LOAN, to_turn=999)
    assert run_cli("verify", "--db", str(db)).returncode == 0
    caught = run_cli("verify", *pub)
    assert caught.returncode == 1
    assert (
        f"trace row {rows} has another hash than the checkpoint: trace rows were rewritten"
        in caught.stdout
    )
    # A checkpoint made before trace heads were signed keeps verifying what it signed.
    old = {k: statement[k] for k in ("session_id", "seq", "head_hash", "created_at")}
    old["type"] = "agenttrail-checkpoint/v1"
    private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    assert isinstance(private, Ed25519PrivateKey)
    old["signature"] = base64.b64encode(private.sign(canonical_json(old))).decode()
    head.write_text(json.dumps(old))
    assert run_cli("verify", *pub).returncode == 0
