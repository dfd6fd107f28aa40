"""Trace rows: written for envelope results, joined to turns both ways, checked by verify."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

from agenttrail import Recorder
from agenttrail.evidence.envelopes import record_hash
from agenttrail.evidence.traces import verify_traces
from agenttrail.ingest.importer import import_paths
from agenttrail.ingest.traces import capture
from agenttrail.log.store import LogStore, open_store
from tests.conftest import is_postgres, owner_connection, postgres_schema, run_cli

_INPUTS = {"principal": 312_500, "annual_rate": 0.0575, "years": 25}


def _envelope(outputs: dict[str, object], *, stated: str | None = "ours") -> str:
    body: dict[str, object] = {
        "model": "amortization",
        "specVersion": "3.0",
        "inputs": _INPUTS,
        "outputs": outputs,
        "sentinels": [],
        "assumptions": ["monthly compounding"],
        "constants": {"months_per_year": 12},
    }
    if stated == "ours":
        body["record"] = {"sha256": record_hash(body)}
    elif stated is not None:
        body["record"] = {"sha256": stated}
    # Pretty-printed on purpose: the trace keeps these exact bytes.
    return json.dumps(body, indent=2) + "\n"


def _session(store: LogStore) -> tuple[str, dict[str, int]]:
    rec = Recorder.start(store, title="loan", agent="advisor", user="alice@example.com")
    seqs: dict[str, int] = {}
    with rec.turn(model="gpt-4o", provider="openai", location="remote") as turn:
        seqs["turn1"] = turn.user(
            "What is my monthly payment on $312,500 at 5.75% for 25 years?"
        ).seq
        call = turn.tool_call("run_model", _INPUTS)
        turn.tool_result(call, _envelope({"monthly_payment": 1965.93}))
        call = turn.tool_call("lookup_rate", {"product": "fixed-25"})
        turn.tool_result(call, "5.75%")  # an ordinary result: no trace row
        turn.reply("Your payment is $1,965.93 a month.")
    with rec.turn(model="gpt-4o", provider="openai", location="remote") as turn:
        seqs["turn2"] = turn.user("And the total interest?").seq
        call = turn.tool_call("run_model", _INPUTS)
        turn.tool_result(call, _envelope({"total_interest": 277_279.0}, stated="f" * 64))
        call = turn.tool_call("run_model", _INPUTS)
        turn.tool_result(call, _envelope({"total_paid": 589_779.0}, stated=None))
        call = turn.tool_call("run_model", _INPUTS)
        turn.tool_result(
            call,
            '{"model":"amortization","specVersion":"3.0","inputs":{},"outputs":{"x":1},'
            '"outputs":{"x":2}}',
        )
        turn.reply("About $277,279.")
    return rec.session_id, seqs


def test_envelope_results_get_trace_rows_joined_both_ways(store: LogStore) -> None:
    sid, seqs = _session(store)
    rows = store.traces(sid)
    assert [(r.tool, r.status) for r in rows] == [
        ("run_model", "verified"),
        ("run_model", "mismatch"),
        ("run_model", "computed"),
        ("run_model", "invalid"),
    ]
    assert [r.turn_seq for r in rows] == [seqs["turn1"]] + [seqs["turn2"]] * 3
    # A turn's rows, and a row's turn.
    assert [r.id for r in store.traces(sid, turn_seq=seqs["turn2"])] == [r.id for r in rows[1:]]
    turn = next(iter(store.read(sid, after_seq=rows[0].turn_seq - 1, limit=1)))  # type: ignore[operator]
    assert turn.payload["content"].startswith("What is my monthly payment")
    # The envelope is kept verbatim, and joins the logged call and result.
    assert rows[0].envelope == _envelope({"monthly_payment": 1965.93}).encode()
    events = {e.seq: e for e in store.read(sid)}
    assert events[rows[0].call_seq].payload["name"] == "run_model"
    assert events[rows[0].result_seq].payload["output"].encode() == rows[0].envelope
    assert json.loads(rows[0].inputs) == _INPUTS
    assert "duplicate key 'outputs'" in rows[3].detail and rows[3].record_hash is None
    assert verify_traces(store, sid) == []


def test_trace_rows_hold_no_user_identity(store: LogStore) -> None:
    _session(store)
    if is_postgres(store.url):
        with store._connection() as pg:  # type: ignore[attr-defined]
            columns = [
                row[0]
                for row in pg.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name = 'trace_rows'"
                )
            ]
            assert "envelope" in columns
            rows = pg.execute("SELECT * FROM trace_rows").fetchall()
    else:
        conn = store._conn  # type: ignore[attr-defined]
        columns = [row[1] for row in conn.execute("PRAGMA table_info(trace_rows)")]
        rows = conn.execute("SELECT * FROM trace_rows").fetchall()
    assert not [c for c in columns if "user" in c]
    assert rows
    for row in rows:
        assert not any("alice" in str(value) for value in row)


def test_import_writes_the_same_trace_rows(tmp_path: Path, db_url: str) -> None:
    with open_store(tmp_path / "a.db") as store:
        sid, _ = _session(store)
        original = [(r.tool, r.status, r.record_hash, r.envelope) for r in store.traces(sid)]
    exported = run_cli("export", sid, "--db", str(tmp_path / "a.db")).stdout
    (tmp_path / "s.jsonl").write_text(exported, encoding="utf-8")
    with open_store(db_url) as store:
        import_paths(store, [tmp_path / "s.jsonl"])
        again = [(r.tool, r.status, r.record_hash, r.envelope) for r in store.traces(sid)]
        assert capture(store, sid) == []  # running it again writes nothing
    assert again == original


def test_verify_fails_on_a_changed_envelope_byte(db_path: Path) -> None:
    with open_store(db_path) as store:
        sid, _ = _session(store)
    assert run_cli("verify", "--db", str(db_path)).returncode == 0
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("DROP TRIGGER trace_rows_no_update")
    envelope = conn.execute("SELECT envelope FROM trace_rows WHERE id = 1").fetchone()[0]
    changed = envelope.replace(b"1965.93", b"1965.98")
    conn.execute("UPDATE trace_rows SET envelope = ? WHERE id = 1", (changed,))
    conn.close()
    result = run_cli("verify", "--db", str(db_path))
    assert result.returncode == 1
    assert f"FAIL  {sid}  trace 1: envelope differs from the logged result" in result.stdout


def test_verify_fails_on_a_changed_envelope_byte_in_postgresql(postgres_url: str) -> None:
    with postgres_schema(postgres_url) as url:
        with open_store(url) as store:
            sid, _ = _session(store)
        assert run_cli("verify", "--db", url).returncode == 0
        with owner_connection(url) as conn:
            conn.execute("ALTER TABLE trace_rows DISABLE TRIGGER trace_rows_no_update")
            conn.execute(
                "UPDATE trace_rows SET envelope = convert_to(replace("
                "convert_from(envelope, 'UTF8'), '1965.93', '1965.98'), 'UTF8') WHERE id = 1"
            )
            (changed,) = conn.execute("SELECT envelope FROM trace_rows WHERE id = 1").fetchone()
            assert b"1965.98" in changed
        result = run_cli("verify", "--db", url)
        assert result.returncode == 1
        assert f"FAIL  {sid}  trace 1: envelope differs from the logged result" in result.stdout


def test_traces_and_trace_commands(db_url: str) -> None:
    with open_store(db_url) as store:
        sid, _ = _session(store)
    listing = run_cli("traces", sid, "--json", "--db", db_url)
    rows = [json.loads(line) for line in listing.stdout.splitlines()]
    assert [r["status"] for r in rows] == ["verified", "mismatch", "computed", "invalid"]
    shown = run_cli("trace", "2", "--db", db_url)
    assert shown.returncode == 0
    assert "status: mismatch" in shown.stdout and '"total_interest": 277279.0' in shown.stdout
    missing = run_cli("trace", "99", "--db", db_url)
    assert (missing.returncode, missing.stderr) == (2, "error: no trace row 99\n")


def test_logs_carry_record_hashes_and_never_inputs(
    store: LogStore, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        sid, _ = _session(store)
        verify_traces(store, sid)
    text = "\n".join(r.getMessage() for r in caplog.records)
    for secret in ("312500", "0.0575", "1965.93", "alice", "monthly payment", "fixed-25"):
        assert secret not in text
    rows = store.traces(sid)
    assert rows[0].record_hash in text  # the join key
    alerts = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(alerts) == 2 and "mismatch" in alerts[0].getMessage()
