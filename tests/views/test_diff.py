"""``agenttrail diff`` (agenttrail.views.diff) on a real Claude Code session and copies of it
changed here at one known point: the first divergence found is the one made."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.views.diff import diff_sessions
from tests.conftest import REALDATA, run_cli

# marot/spotter test/fixtures/transcripts/tool_heavy.jsonl (the real data's SOURCES.md)
TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"
# Its Glob call (line 31 of the file) and the line answering it (line 32), found with
# grep toolu_01JJds55jYrYwd9TktNGndRY.
GLOB_CALL = "toolu_01JJds55jYrYwd9TktNGndRY"
COPY_ID = "11111111-2222-4333-8444-555555555555"


def _copy(tmp_path: Path, change: Any) -> Path:
    """tool_heavy.jsonl under another session id, each record passed through ``change``."""
    lines = []
    for line in TOOL_HEAVY.read_text().splitlines():
        record = json.loads(line)
        if "sessionId" in record:
            record["sessionId"] = COPY_ID
        change(record)
        lines.append(json.dumps(record))
    path = tmp_path / "copy.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _blocks(record: dict[str, Any]) -> list[dict[str, Any]]:
    content = (record.get("message") or {}).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _other_glob_result(record: dict[str, Any]) -> None:
    for block in _blocks(record):
        if block.get("type") == "tool_result" and block.get("tool_use_id") == GLOB_CALL:
            block["content"] = "/home/marco/projects/spotter/assets/js/other.js"
            record.pop("toolUseResult", None)


def _other_glob_pattern(record: dict[str, Any]) -> None:
    for block in _blocks(record):
        if block.get("type") == "tool_use" and block.get("id") == GLOB_CALL:
            block["input"] = {**block["input"], "pattern": "**/*.ts"}


def _seq(store: LogStore, sid: str, kind: str, key: str) -> int:
    """The seq of the event of ``kind`` whose call id is the Glob call's, read from the log."""
    (seq,) = [e.seq for e in store.read(sid) if e.type == kind and e.payload.get(key) == GLOB_CALL]
    return seq


def test_a_changed_tool_result_is_the_first_divergence(store: LogStore, tmp_path: Path) -> None:
    (original,) = import_paths(store, [TOOL_HEAVY])
    (changed,) = import_paths(store, [_copy(tmp_path, _other_glob_result)])
    result = diff_sessions(store.read(original.session_id), store.read(changed.session_id))
    first = result.first
    assert first is not None
    seq = _seq(store, original.session_id, "tool_result", "toolCallId")
    assert [first.tag, first.a[0].seq, first.b[0].seq] == ["changed", seq, seq]
    assert [c.field for c in first.changes] == ["output"]
    assert first.changes[0].b == "/home/marco/projects/spotter/assets/js/other.js"
    assert first.a[0].label() == "tool result Glob"
    assert result.prefix == sum(1 for s in result.a if s.seq < seq)


def test_a_changed_tool_input_is_the_first_divergence(store: LogStore, tmp_path: Path) -> None:
    (original,) = import_paths(store, [TOOL_HEAVY])
    (changed,) = import_paths(store, [_copy(tmp_path, _other_glob_pattern)])
    first = diff_sessions(store.read(original.session_id), store.read(changed.session_id)).first
    assert first is not None
    seq = _seq(store, original.session_id, "tool_call", "id")
    assert (first.a[0].seq, first.a[0].label()) == (seq, "tool call Glob")
    (change,) = first.changes
    assert change.field == "input" and change.b["pattern"] == "**/*.ts"


def test_diff_command(db_path: Path, tmp_path: Path) -> None:
    db = str(db_path)
    copy = _copy(tmp_path, _other_glob_result)
    assert run_cli("import", str(TOOL_HEAVY), str(copy), "--db", db).returncode == 0
    a = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"  # tool_heavy.jsonl's sessionId
    same = run_cli("diff", a, a, "--db", db)
    assert same.returncode == 0, same.stderr
    assert "identical: all" in same.stdout
    differ = run_cli("diff", a, COPY_ID, "--json", "--db", db)
    assert differ.returncode == 1, differ.stderr
    report = json.loads(differ.stdout)
    assert (report["identical"], report["first"]["tag"]) == (False, "changed")
    assert report["first"]["a"]["step"] == "tool result Glob"
    assert report["first"]["changes"][0]["field"] == "output"
    text = run_cli("diff", a, COPY_ID, "--db", db).stdout
    assert "    + /home/marco/projects/spotter/assets/js/other.js" in text
    # each side's id and steps, then its tokens and cost under it: lines an 80-column
    # terminal holds
    header = text.splitlines()[:4]
    assert re.fullmatch(f"A: {a} · \\d+ steps", header[0]), text
    assert re.fullmatch(f"B: {COPY_ID} · \\d+ steps", header[2]), text
    assert header[1].startswith("   ") and " cache read · " in header[1], text
    assert all(len(line) <= 80 for line in header), header
    # B in another log: the session exported and imported into a new one is alike
    exported = tmp_path / "a.jsonl"
    assert run_cli("export", a, "-o", str(exported), "--db", db).returncode == 0
    other = str(tmp_path / "other.db")
    assert run_cli("import", str(exported), "--db", other).returncode == 0
    across = run_cli("diff", a, a[:8], "--db", db, "--b-db", other)
    assert across.returncode == 0, across.stderr
    assert "identical: all" in across.stdout
    missing = run_cli("diff", a, COPY_ID, "--db", db, "--b-db", other)
    assert missing.returncode == 2 and COPY_ID in missing.stderr


SIMONW = REALDATA / "claude-code-simonw" / "sample_session.jsonl"
"""SOURCES.md: simonw/claude-code-transcripts tests/sample_session.jsonl (no usage recorded)."""


def test_diff_names_cost_as_every_command_does(db_path: Path, tmp_path: Path) -> None:
    db = str(db_path)
    home = {"HOME": str(tmp_path)}  # no ~/.claude/projects: quickstart records the sample
    assert run_cli("quickstart", "--db", db, env=home).returncode == 0
    assert run_cli("import", str(SIMONW), "--db", db).returncode == 0
    said = run_cli("diff", "sample-harvey-session", "test-session-id", "--db", db).stdout
    a, b = said.splitlines()[1:4:2]  # each side's tokens, on the line under its id
    # the sample's llama3 and mistral calls are not in the price table: unknown, as show says
    assert a == "   2,019 in · 45 out · cost unknown", a
    shown = run_cli("show", "sample-harvey-session", "--db", db).stdout
    assert "· 2,019 in · 45 out\ncost: unknown\n" in shown
    # the transcript reports no usage: no cost at all (it printed `cost -`), as show's header
    assert b == "   no usage reported", b
    assert "usage:" not in run_cli("show", "test-session-id", "--db", db).stdout


def test_the_text_counts_steps_as_a_reader_says_them(db_path: Path) -> None:
    # "alike for the first 0 steps" and "1 more steps" were printed as written
    db = str(db_path)
    with open_store(db) as store:
        for sid, texts in (("a", ["first", "x"]), ("b", ["other", "more", "x"])):
            store.create_session(NewSession(id=sid, title=sid))
            roles = ["user"] * (len(texts) - 1) + ["assistant"]
            store.append_batch(
                sid, [NewEvent(events.message(r, t)) for r, t in zip(roles, texts, strict=True)]
            )
    lines = run_cli("diff", "a", "b", "--db", db).stdout.splitlines()
    assert lines[4:7] == [
        "they part at:",
        "  A seq 1 (turn 1): user message",
        "  B seq 1 (turn 1): user message and 1 more step",
    ]
    assert "identical: all 2 steps alike" in run_cli("diff", "a", "a", "--db", db).stdout
