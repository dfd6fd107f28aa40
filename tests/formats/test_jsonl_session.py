"""The JSON Lines export carries the session and the idempotency keys (docs/log-format.md,
Export), and our own JSONL without hashes or with other RFC 3339 times imports re-chained.

Sessions come from real Claude Code transcripts read in place from ``../shared/realdata``
(SOURCES.md rows cited in ``tests/formats/test_claude_code.py``), imported and exported with
the real CLI into real SQLite logs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import open_store
from tests.conftest import REALDATA, run_cli

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
    # the lines older agenttrail wrote: no `key`, no `session`
    with open_store(str(tmp_path / "first.db")) as store:
        [report] = import_paths(store, [TRANSCRIPTS[1]])
        old = "".join(line + "\n" for line in jsonl_from_events(store.read(report.session_id)))
    assert '"key"' not in old and '"session"' not in old
    path = tmp_path / "old.jsonl"
    path.write_text(old, encoding="utf-8")
    with open_store(str(tmp_path / "second.db")) as store:
        [imported] = import_paths(store, [path])
        assert imported.written == report.written
        rows = "".join(line + "\n" for line in jsonl_from_events(store.read(report.session_id)))
    assert rows == old
