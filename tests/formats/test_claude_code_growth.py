"""A Claude Code transcript imported while it grows reads as the file imported once.

Claude Code appends to a live transcript, one line per content block of one API message
(docs/log-format.md, Reading a session). Each test imports every line-boundary prefix of a real
transcript, in order, into one real SQLite log, then the whole file, and compares the session
read through :func:`agenttrail.model.parts.whole_messages` (messages, tool calls, results,
errors and the usage totals) with a single import of the whole file into another log.

Real files are read in place from ``../shared/realdata`` (``SOURCES.md`` rows
"claude-code-spotter/<file> | marot/spotter | test/fixtures/transcripts/<file>" and
"claude-code-simonw/sample_session.jsonl | simonw/claude-code-transcripts |
tests/sample_session.jsonl"). They are short (8 to 40 lines), so every cut is taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agenttrail.formats import claude_code
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import Event
from agenttrail.model.parts import whole_messages
from agenttrail.replay import to_anthropic
from tests.conftest import REALDATA, run_cli

SPOTTER = REALDATA / "claude-code-spotter"
REAL_FILES = [
    SPOTTER / "short.jsonl",
    SPOTTER / "tool_heavy.jsonl",
    SPOTTER / "agent-aac57f5.jsonl",
    REALDATA / "claude-code-simonw" / "sample_session.jsonl",
]

_KINDS = ("message", "tool_call", "tool_result", "error")


def logical(events: list[Event]) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    """The logical session: each message, call, result and error as its payload without the
    ``source`` bookkeeping, in order; and the usage totals of the assistant messages."""
    shown = [
        tuple(sorted((k, repr(v)) for k, v in e.payload.items() if k != "source"))
        for e in whole_messages(events)
        if e.type in _KINDS
    ]
    totals = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "messages": 0}
    for event in whole_messages(events):
        meta = event.payload.get("meta") if event.type == "message" else None
        usage = meta.get("usage") if isinstance(meta, dict) else None
        if isinstance(usage, dict):
            totals["messages"] += 1
            for name in ("input", "output", "cache_read", "cache_write"):
                totals[name] += usage.get(name) or 0
    return shown, totals


def _session_events(store: LogStore, path: Path) -> list[Event]:
    [imported] = claude_code.read(path, path.read_bytes())
    assert imported.session.id is not None
    return list(store.read(imported.session.id))


@pytest.mark.parametrize("source", REAL_FILES, ids=lambda p: p.name)
def test_every_prefix_then_the_whole_file_reads_as_one_import(source: Path, tmp_path: Path) -> None:
    lines = source.read_bytes().splitlines(keepends=True)
    live = tmp_path / "live" / source.name  # same name: the session id may come from it
    live.parent.mkdir()
    once = tmp_path / "once" / source.name
    once.parent.mkdir()
    once.write_bytes(source.read_bytes())
    with (
        open_store(str(tmp_path / "grown.db")) as grown,
        open_store(str(tmp_path / "one.db")) as one,
    ):
        for cut in range(1, len(lines) + 1):
            live.write_bytes(b"".join(lines[:cut]))
            import_paths(grown, [live])
        import_paths(one, [once])
        grown_events = _session_events(grown, live)
        one_events = _session_events(one, once)
    assert logical(grown_events) == logical(one_events)
    # replay sends each message once, and the same list as the single import
    assert to_anthropic(grown_events).messages == to_anthropic(one_events).messages


def test_a_message_cut_in_its_middle_is_stored_in_parts_and_read_once(tmp_path: Path) -> None:
    # short.jsonl lines 5-10 are one API message (msg_01MKH1…, by jq: thinking, text, text,
    # tool_use, tool_use). Cut after line 7, the log holds the part seen first and then the
    # whole message (stored rows are never changed); the view shows the whole one, once,
    # followed by both calls; `show` and `fountain` print its text once.
    lines = (SPOTTER / "short.jsonl").read_bytes().splitlines(keepends=True)
    live = tmp_path / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl"
    db = str(tmp_path / "log.db")
    with open_store(db) as store:
        live.write_bytes(b"".join(lines[:7]))
        import_paths(store, [live])
        live.write_bytes(b"".join(lines))
        import_paths(store, [live])
        stored = _session_events(store, live)
    msg = "msg_01MKH1ccEGrZGNPvu8pYiiQa"
    parts = [e for e in stored if e.type == "message" and e.payload.get("messageId") == msg]
    assert len(parts) == 2
    shown = whole_messages(stored)
    merged = [e for e in shown if e.type == "message" and e.payload.get("messageId") == msg]
    assert len(merged) == 1
    assert merged[0].seq == parts[0].seq
    assert merged[0].payload == parts[1].payload
    after = shown[shown.index(merged[0]) + 1 : shown.index(merged[0]) + 3]
    assert [e.type for e in after] == ["tool_call", "tool_call"]
    assert len(shown) == len(stored) - 1
    text = "Let me check the project structure"  # line 7, in both stored parts
    assert sum(text in e.payload.get("content", "") for e in parts) == 2
    for command in ("show", "fountain"):
        out = run_cli(command, live.stem, "--db", db)
        assert out.returncode == 0, out.stderr
        assert out.stdout.count(text) == 1, command
