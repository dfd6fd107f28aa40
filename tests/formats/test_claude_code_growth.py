"""A Claude Code transcript imported while it grows reads as the file imported once.

Claude Code appends to a live transcript, one line per content block of one API message
(docs/log-format.md, Reading a session). Each test imports every line-boundary prefix of a real
transcript, in order, into one real SQLite log, then the whole file, and compares the session
as each reader shows it with a single import of the whole file into another log: read through
:func:`agenttrail.model.parts.whole_messages` (messages, tool calls, results, errors and the
usage totals), replayed, as the web viewer's rows (read page by page as the log grows, the way
the live page reads them, earlier rows replaced by the pages' ``updates``), and searched.

Real files are read in place from ``../shared/realdata`` (``SOURCES.md`` rows
"claude-code-spotter/<file> | marot/spotter | test/fixtures/transcripts/<file>" and
"claude-code-simonw/sample_session.jsonl | simonw/claude-code-transcripts |
tests/sample_session.jsonl"). They are short (8 to 40 lines), so every cut is taken.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agenttrail.formats import claude_code
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import Event
from agenttrail.model.parts import whole_messages
from agenttrail.replay import to_anthropic
from agenttrail.views.search import search
from agenttrail.views.transcript import IndexCache, TranscriptIndex
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


_SEQ_FIELDS = frozenset({"seq", "place", "hash", "shown_at", "result_seq", "call_seq"})
"""Row fields that name seqs or chain hashes, which differ between the two logs."""


def reading(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a reader sees of the viewer's rows: the visible ones in reading order (by
    ``place``, then seq), without the fields that name seqs or hashes."""
    visible = [r for r in rows if r["view"] != "hidden"]
    out = []
    for row in sorted(visible, key=lambda r: (r["place"], r["seq"])):
        shown = {k: v for k, v in row.items() if k not in _SEQ_FIELDS}
        if isinstance(row.get("result"), dict):
            shown["result"] = {k: v for k, v in row["result"].items() if k not in _SEQ_FIELDS}
        out.append(shown)
    return out


def _session_id(path: Path) -> str:
    [imported] = claude_code.read(path, path.read_bytes())
    assert imported.session.id is not None
    return imported.session.id


def _session_events(store: LogStore, path: Path) -> list[Event]:
    return list(store.read(_session_id(path)))


def _files(source: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Where the file grows (``live``) and where it is whole from the start (``once``), under
    the source's own name: the session id may come from it."""
    live = tmp_path / "live" / source.name
    live.parent.mkdir()
    once = tmp_path / "once" / source.name
    once.parent.mkdir()
    once.write_bytes(source.read_bytes())
    return live, once


def _grow(store: LogStore, source: Path, live: Path) -> Iterator[int]:
    """Write every line-boundary prefix of ``source`` to ``live`` and import each; yields the
    number of lines imported after each import."""
    lines = source.read_bytes().splitlines(keepends=True)
    for cut in range(1, len(lines) + 1):
        live.write_bytes(b"".join(lines[:cut]))
        import_paths(store, [live])
        yield cut


@contextmanager
def _grown_and_once(source: Path, tmp_path: Path) -> Iterator[tuple[LogStore, LogStore, str]]:
    """Two real logs: ``source`` imported at every prefix, then whole (``grown``), and imported
    once (``one``); yields them and the session id."""
    live, once = _files(source, tmp_path)
    with (
        open_store(str(tmp_path / "grown.db")) as grown,
        open_store(str(tmp_path / "one.db")) as one,
    ):
        for _ in _grow(grown, source, live):
            pass
        import_paths(one, [once])
        yield grown, one, _session_id(once)


@pytest.mark.parametrize("source", REAL_FILES, ids=lambda p: p.name)
def test_every_prefix_then_the_whole_file_reads_as_one_import(source: Path, tmp_path: Path) -> None:
    with _grown_and_once(source, tmp_path) as (grown, one, sid):
        grown_events = list(grown.read(sid))
        one_events = list(one.read(sid))
    assert logical(grown_events) == logical(one_events)
    # replay sends each message once, and the same list as the single import
    assert to_anthropic(grown_events).messages == to_anthropic(one_events).messages


@pytest.mark.parametrize("source", REAL_FILES, ids=lambda p: p.name)
def test_every_prefix_then_the_whole_file_shows_the_viewer_rows_of_one_import(
    source: Path, tmp_path: Path
) -> None:
    live, once = _files(source, tmp_path)
    sid = _session_id(once)
    held: dict[int, dict[str, Any]] = {}  # what the live page holds, by seq
    with (
        open_store(str(tmp_path / "grown.db")) as grown,
        open_store(str(tmp_path / "one.db")) as one,
    ):
        cache = IndexCache()  # one index, extended after every import as the server's is
        after = 0
        for _ in _grow(grown, source, live):
            if sid not in {s.id for s in grown.sessions()}:
                continue  # the first lines may name no session yet
            page = cache.page(grown, sid, after_seq=after, limit=1000)
            held.update({row["seq"]: row for row in [*page.rows, *page.updates]})
            after = page.head_seq
        import_paths(one, [once])
        once_rows = IndexCache().page(one, sid, after_seq=0, limit=1000).rows
        fresh = TranscriptIndex(sid, "x")
        fresh.extend(grown.read(sid))
        fresh_rows = fresh.page(grown, limit=1000).rows
        totals = logical(_session_events(grown, live))[1]
    # the updates left no row stale: the page holds what an index built at once gives
    assert [held[seq] for seq in sorted(held)] == fresh_rows
    assert reading(list(held.values())) == reading(once_rows)
    # each message's usage is on one visible row: the rows count it once
    usage = [r["meta"]["usage"] for r in reading(fresh_rows) if r["meta"] and r["meta"]["usage"]]
    assert len(usage) == totals["messages"]
    assert sum(u["output"] or 0 for u in usage) == totals["output"]


@pytest.mark.parametrize("source", REAL_FILES, ids=lambda p: p.name)
def test_every_prefix_then_the_whole_file_is_searched_as_one_import(
    source: Path, tmp_path: Path
) -> None:
    with _grown_and_once(source, tmp_path) as (grown, one, sid):
        # the start of every assistant message's text, as a person would type it
        texts = [
            e.payload["content"].strip()[:24]
            for e in whole_messages(one.read(sid))
            if e.type == "message" and isinstance(e.payload.get("content"), str)
        ]
        queries = sorted({t for t in texts if t.strip()})
        assert queries
        for query in queries:
            [in_grown] = search(grown, query, grown.sessions(), hits_per_session=50)
            [in_one] = search(one, query, one.sessions(), hits_per_session=50)
            assert in_grown.total == in_one.total, query
            seen = [(h.type, h.actor, h.snippet) for h in in_grown.hits]
            assert seen == [(h.type, h.actor, h.snippet) for h in in_one.hits], query


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
