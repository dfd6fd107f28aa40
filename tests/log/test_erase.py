"""``agenttrail erase`` (docs/log-format.md, Erasure): the payload's bytes leave the log and
its files, the chain stays whole, and the one UPDATE it needs is the only one admitted.

Real SQLite files and the real PostgreSQL server (the ``db_url`` fixture); the CLI runs as a
real process where the files are read after it exits.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agenttrail.codec import encode_payload
from agenttrail.errors import AppendOnlyViolation, InputError
from agenttrail.evidence.audit import audit
from agenttrail.formats.jsonl import jsonl_from_log
from agenttrail.ingest.migrate import migrate
from agenttrail.log.chain import verify
from agenttrail.log.store import LogStore, open_store
from agenttrail.log.store.sqlite import SCHEMA_VERSION
from agenttrail.model import NewEvent, NewSession, events
from tests.conftest import V1_LOG, is_postgres, owner_connection, run_cli

# what must go: personal data a user asked to have erased (a secret of a kind redaction
# knows never reaches the log; this is what erasure is for), erased from seq 2
SECRET = "Jane Roe, 12 Elm Street, Springfield"
SHORT = "yes"  # a low-entropy answer, erased from seq 3


def _session(store: LogStore, session_id: str = "s") -> None:
    store.create_session(NewSession(id=session_id, title="keys", user="ada"))
    store.append(session_id, events.message("user", "my key?"))
    store.append(session_id, events.message("assistant", f"it is {SECRET}"))
    store.append(session_id, events.message("user", SHORT))
    store.append(session_id, events.message("user", "thanks"))


def test_erase_keeps_the_chain_and_reads_as_erased(store: LogStore) -> None:
    _session(store)
    done = store.erase("s", [3, 2], by="dpo@example.org", reason="leaked key, SEC-12")
    assert (done.seqs, done.erasure_seq) == ([2, 3], 5)
    (verdict,) = audit(store, ["s"])
    assert (verdict.ok, verdict.erased, verdict.events) == (True, (2, 3), 5)
    read = list(store.read("s"))
    assert [e.erased for e in read] == [False, True, True, False, False]
    assert read[1].payload == {"type": "erased", "note": "payload erased (agenttrail erase)"}
    assert read[1].data == b"" and read[1].salt is None and read[1].digest is not None
    assert read[4].payload == {
        "type": "erasure",
        "seqs": [2, 3],
        "by": "dpo@example.org",
        "reason": "leaked key, SEC-12",
    }
    export = "\n".join(jsonl_from_log(store, "s"))
    assert SECRET not in export and f'"{SHORT}"' not in export
    assert '"erased":true' in export


def test_erase_refuses_what_it_cannot_erase(store: LogStore) -> None:
    _session(store)
    store.erase("s", [2], by="me", reason="r")
    for seqs, said in (
        ([9], "no event at seq 9"),
        ([2], "already erased"),
        ([5], "is an erasure record"),
        ([], "at least one seq"),
    ):
        with pytest.raises(InputError, match=said):
            store.erase("s", seqs, by="me", reason="r")
    store.create_session(NewSession(id="old", chain_version=1))
    store.append("old", events.message("user", "v1"))
    with pytest.raises(InputError, match="chained as v1"):
        store.erase("old", [1], by="me", reason="r")
    with pytest.raises(InputError, match="written only by agenttrail erase"):
        store.append("s", {"type": "erasure", "seqs": [1]})
    forged = encode_payload({"type": "erasure", "seqs": [1]})  # as an import holds it
    with pytest.raises(InputError, match="written only by agenttrail erase"):
        store.append_batch("s", [NewEvent.from_data(forged, type="erasure")])
    for blank in ("", " \t"):  # an auditor reads why: an erasure and a tombstone say it
        with pytest.raises(InputError, match="the erasure reason is blank"):
            store.erase("s", [3], by="me", reason=blank)
        with pytest.raises(InputError, match="the retention reason is blank"):
            store.remove_session("s", reason=blank)
    assert store.head("s") is not None and len(store.erasures("s")) == 1
    assert all(v.ok for v in verify(store))


def test_the_database_admits_only_the_erasing_update(db_url: str) -> None:
    with open_store(db_url) as store:
        _session(store)
        store.erase("s", [2], by="me", reason="r")
        conn_of = store._write  # type: ignore[attr-defined]
        for statement, params in (
            # no erasures row for seq 3
            ("UPDATE session_events SET payload = ?, salt = NULL WHERE seq = 3", (b"",)),
            # an erased row's digest may not change
            ("UPDATE session_events SET digest = ? WHERE seq = 2", (bytes(32),)),
            ("DELETE FROM erasures", ()),
        ):
            sql = statement.replace("?", store.sql.param)  # type: ignore[attr-defined]
            with pytest.raises(AppendOnlyViolation):
                conn_of("attack", lambda tx, q=sql, p=params: tx.execute(q, p))
        assert all(v.ok for v in verify(store))


def test_the_erased_bytes_leave_the_sqlite_files(tmp_path: Path) -> None:
    db = tmp_path / "agenttrail.db"
    with open_store(db) as store:
        _session(store)
        # a long payload spills into overflow pages; those must be zeroed too
        store.append("s", events.message("assistant", f"{SECRET} " * 2000))
    assert SECRET.encode() in db.read_bytes() + _wal(db)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agenttrail.cli",
            "erase",
            "s",
            "2",
            "5",
            "--reason",
            "x",
            "--db",
            db,
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "erased s  seq 2, 5  recorded at seq 6\n"
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        if path.exists():
            assert SECRET.encode() not in path.read_bytes(), path.name
    checked = run_cli("verify", "--db", str(db))
    assert checked.returncode == 0
    assert "erased: seq 2, 5" in checked.stdout


def _wal(db: Path) -> bytes:
    wal = db.with_name(db.name + "-wal")
    return wal.read_bytes() if wal.exists() else b""


def test_postgresql_keeps_only_the_digest_of_an_erased_row(postgres_url: str) -> None:
    from tests.conftest import postgres_schema

    with postgres_schema(postgres_url) as url:
        with open_store(url) as store:
            _session(store)
            store.erase("s", [2], by="me", reason="r")
            assert audit(store, ["s"])[0].erased == (2,)
        with owner_connection(url) as conn:
            row = conn.execute(
                "SELECT payload, salt, digest IS NOT NULL FROM session_events "
                "WHERE session_id = 's' AND seq = 2"
            ).fetchone()
        assert row == (b"", None, True)


def test_migrate_copies_erasures_and_keeps_v1_as_v1(db_url: str, tmp_path: Path) -> None:
    # A v1 log written by the code before chain v2 (tests/data/make_v1_log.py), plus a v2
    # session with an erasure, copied to the other backend: each keeps its chain version.
    source = tmp_path / "v1.db"
    shutil.copyfile(V1_LOG, source)
    with open_store(source) as src:
        assert {s.id: s.chain_version for s in src.sessions()} == {
            "sample-harvey-session": 1,
            "loan-advice": 1,
            "v1-empty": 1,
        }
        assert all(v.ok for v in verify(src))  # v1 logs still verify, as v1
        # Their idempotency keys were chained by the upgrade to schema version 4.
        keyed = {sid: len(src.event_keys(sid)) for sid in ("sample-harvey-session", "loan-advice")}
        assert sum(keyed.values()) == 16
        assert {sid: src.key_chain(sid).rows_chained for sid in keyed} == keyed
        assert all(v.ok for v in audit(src))
        _session(src, "new")
        src.erase("new", [2], by="me", reason="r")
        with open_store(db_url) as dst:
            report = migrate(src, dst)
            assert report.ok
            versions = {s.id: s.chain_version for s in dst.sessions()}
            assert versions == {
                "sample-harvey-session": 1,
                "loan-advice": 1,
                "v1-empty": 1,
                "new": 2,
            }
            verdicts = {v.session_id: v for v in audit(dst)}
            assert all(v.ok for v in verdicts.values())
            assert {sid: dst.key_chain(sid).rows_chained for sid in keyed} == keyed
            assert verdicts["new"].erased == (2,)
            assert dst.erasures("new") == [(2, 5)]
            for sid in versions:  # the very rows: chains intact
                assert list(dst.read_rows(sid)) == list(src.read_rows(sid))
    if not is_postgres(db_url):  # the v1 file, migrated on open to the current schema
        with sqlite3.connect(db_url) as conn:
            assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_every_reader_shows_an_erased_event_as_erased(tmp_path: Path) -> None:
    # show, export, Fountain and replay read the event by one rule (model/reading.py): the
    # erased payload, never its bytes.
    db = str(tmp_path / "agenttrail.db")
    with open_store(db) as store:
        _session(store)
        store.erase("s", [2], by="me", reason="leak")
    for command in (["show", "s"], ["export", "s"], ["fountain", "s"]):
        shown = run_cli(*command, "--db", db)
        assert shown.returncode == 0, shown.stderr
        assert SECRET not in shown.stdout
        assert "erased" in shown.stdout, command
    replayed = run_cli("replay", "s", "--format", "openai", "--db", db)
    assert replayed.returncode == 0, replayed.stderr
    assert SECRET not in replayed.stdout and "my key?" in replayed.stdout
    # The erasure event itself reads as the store's note, spoken by the system.
    shown = run_cli("show", "s", "--db", db).stdout
    assert "erased seq 2 by me: leak" in shown
    exported = [json.loads(line) for line in run_cli("export", "s", "--db", db).stdout.splitlines()]
    assert [e["actor"] for e in exported if e["payload"]["type"] == "erasure"] == ["system"]
    # The erased event reads as the store's note, so as the system too: who wrote it is gone.
    assert [e["actor"] for e in exported if e.get("erased")] == ["system"]
    assert "│ system │ erased" in shown
    # Fountain writes both as show does (docs/fountain-format.md, Other events), not as JSON.
    fountain = run_cli("fountain", "s", "--db", db).stdout
    assert "[[erased: erased seq 2 by me: leak]]" in fountain
    assert "[[erasure: erased seq 2 by me: leak]]" in fountain
    assert "payload erased" not in fountain


def test_erase_says_when_the_title_holds_the_erased_text(tmp_path: Path) -> None:
    # An import titles a session with its first prompt's first line, and a session's fields
    # are covered by its chain: erasing that prompt leaves the title. erase says so.
    db = str(tmp_path / "agenttrail.db")
    with open_store(db) as store:
        store.create_session(NewSession(id="s", title=f"{SECRET}: my order"))
        store.append(
            "s",
            events.message("user", [{"type": "text", "text": f"{SECRET}: my order\nwhere is it?"}]),
        )
        store.append("s", events.message("assistant", "on its way"))
    quiet = run_cli("erase", "s", "2", "--reason", "asked", "--db", db)
    assert (quiet.returncode, quiet.stderr) == (0, "")
    done = run_cli("erase", "s", "1", "--reason", "asked", "--db", db)
    assert done.returncode == 0
    assert done.stdout == "erased s  seq 1  recorded at seq 4\n"
    assert done.stderr == (
        "warning: the session's title is the first line of seq 1, erased now: a session's "
        "fields are covered by its chain and cannot be erased, so sessions, search and the "
        "exports still show it (docs/log-format.md, Erasure)\n"
    )


def _tool_session(store: LogStore) -> None:
    store.create_session(NewSession(id="t", title="tools", user="ada"))
    store.append("t", events.message("user", "read my notes"))
    store.append("t", events.tool_call("call_1", "read_file", {"path": "notes.txt"}))
    store.append("t", events.tool_result("call_1", output=f"notes: {SECRET}"))
    store.append("t", events.message("assistant", "done"))


def test_an_erased_result_stays_paired_with_its_call(store: LogStore, tmp_path: Path) -> None:
    from agenttrail.views.pairing import pair_tool_calls
    from agenttrail.views.transcript import IndexCache

    _tool_session(store)
    store.erase("t", [3], by="ops", reason="personal data")
    read = list(store.read("t"))
    # the record keeps the result's type and call id, what pairing needs, and no content
    assert read[4].payload == {
        "type": "erasure",
        "seqs": [3],
        "by": "ops",
        "reason": "personal data",
        "kept": [{"seq": 3, "type": "tool_result", "toolCallId": "call_1"}],
    }
    assert SECRET not in json.dumps(read[4].payload)
    (verdict,) = audit(store, ["t"])
    assert (verdict.ok, verdict.erased) == (True, (3,))
    pairing = pair_tool_calls(read)
    # it was flagged `call with no result` once the result's id was gone
    assert pairing.anomalies == {}
    assert pairing.result_of[2].seq == 3 and pairing.result_of[2].erased
    assert pairing.erased == {3: "erased seq 3 by ops: personal data"}
    rows = IndexCache().page(store, "t", after_seq=0, limit=10).rows
    [tool] = [r for r in rows if r["view"] == "tool"]
    assert (tool["status"], tool["result_seq"], tool["anomaly"]) == ("erased", 3, None)
    assert tool["result_text"] == "erased seq 3 by ops: personal data"
    exported = [json.loads(line) for line in jsonl_from_log(store, "t")]
    assert [e["anomalies"] for e in exported] == [[]] * 5
    from agenttrail.formats.fountain import fountain_from_events

    fountain = fountain_from_events(store.get_session("t"), read)
    # it said `— ok` for the erased result once pairing kept it
    assert '[[tool: read_file({"path":"notes.txt"}) — erased seq 3 by ops: personal data]]' in (
        fountain
    )


def test_show_and_export_say_a_result_was_erased(tmp_path: Path) -> None:
    from agenttrail.views.transcript import IndexCache

    db = str(tmp_path / "agenttrail.db")
    with open_store(db) as store:
        _tool_session(store)
        store.erase("t", [2, 3], by="ops", reason="personal data")  # the call and its result
    shown = run_cli("show", "t", "--db", db).stdout
    assert "⚠" not in shown
    assert "2→3" in shown and "its result — erased seq 3 by ops: personal data" in shown
    md = run_cli("export", "t", "--format", "md", "--db", db).stdout
    assert (
        "### 2→3 · system · erased seq 2 by ops: personal data\n\n"
        "its result — erased seq 3 by ops: personal data\n"
    ) in md
    assert "### 3 ·" not in md and SECRET not in md  # the result is on its call's entry
    fountain = run_cli("fountain", "t", "--db", db).stdout
    assert (  # a dash in a note's text is escaped (docs/fountain-format.md, Escaping)
        "[[erased: erased seq 2 by ops: personal data; "
        "its result \\— erased seq 3 by ops: personal data]]"
    ) in fountain
    assert fountain.count("[[erased:") == 1  # the result is on its call's note
    with open_store(db) as store:
        kept = list(store.read("t"))[4].payload["kept"]
        rows = IndexCache().page(store, "t", after_seq=0, limit=10).rows
    # the viewer: the erased call says who and why; its result keeps a row of its own
    by_seq = {r["seq"]: r for r in rows}
    assert (by_seq[2]["view"], by_seq[2]["text"]) == ("note", "erased seq 2 by ops: personal data")
    assert by_seq[3]["view"] != "hidden"
    assert kept == [
        {"seq": 2, "type": "tool_call", "id": "call_1"},
        {"seq": 3, "type": "tool_result", "toolCallId": "call_1"},
    ]


def test_erasing_takes_the_text_out_of_the_search_index(db_url: str) -> None:
    # The index keeps a copy of each event's text (docs/search.md): an erasure must take it
    # too, or search would still find, and the file still hold, what was erased.
    from agenttrail.views.search import search

    with open_store(db_url) as store:
        _session(store)
        assert [m.session_id for m in search(store, "elm street", store.sessions())] == ["s"]
        store.erase("s", [2], by="dpo", reason="personal data")
        assert search(store, "elm street", store.sessions()) == []
        assert search(store, "Springfield", store.sessions()) == []
        # the rest stays found, and the erased event is not indexed again
        assert [m.session_id for m in search(store, "thanks", store.sessions())] == ["s"]
        store.append("s", events.message("user", "Springfield again"))
        [match] = search(store, "springfield", store.sessions())
        assert [hit.seq for hit in match.hits] == [6]


def test_the_erased_text_leaves_the_sqlite_search_index(tmp_path: Path) -> None:
    db = tmp_path / "agenttrail.db"
    with open_store(db) as store:
        _session(store)
        for n in range(50):  # more index rows than the erased one, in several segments
            store.append("s", events.message("user", f"note {n}"))
            assert run_cli("search", "note", "--db", str(db)).returncode == 0
    folded = SECRET.lower().encode()
    assert folded in db.read_bytes() + _wal(db)  # the index's folded copy
    segments = _fts_blocks(db)
    done = run_cli("erase", "s", "2", "--reason", "x", "--db", str(db))
    assert done.returncode == 0, done.stderr
    for path in (db, db.with_name(db.name + "-wal")):
        if path.exists():
            assert SECRET.encode() not in path.read_bytes(), path.name
            assert folded not in path.read_bytes(), path.name
    # FTS5 keeps a deleted row's trigrams in its segments until they merge: every segment
    # block that existed before the erasure is gone (merged into new ones, pages zeroed).
    assert segments and not segments & _fts_blocks(db)
    assert run_cli("search", "note 7", "--db", str(db)).returncode == 0


def _fts_blocks(db: Path) -> set[int]:
    """The ids of the trigram table's segment blocks (``search_text_data``; ids 1 and 10 are
    its averages and structure records, https://www.sqlite.org/fts5.html)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id FROM search_text_data WHERE id > 10").fetchall()
    return {int(r[0]) for r in rows}
