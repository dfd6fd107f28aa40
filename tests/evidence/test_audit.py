"""One audit verdict (agenttrail.evidence.audit): the chain and the trace rows, checked now,
as the CLI, the API and the viewer all report it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agenttrail.evidence.audit import SessionAudit, audit
from agenttrail.log.digests import session_genesis
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewSession
from agenttrail.views.safe import safe
from agenttrail.views.transcript import IndexCache
from tests.conftest import run_cli
from tests.loan_session import SESSION_ID, record_loan_session
from tests.log.test_chain import _attack


def _tamper(db_path: Path, sql: str, trigger: str) -> None:
    """Change stored rows the way the owner of the file can: around the guard triggers."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute(sql)
    finally:
        conn.close()


def test_an_intact_session_with_trace_rows_is_ok(store: LogStore) -> None:
    record_loan_session(store)
    head = store.get_session(SESSION_ID)
    assert store.traces(SESSION_ID)  # the verdict covers trace rows, not only the chain
    (verdict,) = audit(store, [SESSION_ID])
    assert verdict == SessionAudit(
        session_id=SESSION_ID,
        events=head.head_seq,
        head=head.head_hash.hex(),
        bad_seq=None,
        reason="",
        trace_problems=(),
    )
    assert verdict.ok and verdict.chain_ok
    assert verdict.record() == {
        "ok": True,
        "events": head.head_seq,
        "head": head.head_hash.hex(),
        "bad_seq": None,
        "reason": "",
        "trace_problems": [],
        "erased": [],
    }


def test_every_session_is_audited_when_none_is_named(store: LogStore) -> None:
    record_loan_session(store)
    empty = store.create_session(NewSession("empty")).id
    verdicts = audit(store)
    assert sorted(v.session_id for v in verdicts) == sorted([SESSION_ID, empty])
    (blank,) = [v for v in verdicts if v.session_id == empty]
    # a v2 session's empty head is its genesis (docs/log-format.md, Chain v2)
    genesis = session_genesis(empty, (None, None, None, None, None, "{}"))
    assert (blank.ok, blank.events, blank.head) == (True, 0, genesis.hex())


def test_a_changed_envelope_is_a_trace_problem_on_an_intact_chain(db_path: Path) -> None:
    with open_store(db_path) as store:
        record_loan_session(store)
    _tamper(
        db_path,
        "UPDATE trace_rows SET envelope = CAST(replace(CAST(envelope AS TEXT), '1', '7') "
        "AS BLOB) WHERE id = 1",
        "trace_rows_no_update",
    )
    with open_store(db_path) as store:
        (verdict,) = audit(store, [SESSION_ID])
        chain = IndexCache().overview(store, SESSION_ID)["chain"]
        row = store.trace(1)
    assert verdict.chain_ok and not verdict.ok
    assert verdict.trace_problems == (
        f"trace 1: envelope differs from the logged result (seq {row.result_seq})",
        # and the trace rows' own chain (chain v2) breaks there
        f"trace row 1 (result seq {row.result_seq}) does not chain",
    )
    assert verdict.record()["ok"] is False
    # The viewer's badge and the CLI say the same as the verdict.
    assert chain == verdict.record(escape=safe)
    shown = run_cli("verify", SESSION_ID, "--db", str(db_path))
    assert shown.returncode == 1
    assert shown.stdout == "".join(f"FAIL  {SESSION_ID}  {p}\n" for p in verdict.trace_problems)


def test_a_broken_chain_names_its_first_bad_seq_and_skips_the_trace_rows(db_path: Path) -> None:
    with open_store(db_path) as store:
        record_loan_session(store)
    _tamper(
        db_path,
        "UPDATE session_events SET created_at = '2000-01-01T00:00:00.000000Z' WHERE seq = 3",
        "session_events_no_update",
    )
    with open_store(db_path) as store:
        (verdict,) = audit(store, [SESSION_ID])
    assert (verdict.chain_ok, verdict.ok, verdict.bad_seq) == (False, False, 3)
    assert verdict.reason and verdict.trace_problems == ()
    record = verdict.record(escape=str.upper)
    assert record["reason"] == verdict.reason.upper() and record["bad_seq"] == 3
    shown = run_cli("verify", SESSION_ID, "--db", str(db_path))
    assert shown.returncode == 1
    assert shown.stdout == f"FAIL  {SESSION_ID}  seq 3: {verdict.reason}\n"


# Trace rows changed by hand into what no writer stores: each is a problem of its trace row,
# and the other sessions are still audited.
_NOT_NULL = "ALTER TABLE trace_rows ALTER COLUMN {} DROP NOT NULL"
_TRACE_DAMAGE: dict[str, tuple[list[str], str, bool]] = {
    # name: (statements, what verify says, on PostgreSQL too)
    "inputs-not-json": (
        ["UPDATE trace_rows SET inputs = '{not json' WHERE id = 1"],
        "trace 1: inputs are not JSON",
        True,
    ),
    "spec-not-json": (
        ["UPDATE trace_rows SET spec = '[1' WHERE id = 1"],
        "trace 1: spec is not an envelope spec",
        True,
    ),
    "spec-unknown-key": (
        ["""UPDATE trace_rows SET spec = '{"x": []}' WHERE id = 1"""],
        "trace 1: spec is not an envelope spec",
        True,
    ),
    "inputs-not-utf8": (  # read as stored (lone surrogates), so named as its row
        ["UPDATE trace_rows SET inputs = CAST(X'7bff7d' AS TEXT) WHERE id = 1"],
        "trace 1: inputs are not JSON",
        False,
    ),
    "envelope-as-text": (
        ["UPDATE trace_rows SET envelope = 'text' WHERE id = 1"],
        "trace rows cannot be read: session 'loan-advice': trace 1: envelope is text, not bytes",
        False,
    ),
    "envelope-null": (
        [_NOT_NULL.format("envelope"), "UPDATE trace_rows SET envelope = NULL WHERE id = 1"],
        "trace rows cannot be read: session 'loan-advice': trace 1: envelope is NULL, not bytes",
        True,
    ),
    "spec-null": (
        [_NOT_NULL.format("spec"), "UPDATE trace_rows SET spec = NULL WHERE id = 1"],
        "trace 1: spec is not an envelope spec",
        True,
    ),
    "result-seq-null": (
        [_NOT_NULL.format("result_seq"), "UPDATE trace_rows SET result_seq = NULL WHERE id = 1"],
        "trace 1: seq None is not a logged tool result",
        True,
    ),
}


# Each backend with the damage it allows: PostgreSQL's column types refuse some changes, and
# SQLite refuses NULL in a NOT NULL column even by hand (the ALTER cases).
@pytest.mark.parametrize(
    ("backend", "damage"),
    [("sqlite", d) for d, (sql, _, _) in _TRACE_DAMAGE.items() if not sql[0].startswith("ALTER")]
    + [("postgresql", d) for d, (_, _, on_postgres) in _TRACE_DAMAGE.items() if on_postgres],
)
def test_cli_verify_names_a_trace_row_changed_by_hand_and_checks_the_others(
    db_url: str, damage: str
) -> None:
    statements, said, _ = _TRACE_DAMAGE[damage]
    with open_store(db_url) as store:
        record_loan_session(store)
        store.create_session(NewSession("other"))
    _attack(db_url, *statements)
    result = run_cli("verify", "--db", db_url)
    assert (result.returncode, result.stderr) == (1, "1 of 2 sessions intact\n")
    assert f"FAIL  {SESSION_ID}  {said}" in result.stdout
    assert "ok    other  0 events" in result.stdout
