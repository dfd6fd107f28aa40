"""The JSON Lines export carries the session and the idempotency keys (docs/log-format.md,
Export), and our own JSONL without hashes or with other RFC 3339 times imports re-chained.

Sessions come from real Claude Code transcripts read in place from ``../shared/realdata``
(SOURCES.md rows cited in ``tests/formats/test_claude_code.py``), imported and exported with
the real CLI into real SQLite logs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest.importer import import_paths
from agenttrail.ingest.sample import SAMPLE_SESSION_ID
from agenttrail.log.store import open_store
from tests.conftest import REALDATA, V1_LOG, run_cli

TRANSCRIPTS = [
    REALDATA / "claude-code-spotter" / "tool_heavy.jsonl",
    REALDATA / "claude-code-simonw" / "sample_session.jsonl",
]


def _export(db: Path, session_id: str, out: Path) -> bytes:
    done = run_cli("export", session_id, "--db", str(db), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out.read_bytes()


def _session_json(db: Path, session_id: str) -> dict[str, object]:
    done = run_cli("sessions", "--json", "--db", str(db))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    [found] = [s for s in rows if s["id"] == session_id]
    return dict(found)


@pytest.mark.parametrize("source", TRANSCRIPTS, ids=lambda p: p.name)
def test_export_import_keeps_the_session_and_its_keys(source: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    with open_store(str(first)) as store:
        [report] = import_paths(store, [source])
    sid = report.session_id
    exported = _export(first, sid, tmp_path / "one.jsonl")
    done = run_cli("import", str(tmp_path / "one.jsonl"), "--db", str(second))
    assert done.returncode == 0, done.stderr
    # the session row is the same: title, agent, user, workspace, started, metadata
    assert _session_json(second, sid) == _session_json(first, sid)
    assert _export(second, sid, tmp_path / "two.jsonl") == exported
    # the idempotency keys came along: importing the original source writes nothing
    with open_store(str(second)) as store:
        [again] = import_paths(store, [source])
        assert (again.written, again.skipped) == (0, report.written)
        keys = store.event_keys(sid)
    with open_store(str(first)) as store:
        assert keys == store.event_keys(sid)


def test_an_export_without_session_or_keys_still_imports(tmp_path: Path) -> None:
    # the lines older agenttrail wrote: no `key`, no `session`, no `salt` (chain v1), from a
    # log written by the code before chain v2 (tests/data/make_v1_log.py)
    db = tmp_path / "v1.db"
    shutil.copyfile(V1_LOG, db)
    with open_store(str(db)) as store:
        old = "".join(line + "\n" for line in jsonl_from_events(store.read(SAMPLE_SESSION_ID)))
        written = store.get_session(SAMPLE_SESSION_ID).head_seq
    assert '"key"' not in old and '"session"' not in old and '"salt"' not in old
    path = tmp_path / "old.jsonl"
    path.write_text(old, encoding="utf-8")
    with open_store(str(tmp_path / "second.db")) as store:
        [imported] = import_paths(store, [path])
        assert imported.written == written
        assert store.get_session(SAMPLE_SESSION_ID).chain_version == 1
        rows = "".join(line + "\n" for line in jsonl_from_events(store.read(SAMPLE_SESSION_ID)))
    assert rows == old


def _export_lines(tmp_path: Path) -> tuple[list[dict[str, object]], str]:
    with open_store(str(tmp_path / "source.db")) as store:
        [report] = import_paths(store, [TRANSCRIPTS[1]])
        session = store.get_session(report.session_id)
        events = store.read(report.session_id)
        lines = [json.loads(line) for line in jsonl_from_events(events, session=session)]
    return lines, report.session_id


def _write_lines(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


NORMALISED = {
    "2026-06-24T10:00:05Z": "2026-06-24T10:00:05.000000Z",
    "2026-06-24T12:00:05.5+02:00": "2026-06-24T10:00:05.500000Z",
    "2026-06-24t10:00:05.000000z": "2026-06-24T10:00:05.000000Z",
    "2026-06-24 10:00:05.123456789Z": "2026-06-24T10:00:05.123456Z",
}


@pytest.mark.parametrize(
    "change",
    [
        "no hash",
        "2026-06-24T10:00:05Z",
        "2026-06-24T12:00:05.5+02:00",
        "2026-06-24t10:00:05.000000z",
        "2026-06-24 10:00:05.123456789Z",
    ],
)
def test_our_jsonl_without_hash_or_with_other_times_is_rechained(
    change: str, tmp_path: Path
) -> None:
    lines, sid = _export_lines(tmp_path)
    for line in lines:
        if change == "no hash":
            del line["hash"]
        else:
            line["created_at"] = change
            del line["hash"]  # a producer that is not agenttrail: no chain of ours
    path = _write_lines(tmp_path / "third-party.jsonl", lines)
    db = tmp_path / "log.db"
    done = run_cli("import", str(path), "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "new chain" in done.stderr and sid in done.stderr
    with open_store(str(db)) as store:
        session = store.get_session(sid)
        assert "rechained" in session.metadata
        events = list(store.read(sid))
        assert [e.payload for e in events] == [line["payload"] for line in lines]
        if change != "no hash":  # normalised: UTC, microseconds, Z (docs/log-format.md)
            assert {e.created_at for e in events} == {NORMALISED[change]}
    assert run_cli("verify", "--db", str(db)).returncode == 0
    # a second import of the same file writes nothing
    again = run_cli("import", str(path), "--db", str(db))
    assert again.returncode == 0 and sid in again.stdout
    with open_store(str(db)) as store:
        assert store.get_session(sid).head_seq == len(lines)


def test_a_hash_is_checked_even_when_the_session_is_rechained(tmp_path: Path) -> None:
    lines, _ = _export_lines(tmp_path)
    del lines[0]["hash"]  # re-chained ...
    lines[-1]["payload"] = {"type": "message", "role": "user", "content": "altered"}
    path = _write_lines(tmp_path / "altered.jsonl", lines)
    done = run_cli("import", str(path), "--db", str(tmp_path / "log.db"))
    assert done.returncode == 2
    assert f"altered.jsonl:{len(lines)}: field 'hash'" in done.stderr


def test_a_rechained_session_does_not_extend_a_chained_one(tmp_path: Path) -> None:
    lines, sid = _export_lines(tmp_path)
    db = tmp_path / "log.db"
    with open_store(str(db)) as store:
        import_paths(store, [TRANSCRIPTS[1]])
    for line in lines:
        del line["hash"]
    path = _write_lines(tmp_path / "bare.jsonl", lines)
    done = run_cli("import", str(path), "--db", str(db))
    assert done.returncode == 2
    assert f"session {sid} already exists" in done.stderr


def test_an_export_cut_short_at_a_line_end_is_refused(tmp_path: Path) -> None:
    # every line left verifies, so only the head the first line states shows the cut
    db = tmp_path / "first.db"
    with open_store(str(db)) as store:
        [report] = import_paths(store, [TRANSCRIPTS[0]])
        head = store.get_session(report.session_id).head_seq
    exported = _export(db, report.session_id, tmp_path / "whole.jsonl").splitlines()
    first, last = json.loads(exported[0]), json.loads(exported[-1])
    assert (first["session"]["head_seq"], first["session"]["head_hash"]) == (head, last["hash"])
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(line + b"\n" for line in exported[:-3]))
    done = run_cli("import", str(cut), "--db", str(tmp_path / "second.db"))
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {cut}:{head - 3}: session {report.session_id} ends at seq {head - 3} where its "
        f"first line says the export holds {head} events: the file was cut short\n"
    )
    assert not (tmp_path / "second.db").exists()


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"head_seq": "12"}, "field 'session.head_seq': expected a seq"),
        ({"head_seq": 0}, "field 'session.head_seq': expected a seq"),
        ({"head_hash": "ab"}, "field 'session.head_hash': expected 64 hex digits"),
        ({"head_hash": "0" * 64}, "field 'hash': session"),
    ],
)
def test_a_head_that_does_not_fit_the_export_is_refused(
    change: dict[str, object], said: str, tmp_path: Path
) -> None:
    lines, _ = _export_lines(tmp_path)
    assert lines[0]["session"]["head_seq"] == len(lines)  # type: ignore[index]
    lines[0]["session"] |= change  # type: ignore[operator]
    path = _write_lines(tmp_path / "edited.jsonl", lines)
    done = run_cli("import", str(path), "--db", str(tmp_path / "log.db"))
    assert done.returncode == 2
    assert said in done.stderr and "Traceback" not in done.stderr
