"""Text search across sessions (agenttrail.views.search) on real logs: matches in session
fields and in what the transcript shows of each event, counts, snippets, the case rules."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.model.search import SearchFilter
from agenttrail.views.search import SNIPPET_CHARS, event_text, search
from tests.conftest import REALDATA

# marot/spotter test/fixtures/transcripts/tool_heavy.jsonl (the real data's SOURCES.md,
# tests/conftest.py REALDATA)
TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"


def _session(store: LogStore, payloads: list[dict[str, Any]], sid: str = "s", **fields: Any) -> str:
    store.create_session(NewSession(sid, **fields))
    store.append_batch(sid, [NewEvent(p) for p in payloads])
    return sid


def test_search_finds_text_in_events_and_session_fields(store: LogStore) -> None:
    (report,) = import_paths(store, [TOOL_HEAVY])
    _session(store, [events.message("user", "Nothing here")], sid="other")
    found = search(store, "XTERM.js", store.sessions())
    assert [m.session_id for m in found] == [report.session_id]
    assert found[0].total >= 1 and "xterm.js" in found[0].hits[0].snippet.lower()
    by_title = search(store, "phoenix in", store.sessions())
    assert by_title[0].fields == ["title"]
    assert search(store, "  ", store.sessions()) == []


def test_each_kind_of_event_is_searched_in_what_the_transcript_shows_of_it() -> None:
    thinking = {"type": "thinking", "thinking": "ponder deeply"}
    message = {**events.message("assistant", "said aloud"), "blocks": [thinking]}
    assert event_text(message) == "said aloud\nponder deeply"
    assert event_text(events.tool_call("c", "grep", {"pattern": "needle"})) == (
        'grep {"pattern": "needle"}'
    )
    assert event_text({"type": "tool_call", "name": "sh", "arguments": "ls -l"}) == "sh ls -l"
    assert event_text(events.tool_result("c", output="found", error="late")) == "found late"
    assert event_text(events.error("disk full")) == "disk full"
    assert event_text(events.shell("make", "cc: ok", 0)) == "make\ncc: ok"
    assert event_text({"type": "annotation", "text": "compacted"}) == "compacted"
    assert event_text({"type": "novel", "deep": {"k": "wanted"}}) == '{"deep": {"k": "wanted"}}'


def test_every_matching_event_is_counted_and_the_first_hits_kept_in_seq_order(
    store: LogStore,
) -> None:
    payloads = [events.message("user", f"needle {i}") for i in range(7)]
    payloads.insert(3, events.message("assistant", "hay"))
    sid = _session(store, payloads, title="hay")
    (match,) = search(store, "needle", store.sessions(), hits_per_session=2)
    assert (match.session_id, match.fields, match.total) == (sid, [], 7)
    assert [(h.seq, h.type, h.actor, h.snippet) for h in match.hits] == [
        (1, "message", "user", "needle 0"),
        (2, "message", "user", "needle 1"),
    ]
    assert match.body() == {
        "session_id": sid,
        "fields": [],
        "total": 7,
        "hits": [
            {"seq": 1, "type": "message", "actor": "user", "snippet": "needle 0"},
            {"seq": 2, "type": "message", "actor": "user", "snippet": "needle 1"},
        ],
    }


def test_session_fields_match_alone_and_sessions_come_in_the_order_given(
    store: LogStore,
) -> None:
    _session(store, [], sid="a-1", title="Deploy notes", agent="harvey", user="ana")
    _session(store, [], sid="b-2", title="other", agent="Deployer", workspace="/srv/deploy")
    _session(store, [], sid="c-3", title="nothing")
    given = [store.get_session(s) for s in ("b-2", "c-3", "a-1")]
    found = search(store, "DEPLOY", given)
    assert [(m.session_id, m.fields, m.total, m.hits) for m in found] == [
        ("b-2", ["agent", "workspace"], 0, []),
        ("a-1", ["title"], 0, []),
    ]
    assert [m.session_id for m in search(store, "deploy", given, max_sessions=1)] == ["b-2"]
    assert search(store, "-2", given)[0].fields == ["id"]


def test_the_query_and_the_text_are_compared_casefolded_after_trimming_the_query(
    store: LogStore,
) -> None:
    _session(store, [events.message("user", "Straße in İstanbul, ΣΟΦΙΑ")])
    assert search(store, "  straße ", store.sessions())[0].hits[0].snippet == (
        "Straße in İstanbul, ΣΟΦΙΑ"
    )
    assert search(store, "σοφια", store.sessions())[0].total == 1
    assert search(store, "STANBUL", store.sessions())[0].total == 1
    # casefold(), not lower(): ß is ss (Unicode CaseFolding.txt, 00DF; F 0073 0073).
    assert search(store, "STRASSE", store.sessions())[0].hits[0].snippet.startswith("Straße")


def test_snippets_are_one_line_around_the_match_clipped_and_safe(store: LogStore) -> None:
    assert SNIPPET_CHARS == 60  # the expectation below counts on it
    text = "a" * 65 + "\n\tNEEDLE\x1b[2J\u202e  " + "b" * 65
    _session(store, [events.message("user", text), events.message("user", "needle at start")])
    (match,) = search(store, "needle", store.sessions())
    first, second = (h.snippet for h in match.hits)
    # 60 characters either side of the match (two of them the newline and the tab), blanks
    # collapsed to one space, control and bidi characters escaped, … where text was cut.
    assert first == "…" + "a" * 58 + " NEEDLE\\x1b[2J\\u202e " + "b" * 53 + "…"
    assert second == "needle at start"


def test_a_session_without_a_match_is_left_out(store: LogStore) -> None:
    _session(store, [events.message("user", "hello")], sid="quiet", title="calm")
    assert search(store, "storm", store.sessions()) == []
    (match,) = search(store, "HELLO", store.sessions())
    assert (match.session_id, match.total, match.hits[0].snippet) == ("quiet", 1, "hello")


def test_attachments_are_found_by_their_label_never_inside_their_base64(store: LogStore) -> None:
    # Block shapes as the providers document them (docs/log-format.md, Attachments): an
    # Anthropic image, an Anthropic document in a tool result, a Chat Completions data: URL.
    raw = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    data = base64.b64encode(raw).decode("ascii")
    png = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": data},
        "title": "quarterly.pdf",
    }
    url = {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}}
    _session(
        store,
        [
            events.message("user", [png]),
            events.tool_call("c", "read", {"path": "q.pdf"}),
            events.tool_result("c", output=[pdf]),
            events.message("user", [{"type": "text", "text": "and this"}, url]),
        ],
    )
    for piece in (data[100:124], data[-40:-20], "base64", "iVBORw0KGgo"):
        assert search(store, piece, store.sessions()) == [], piece
    (match,) = search(store, "sha256 " + hashlib.sha256(raw).hexdigest()[:8], store.sessions())
    assert [(h.seq, h.type) for h in match.hits] == [
        (1, "message"),
        (3, "tool_result"),
        (4, "message"),
    ]
    assert search(store, "quarterly.pdf", store.sessions())[0].hits[0].seq == 3
    assert f"image/png, {len(raw):,} bytes" in match.hits[0].snippet


def test_lone_surrogates_in_events_are_indexed_and_found_as_their_escapes(
    store: LogStore,
) -> None:
    # the log keeps lone surrogates (docs/log-format.md), which no database stores as text:
    # one in any event made every later search fail with a traceback, for the whole log
    meta = events.meta(model="gpt\udc81", usage=events.usage(1, 1))
    sid = _session(
        store,
        [
            events.message("user", "find me \udc81 here"),
            events.message("assistant", "ok", meta=meta),
            events.tool_call("c\udc81", "tool\ud800", {"a": "\udfff"}),
            events.tool_result("c\udc81", output="", error="failed \udc81"),
        ],
    )
    [match] = search(store, "find me", store.sessions())
    assert (match.session_id, match.hits[0].snippet) == (sid, "find me \\udc81 here")
    by_tool = search(store, "", store.sessions(), where=SearchFilter(tool="tool\\ud800"))
    assert [hit.seq for hit in by_tool[0].hits] == [3, 4]  # the result named by its call
    assert store.flagged_sessions(errors=True) == {sid}
    assert store.flagged_sessions(model="gpt\\udc81") == {sid}
    # a query holding one (an argument that is not UTF-8) finds the escape, as shown
    assert [h.seq for h in search(store, "\udc81", store.sessions())[0].hits] == [1, 4]
