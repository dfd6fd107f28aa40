"""The web viewer's rows (agenttrail.views.transcript) on a real log."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.views.transcript import RESULT_CHARS, IndexCache, TranscriptIndex
from tests.conftest import REALDATA

# marot/spotter test/fixtures/transcripts/tool_heavy.jsonl (the real data's SOURCES.md,
# tests/conftest.py REALDATA)
TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"
# marot/spotter test/fixtures/transcripts/short.jsonl (SOURCES.md, as above): lines 5-10 are one
# API message (msg_01MKH1…, by jq: text, thinking, text, tool_use, a hook progress line,
# tool_use), its results on lines 11-12.
SHORT = REALDATA / "claude-code-spotter" / "short.jsonl"


def _session(store: LogStore, payloads: list[dict[str, Any]], sid: str = "s") -> str:
    store.create_session(NewSession(sid, "t", "harvey", "ana"))
    store.append_batch(sid, [NewEvent(p) for p in payloads])
    return sid


def _rows(store: LogStore, sid: str, **kwargs: Any) -> dict[int, dict[str, Any]]:
    page = IndexCache().page(store, sid, after_seq=0, limit=1000, **kwargs)
    return {r["seq"]: r for r in page.rows}


def _run_session() -> list[dict[str, Any]]:
    side = {"agentId": "r1", "isSidechain": True}
    return [
        events.message("user", "go"),  # 1
        events.tool_call("t1", "Task", {"description": "look", "prompt": "find it"}),  # 2
        {**events.tool_call("s1", "Grep", {"p": "x"}), **side},  # 3
        events.tool_call("b1", "Bash", {"command": "make"}),  # 4
        {**events.tool_result("s1", output="hit"), **side},  # 5
        events.tool_result("b1", output="built"),  # 6
        {**events.message("assistant", "found it"), **side},  # 7
        events.tool_result(
            "t1",
            output=[{"type": "text", "text": "found it"}],
            toolUseResult={"agentId": "r1", "totalDurationMs": 4200, "totalTokens": 99},
        ),  # 8
        events.message("assistant", "done"),  # 9
    ]


def test_a_call_and_its_result_are_one_row_at_the_call(store: LogStore) -> None:
    sid = _session(
        store,
        [
            events.tool_call("a", "read", {"path": "x"}),
            events.message("user", "between"),
            events.tool_result(
                "a", output="error: no such file", meta=events.meta(duration_ms=12.5)
            ),
            events.tool_result("ghost", output="who?"),
            events.tool_call("b", "write", {}),
        ],
    )
    rows = _rows(store, sid)
    assert rows[1]["view"] == "tool" and rows[1]["result_seq"] == 3
    assert (rows[1]["status"], rows[1]["status_detail"]) == ("error", "no such file")
    assert rows[1]["duration_ms"] == 12.5 and rows[1]["result"]["seq"] == 3
    assert rows[3] == {**rows[3], "view": "hidden", "shown_at": 1}
    assert rows[4]["view"] == "result" and rows[4]["anomaly"]["kind"] == "orphan_result"
    assert rows[5]["status"] == "pending" and rows[5]["anomaly"]["kind"] == "no_result"


def test_a_finished_run_is_a_card_at_its_result(store: LogStore) -> None:
    sid = _session(store, _run_session())
    rows = _rows(store, sid)
    visible = [s for s, r in rows.items() if r["view"] != "hidden"]
    assert visible == [1, 4, 8, 9]  # the card sits where the run finished, after Bash
    card = rows[8]
    assert card["view"] == "run" and card["agent_id"] == "r1" and card["call_seq"] == 2
    assert (card["duration_ms"], card["tokens"], card["members"]) == (4200, 99, 3)
    assert card["description"] == "look" and card["prompt"] == "find it"
    assert all(rows[s]["shown_at"] == 8 for s in (2, 3, 5, 7))
    inside = IndexCache().run_rows(store, sid, "r1")
    assert [(r["seq"], r["view"]) for r in inside] == [(3, "tool"), (5, "hidden"), (7, "message")]
    assert inside[0]["result_seq"] == 5


def test_an_unfinished_run_shows_in_place(store: LogStore) -> None:
    sid = _session(store, _run_session()[:7])
    rows = _rows(store, sid)
    assert rows[2]["view"] == "tool" and rows[2]["status"] == "pending"
    assert rows[3]["view"] == "tool" and rows[3]["agent_id"] == "r1"
    assert rows[7]["view"] == "message"


def test_a_page_updates_the_earlier_rows_its_events_change(store: LogStore) -> None:
    sid = _session(store, _run_session()[:7])
    cache = IndexCache()
    assert cache.page(store, sid, after_seq=0, limit=100).rows[1]["status"] == "pending"
    store.append_batch(sid, [NewEvent(p) for p in _run_session()[7:]])
    page = cache.page(store, sid, after_seq=7, limit=100)
    assert [r["seq"] for r in page.rows] == [8, 9]
    updated = {r["seq"]: r for r in page.updates}
    assert set(updated) == {2, 3, 5, 7}  # the call and the run's events move into the card
    assert all(r["view"] == "hidden" and r["shown_at"] == 8 for r in updated.values())


def test_a_message_that_grows_live_updates_its_first_rows_in_place(
    store: LogStore, tmp_path: Path
) -> None:
    # The transcript is imported three times as Claude Code writes it: cut after line 5 (the
    # message's first line), after line 9 (four of its lines, a call, the progress line),
    # then whole. Each import appends; the live page reads the new seqs and the updates.
    lines = SHORT.read_bytes().splitlines(keepends=True)
    live = tmp_path / SHORT.name
    sid = "55604662-cf2a-4331-851a-ec234028f8ca"  # the lines' sessionId
    cache = IndexCache()
    held: dict[int, dict[str, Any]] = {}
    pages = []
    for cut in (5, 9, len(lines)):
        live.write_bytes(b"".join(lines[:cut]))
        import_paths(store, [live])
        page = cache.page(store, sid, after_seq=max(held, default=0), limit=100)
        held.update({r["seq"]: r for r in [*page.rows, *page.updates]})
        pages.append(page)
    # cut 5: seqs 1-4 are lines 1-4, 5 is the message's part from line 5 (an empty text)
    assert pages[0].rows[4]["view"] == "message" and pages[0].rows[4]["text"] == ""
    # cut 9: 6 = the part from lines 5-8, 7 = line 8's call, 8 = line 9's progress note
    rows = {r["seq"]: r for r in pages[1].rows}
    assert rows[6]["view"] == "hidden" and rows[6]["shown_at"] == 5
    assert rows[7]["view"] == "tool" and rows[7]["place"] == 5
    [first] = pages[1].updates  # the message's row, now the whole of what was written
    assert first["seq"] == 5 and first["view"] == "message"
    assert first["text"].startswith("Let me check the project structure") and first["thinking"]
    # whole: 9 = the whole message, 10 = line 10's call, 11-12 = the results
    rows = {r["seq"]: r for r in pages[2].rows}
    assert rows[9]["view"] == "hidden" and rows[9]["shown_at"] == 5
    assert rows[10]["view"] == "tool" and rows[10]["place"] == 5 and rows[10]["result_seq"] == 12
    updates = {r["seq"]: r for r in pages[2].updates}
    assert updates[5]["text"] == first["text"] and updates[7]["result_seq"] == 11
    # read by place: the message once, both calls right after it, then the progress note
    visible = [r for r in held.values() if r["view"] != "hidden"]
    order = [r["seq"] for r in sorted(visible, key=lambda r: (r["place"], r["seq"]))]
    assert order == [1, 2, 3, 4, 5, 7, 10, 8, 13, 14, 15]
    text = "Let me check the project structure"
    assert sum(text in r.get("text", "") for r in visible) == 1
    assert sum(bool(r["meta"] and r["meta"]["usage"]) for r in visible) == 1  # counted once
    # what the page holds is what a page read afresh gives
    fresh = IndexCache().page(store, sid, after_seq=0, limit=100).rows
    assert [held[seq] for seq in sorted(held)] == fresh


def test_rows_carry_meta_and_text_is_clipped_safe_and_loadable(store: LogStore) -> None:
    usage = events.usage(input=3, output=27, cache_read=17915, cache_write=None)
    big = "x" * (RESULT_CHARS * 3)
    sid = _session(
        store,
        [
            events.message(
                "assistant",
                "hi \x1b[1m\u202e \udc81",
                meta=events.meta(model="m", provider="p", usage=usage),
            ),
            events.tool_call("c", "read", {}),
            events.tool_result("c", output=big),
            {"type": "novel", "shape": [1]},
            events.message("system", "compacted", actor="system"),
        ],
    )
    rows = _rows(store, sid)
    assert rows[1]["text"] == "hi \\x1b[1m\\u202e \\udc81"
    assert rows[1]["meta"] == {
        "model": "m",
        "provider": "p",
        "location": None,
        "usage": {"input": 3, "output": 27, "cache_read": 17915, "cache_write": None},
        "duration_ms": None,
    }
    assert len(rows[2]["result_text"]) == RESULT_CHARS and rows[2]["result_chars"] == len(big)
    full = IndexCache().page(store, sid, after_seq=1, limit=1, full=True).rows[0]
    assert full["result_text"] == big
    assert rows[4]["view"] == "event" and rows[4]["label"] == "novel"
    assert rows[5]["actor"] == "system" and rows[5]["view"] == "message"


def test_real_claude_code_rows_pair_by_id(store: LogStore) -> None:
    (report,) = import_paths(store, [TOOL_HEAVY])
    rows = _rows(store, report.session_id)
    pairs = {s: r["result_seq"] for s, r in rows.items() if r["view"] == "tool"}
    assert pairs == {6: 12, 14: 18, 29: 33, 30: 32, 35: 38, 36: 39}
    assert {rows[s]["shown_at"] for s in (12, 18, 32, 33, 38, 39)} == {6, 14, 30, 29, 35, 36}
    assert rows[5]["meta"]["usage"] == {
        "input": 3,
        "output": 27,
        "cache_read": 17915,
        "cache_write": 7883,
    }
    summary = IndexCache().overview(store, report.session_id)
    assert summary["anomalies"] == 0 and summary["tool_calls"] == 6
    assert summary["chain"]["ok"] is True and summary["chain"]["events"] == 40
    # 10 progress, 3 file-history-snapshot and 2 queue-operation lines in the file; its two
    # local-command system lines are notes a reader keeps
    runtime = Counter(r["kind"] for r in rows.values() if r.get("runtime"))
    assert runtime == {"progress": 10, "file-history-snapshot": 3, "queue-operation": 2}
    assert summary["runtime_rows"] == 15
    # written in February 2026, with no turn in flight: not live (agenttrail.views.liveness)
    assert summary["last_event_at"].startswith("2026-02-") and summary["live"] is False


_ids = st.sampled_from(["a", "b", "c", ""])
_payloads = st.one_of(
    st.builds(lambda i: events.tool_call(i, "t", {}), _ids),
    st.builds(lambda i: events.tool_result(i or None, output="o"), _ids),
    st.builds(
        lambda i, a: events.tool_result(i, output="o", toolUseResult={"agentId": a}),
        _ids,
        st.sampled_from(["r1", "r2"]),
    ),
    st.builds(lambda a: {**events.message("assistant", "m"), "agentId": a}, st.just("r1")),
    st.just(events.message("user", "u")),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_payloads, max_size=14), st.lists(st.integers(1, 14), max_size=4))
def test_an_index_grown_in_steps_equals_one_built_at_once(
    payloads: list[dict[str, Any]], cuts: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as folder, open_store(Path(folder) / "log.db") as store:
        sid = _session(store, payloads)
        whole = TranscriptIndex(sid, "x")
        whole.extend(store.read(sid))
        grown = TranscriptIndex(sid, "x")
        every = list(store.read(sid))
        for cut in [*sorted(cuts), len(every)]:
            grown.extend(every[:cut])
        assert grown.page(store, limit=100).rows == whole.page(store, limit=100).rows
        pairs, anomalies = _expected_pairing(payloads)
        assert grown.pairing.result_seq == pairs
        assert {seq: a.kind for seq, a in grown.pairing.anomalies.items()} == anomalies


def _expected_pairing(payloads: list[dict[str, Any]]) -> tuple[dict[int, int], dict[int, str]]:
    """The pairing rules of agenttrail.views.pairing, counted out per event: call seq → result
    seq, and seq → anomaly kind. Written apart from the code under test, as its oracle."""
    refs = []
    for seq, p in enumerate(payloads, start=1):
        key = {"tool_call": "id", "tool_result": "toolCallId"}.get(p["type"])
        if key is not None:
            call_id = p.get(key)
            refs.append((seq, p["type"], call_id if isinstance(call_id, str) and call_id else None))
    calls = Counter(i for _, kind, i in refs if kind == "tool_call" and i is not None)
    results = Counter(i for _, kind, i in refs if kind == "tool_result" and i is not None)
    pairs: dict[int, int] = {}
    anomalies: dict[int, str] = {}
    for seq, kind, call_id in refs:
        if call_id is None:
            anomalies[seq] = "missing_id"
        elif calls[call_id] == 0:
            anomalies[seq] = "orphan_result"
        elif calls[call_id] > 1:
            anomalies[seq] = "duplicate_id"
        elif results[call_id] > 1:
            anomalies[seq] = "duplicate_result"
        elif results[call_id] == 0:
            anomalies[seq] = "no_result"
        elif kind == "tool_call":
            pairs[seq] = next(s for s, k, i in refs if k == "tool_result" and i == call_id)
    return pairs, anomalies
