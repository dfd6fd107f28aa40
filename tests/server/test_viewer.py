"""The web viewer in a real browser: Debian's Chromium, headless, driven by Playwright, against
a real uvicorn on loopback (docs/viewer.md).

The browser is the distribution's Chromium, found on ``PATH`` (``.ci/run`` installs the
``chromium`` package when it is missing; Playwright's own browser download is never used).
Without it these tests are skipped, unless ``AGENTTRAIL_REQUIRE_BROWSER`` is set, as CI sets
it, which makes the run fail instead (tests/_environment.py).
Screenshots go to ``$AGENTTRAIL_SCREENSHOTS`` or ``<tmp>/agenttrail-screenshots``, outside the
repository.
"""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import struct
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import Page, expect

from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.server import create_app, mint_token
from agenttrail.server import live as live_module
from agenttrail.server.viewer import STATIC_DIR
from tests.conftest import REALDATA, serving
from tests.loan_session import record_loan_session
from tests.server.conftest import (
    SECRET,
    Viewer,
    _drawn_seqs,
    _has_class,
    _new_session,
    _row,
    _shot,
    _wait_until,
)

# marot/spotter test/fixtures/transcripts/tool_heavy.jsonl, a real Claude Code session with
# six parallel and sequential tool calls (the real data's SOURCES.md, tests/conftest.py REALDATA).
TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"
TOOLBENCH = REALDATA / "toolbench" / "10_ChatGPT_DFS_woFilter_w2.json"
"""SOURCES.md: a ToolBench answer; its steps carry no time."""
# anthropics/anthropic-sdk-python tests/lib/tools/__inline_snapshot__/…/092be1de-….json: a
# recorded Messages exchange whose last two tool calls have no result (SOURCES.md).
ANTHROPIC_RUN = REALDATA / "anthropic-sdk-python" / "092be1de-d3f8-4c22-a4ea-a7ad54689836.json"


# -- serving ---------------------------------------------------------------------------------


def test_the_page_is_served_without_a_token_and_holds_no_data(viewer: Viewer) -> None:
    page = httpx.get(f"{viewer.url}/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'self'" in csp
    script = httpx.get(f"{viewer.url}/static/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert httpx.get(f"{viewer.url}/v1/sessions/x/transcript").status_code == 401
    assert httpx.get(f"{viewer.url}/v1/search?q=x").status_code == 401


def test_the_page_never_parses_log_text_as_html_and_loads_nothing_from_outside() -> None:
    # The viewer builds every node with textContent/append (static/dom.js); a single
    # innerHTML with log content would let a transcript run script in the reader's browser.
    forbidden = ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(")
    files = sorted(STATIC_DIR.iterdir())
    assert {f.name for f in files} >= {"index.html", "app.js", "viewer.css", "rows.js"}
    for path in files:
        text = path.read_text(encoding="utf-8")
        for word in forbidden:
            assert word not in text, f"{path.name} uses {word}"
        assert "http://" not in text and "https://" not in text, f"{path.name} links outside"


def test_one_request_gives_every_sessions_summary_as_each_summary_gives_it(
    tmp_path: Path,
) -> None:
    with open_store(tmp_path / "log.db") as store:
        (report,) = import_paths(store, [TOOL_HEAVY])
        _new_session(store, "orphan", [events.tool_result("ghost", "x", output="?")])
        _new_session(store, "empty", [])
        with serving(create_app(store, secret=SECRET)) as port:
            url = f"http://127.0.0.1:{port}"
            everything = {"Authorization": f"Bearer {mint_token(SECRET, rights=['read'])}"}
            listed = httpx.get(f"{url}/v1/summaries", headers=everything).json()["summaries"]
            assert [s["id"] for s in listed] == [s.id for s in store.sessions()]
            for summary in listed:
                one = httpx.get(f"{url}/v1/sessions/{summary['id']}/summary", headers=everything)
                assert summary == {"id": summary["id"], **one.json()}
            assert [s["anomalies"] for s in listed[1:]] == [1, 0]
            scoped = mint_token(SECRET, rights=["read"], session="orphan")
            mine = httpx.get(f"{url}/v1/summaries", headers={"Authorization": f"Bearer {scoped}"})
            assert [s["id"] for s in mine.json()["summaries"]] == ["orphan"]
    assert report.session_id == listed[0]["id"]


# -- reading a session -----------------------------------------------------------------------


def test_a_session_whose_source_gives_no_times_shows_none_and_is_not_live(
    viewer: Viewer,
) -> None:
    # its events have the import's time, seconds ago: read as theirs, the rows showed it and
    # the list marked the session ● live (docs/viewer.md, Live)
    (undated,) = import_paths(viewer.store, [TOOLBENCH])
    (dated,) = import_paths(viewer.store, [TOOL_HEAVY])
    page = viewer.open(undated.session_id)
    time = _row(page, 1).locator(".gutter time")
    expect(time).to_have_text("")
    expect(time).to_have_attribute(
        "title", re.compile(r"^no time: the source gives none \(imported 20")
    )
    _row(page, 1).locator(".info").click()
    meta_time = page.locator('#meta-pop dd[data-field="Time"]')
    expect(meta_time).to_have_text(re.compile(r"^none in the source \(imported 20"))
    page.keyboard.press("Escape")
    _wait_until(page, "window.agenttrail.state.summaries.size > 1")
    expect(page.locator(f'.session-item[data-id="{undated.session_id}"] .s-live')).to_have_count(0)
    page = viewer.open(dated.session_id)
    expect(_row(page, 4).locator(".gutter time")).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))


def test_a_token_kind_some_calls_did_not_report_is_marked_partial(viewer: Viewer) -> None:
    # one of the recording's two responses reports no cache counts (tests/views/test_usage.py
    # reads it from the file): the sum of the other's is not the session's whole
    (report,) = import_paths(viewer.store, [ANTHROPIC_RUN])
    page = viewer.open(report.session_id)
    expect(page.locator("#usage-badge")).to_have_attribute(
        "title", re.compile(r": 3,182 input, 237 output, 0 \+ \? cache read, 0 \+ \? cache write;")
    )


def test_a_claude_code_session_pairs_tool_rows_with_actors_and_meta(viewer: Viewer) -> None:
    (report,) = import_paths(viewer.store, [TOOL_HEAVY])
    page = viewer.open(report.session_id)
    for call, result, name in [
        (6, 12, "Bash"),
        (14, 18, "Bash"),
        (29, 33, "WebSearch"),
        (30, 32, "Glob"),
        (35, 38, "Read"),
        (36, 39, "WebFetch"),
    ]:
        row = _row(page, call)
        expect(row.locator(".seq")).to_have_text(f"{call}→{result}")
        expect(row.locator(".tool-name")).to_have_text(name)
        expect(row.locator(".pill")).to_have_text("ok")
        expect(_row(page, result)).to_have_count(0)  # the result lives on its call's row
    expect(page.locator("#rows .row--tool")).to_have_count(6)
    expect(_row(page, 4).locator(".chip")).to_have_text("user")
    expect(_row(page, 4).locator(".text")).to_have_text("start phoenix in background")
    expect(_row(page, 5).locator(".chip--agent")).to_have_text("claude-code")
    aside = _row(page, 19)  # Claude Code's "[Request interrupted by user]": the runtime's
    expect(aside).to_have_class(_has_class("row--aside"))
    expect(aside.locator(".chip")).to_have_text("system")
    expect(_row(page, 1)).to_have_class(_has_class("row--note"))
    expect(page.locator("#chain-badge")).to_have_text("✓ chain verified")
    expect(page.locator("#event-count")).to_have_text("40 events")
    # usage from GET …/summary: tool_heavy.jsonl's four responses (one usage per message.id,
    # summed from the file in tests/views/test_usage.py) hold 54 + 212 + 88,231 + 17,696 tokens
    expect(page.locator("#usage-badge")).to_contain_text("106,193 tokens · $")

    _row(page, 5).locator(".info").click()
    pop = page.locator("#meta-pop")
    expect(pop).to_be_visible()
    for name, value in [
        ("Model", "claude-opus-4-6"),
        ("Provider", "anthropic"),
        ("Input tokens", "3"),
        ("Output tokens", "27"),
        ("Cache read tokens", "17,915"),
        ("Cache write tokens", "7,883"),
        ("Duration", "—"),
    ]:
        expect(pop.locator(f'dd[data-field="{name}"]')).to_have_text(value)
    _shot(page, "claude-code-meta")
    page.keyboard.press("Escape")
    expect(pop).to_be_hidden()

    _row(page, 6).locator(".tool-head").click()
    detail = _row(page, 6).locator(".tool-detail")
    expect(detail).to_be_visible()
    expect(detail.locator("pre.args")).to_contain_text('"command"')
    expect(detail.locator("h4").nth(1)).to_have_text("Result · seq 12")
    _row(page, 6).locator(".info").click()
    expect(pop.locator("h3")).to_have_text(["Tool call · seq 6", "Tool result · seq 12"])
    _shot(page, "claude-code-tool-row")


def test_an_anthropic_recording_marks_calls_with_no_result(viewer: Viewer) -> None:
    (report,) = import_paths(viewer.store, [ANTHROPIC_RUN])
    page = viewer.open(report.session_id)
    marks = page.locator("#rows .row--tool .anomaly")
    expect(marks).to_have_count(2)
    expect(marks.first).to_contain_text("call with no result")
    expect(page.locator("#session-badges")).to_contain_text("⚠ 2 anomalies")
    page.locator("#session-badges .badge--warn").click()  # go to the first anomaly
    expect(page.locator("#rows .row--flash")).to_have_count(1)


def _showcase() -> list[dict[str, Any]]:
    side = {"agentId": "r42", "isSidechain": True}
    model = events.meta(
        model="claude-opus-4-6",
        provider="anthropic",
        usage=events.usage(1200, 340, 18000, 512),
        duration_ms=2350,
    )
    return [
        events.recall([{"id": "mem_1", "source": "workspace_profile", "score": 0.93}]),  # 1
        events.message("user", "Why <b>does</b> it fail? <img src=x onerror=alert(1)>"),  # 2
        events.rag("rag_store.db", 3, 0.87),  # 3
        events.message("assistant", "Let me look, and ask a researcher.", meta=model),  # 4
        events.tool_call(
            "t1",
            "Task",
            {"description": "Research the failing test", "prompt": "Why does test_x fail?"},
        ),  # 5
        {**events.message("user", "Why does test_x fail?", actor="agent"), **side},  # 6
        {**events.tool_call("s1", "Grep", {"pattern": "test_x"}), **side},  # 7
        events.tool_call("b1", "Bash", {"command": "go build ./..."}),  # 8
        {**events.tool_result("s1", output="tests/test_x.py:12"), **side},  # 9
        events.tool_result(
            "b1", output="./harvey.go:42:5: undefined: foo", exit_code=1, meta={"duration_ms": 830}
        ),  # 10
        {**events.message("assistant", "foo is undefined.", meta=model), **side},  # 11
        events.tool_result(
            "t1",
            output=[{"type": "text", "text": "test_x fails: foo is undefined in harvey.go."}],
            toolUseResult={
                "agentId": "r42",
                "status": "completed",
                "totalDurationMs": 42000,
                "totalTokens": 12345,
                "totalToolUseCount": 1,
            },
        ),  # 12
        events.message("system", "Context window compacted.", actor="system"),  # 13
        events.message("user", "Nightly build check", actor="trigger"),  # 14
        events.tool_call("u1", "read_file", {"path": "notes.txt"}, actor="user"),  # 15
        events.tool_result("u1", "read_file", output={"content": "hello"}, actor="user"),  # 16
        events.tool_result("ghost", output="who called me?"),  # 17
        events.tool_call("dup", "Read", {"file": "a"}),  # 18
        events.tool_call("dup", "Read", {"file": "b"}),  # 19
        events.shell("go test ./...", "FAIL\nexit status 1", 1),  # 20
        events.error("model overloaded"),  # 21
        {"type": "custom_thing", "foo": [1, 2, 3]},  # 22
        events.tool_call("big", "Read", {"file": "big.txt"}),  # 23
        events.tool_result("big", output="0123456789\n" * 1500),  # 24
        events.message("assistant", "It fails at harvey.go:42.", meta=model),  # 25
    ]


def test_actors_runs_context_and_anomalies_read_as_the_specs_say(viewer: Viewer) -> None:
    sid = _new_session(viewer.store, "showcase", _showcase(), title="Showcase")
    page = viewer.open(sid)
    expect(_row(page, 25)).to_be_visible()
    # Runs interleave by completion: the researcher's card sits where its result landed (12),
    # after the Bash call that finished earlier (8→10); its call and events are inside it.
    assert _drawn_seqs(page) == [1, 2, 3, 4, 8, 12, 13, 14, 15, 17, 18, 19, 20, 21, 22, 23, 25]
    card = _row(page, 12)
    expect(card.locator(".seq")).to_have_text("5→12")
    expect(card.locator(".run-label")).to_have_text("Run")
    expect(card.locator(".run-desc")).to_have_text("Research the failing test")
    expect(card.locator(".dur")).to_have_text("42 s · 12,345 tokens · 1 tool use · 4 events")
    card.locator(".run-head").click()
    inside = card.locator(".run-rows .row")
    expect(inside).to_have_count(3)  # 6, 7→9, 11: four events, the result on its call's row
    expect(inside.nth(1).locator(".seq")).to_have_text("7→9")
    # Actors: the user, the runtime's quiet aside, a trigger, the user's own tool call.
    expect(_row(page, 2).locator(".text")).to_have_text(
        "Why <b>does</b> it fail? <img src=x onerror=alert(1)>"
    )
    assert page.locator("#rows img, #rows b").count() == 0  # shown as text, never parsed
    expect(_row(page, 13)).to_have_class(_has_class("row--aside"))
    expect(_row(page, 13).locator(".chip")).to_have_text("system")
    expect(_row(page, 14).locator(".chip")).to_have_text("⚡ trigger")
    expect(_row(page, 14).locator(".label")).to_have_text("Trigger fired")
    expect(_row(page, 15).locator(".chip--you")).to_have_text("You")
    expect(_row(page, 15).locator(".seq")).to_have_text("15→16")
    # Context rows, anomalies, errors, an unknown shape.
    for seq, kind in [(1, "recall"), (3, "rag"), (20, "shell")]:
        expect(_row(page, seq).locator(".chip--context")).to_have_text(kind)
    expect(_row(page, 17).locator(".anomaly")).to_have_text("⚠ result with no call (ghost)")
    for seq in (18, 19):
        expect(_row(page, seq).locator(".anomaly")).to_contain_text("more than one call")
    expect(_row(page, 8).locator(".pill")).to_have_text("error: exit 1")
    expect(_row(page, 8).locator(".dur")).to_have_text("830 ms")
    expect(_row(page, 21).locator(".error-text")).to_have_text("model overloaded")
    expect(_row(page, 22).locator(".chip--event")).to_have_text("custom_thing")
    # A large result is loaded on demand.
    _row(page, 23).locator(".tool-head").click()
    more = _row(page, 23).locator(".more")
    expect(more).to_contain_text("16,500 characters")
    assert len(_row(page, 23).locator("pre.result").text_content() or "") == 2000
    more.click()
    expect(_row(page, 23).locator(".more")).to_have_count(0)
    assert len(_row(page, 23).locator("pre.result").text_content() or "") == 16500
    _shot(page, "showcase-light")


def test_an_erased_result_reads_as_erased_on_its_call(viewer: Viewer) -> None:
    # agenttrail erase (docs/log-format.md, Erasure): the call keeps its result's row, which
    # says erased, by whom and why, in a pill of its own; the erased text is nowhere.
    secret = "Jane Roe, 12 Elm Street"
    sid = _new_session(
        viewer.store,
        "erased",
        [
            events.message("user", "read my notes"),
            events.tool_call("call_1", "read_file", {"path": "notes.txt"}),
            events.tool_result("call_1", output=f"notes: {secret}"),
            events.message("user", f"and this: {secret}"),
        ],
    )
    viewer.store.erase(sid, [3, 4], by="ops", reason="personal data")
    page = viewer.open(sid)
    pill = _row(page, 2).locator(".pill")
    expect(pill).to_have_text("erased")
    expect(pill).to_have_attribute("title", "erased seq 3 by ops: personal data")
    style = pill.evaluate(
        "p => [getComputedStyle(p).borderStyle, getComputedStyle(p).backgroundColor]"
    )
    assert style[0] == "dashed" and style[1] != "rgba(0, 0, 0, 0)", style
    _row(page, 2).locator(".tool-head").click()
    expect(_row(page, 2).locator("pre.result")).to_have_text("erased seq 3 by ops: personal data")
    # the erased message is the store's note, a quiet aside of the system's
    expect(_row(page, 4)).to_have_class(_has_class("row--aside"))
    expect(_row(page, 4)).to_contain_text("erased seq 4 by ops: personal data")
    assert secret not in (page.locator("#rows").text_content() or "")
    _shot(page, "erased")


# -- live ------------------------------------------------------------------------------------


def _wait_live(page: Page) -> None:
    """Wait until the page follows the log (its live feed is connected)."""
    expect(page.locator("#live-state")).to_have_attribute("data-state", "live")


def test_live_appends_and_streaming_partials_arrive_without_a_reload(viewer: Viewer) -> None:
    sid = _new_session(viewer.store, "live", [])
    page = viewer.page()
    page.goto(f"{viewer.url}/#{urlencode({'token': viewer.token(), 'session': sid})}")
    expect(page.locator("#rows")).to_have_attribute("data-empty", "true")  # says so
    _wait_live(page)
    with viewer.http() as http:
        http.post(f"/v1/sessions/{sid}/events", json={"payload": events.message("user", "Hi")})
        expect(_row(page, 1).locator(".text")).to_have_text("Hi")
        http.post(
            f"/v1/sessions/{sid}/partials", json={"textDelta": "Hello, ", "activity": "typing"}
        )
        partial = page.locator("#partial")
        expect(partial).to_be_visible()
        expect(partial.locator(".text")).to_have_text("Hello,")
        http.post(f"/v1/sessions/{sid}/partials", json={"textDelta": "my name is An"})
        # the last word waits for the text to go on past it (server/partials.py)
        expect(partial.locator(".text")).to_have_text("Hello, my name is")
        _shot(page, "live-partial")
        http.post(f"/v1/sessions/{sid}/partials", json={"textDelta": "a.", "done": True})
        expect(partial.locator(".partial-state")).to_contain_text("finished streaming")
        http.post(
            f"/v1/sessions/{sid}/events",
            json={"payload": events.message("assistant", "Hello, my name is Ana.")},
        )
        expect(_row(page, 2).locator(".text")).to_have_text("Hello, my name is Ana.")
        expect(partial).to_be_hidden()  # the durable event took the streamed text's place
        http.post(
            f"/v1/sessions/{sid}/events",
            json={"payload": events.tool_call("c1", "read_file", {"path": "x"})},
        )
        expect(_row(page, 3).locator(".pill")).to_have_text("no result")
        expect(_row(page, 3).locator(".anomaly")).to_have_text("⚠ call with no result (c1)")
        http.post(
            f"/v1/sessions/{sid}/events",
            json={"payload": events.tool_result("c1", output="contents")},
        )
        expect(_row(page, 3).locator(".seq")).to_have_text("3→4")
        expect(_row(page, 3).locator(".pill")).to_have_text("ok")
        expect(_row(page, 3).locator(".anomaly")).to_have_count(0)
    expect(page.locator("#event-count")).to_have_text("4 events")
    assert _drawn_seqs(page) == [1, 2, 3]


def _append_messages(viewer: Viewer, sid: str, count: int, *, batch: bool = False) -> None:
    with viewer.http() as http:
        payloads = [events.message("assistant", f"line {i}") for i in range(count)]
        if batch:
            body = {"events": [{"payload": p} for p in payloads]}
            assert http.post(f"/v1/sessions/{sid}/events", json=body).status_code == 201
        else:
            for payload in payloads:
                http.post(f"/v1/sessions/{sid}/events", json={"payload": payload})


def test_after_a_dropped_connection_the_feed_resumes_with_no_gap_and_no_duplicate(
    viewer: Viewer,
) -> None:
    sid = _new_session(viewer.store, "resume", [events.message("user", "start")])
    page = viewer.open(sid)
    _wait_live(page)
    for _ in range(3):
        _wait_live(page)
        page.evaluate("window.agenttrail.dropLive()")
        _append_messages(viewer, sid, 10)  # written while the page is away
    expect(_row(page, 31)).to_be_visible()
    _wait_live(page)
    _append_messages(viewer, sid, 5)
    expect(_row(page, 36)).to_be_visible()
    assert _drawn_seqs(page) == list(range(1, 37))
    stats = page.evaluate("window.agenttrail.feedStats()")
    assert stats["connects"] >= 4 and stats["lastSeq"] == 36
    assert stats["gaps"] == 0 and stats["closes"][:3] == [4000, 4000, 4000]


def test_a_page_that_falls_behind_is_closed_with_4408_and_catches_up(
    viewer: Viewer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live_module, "QUEUE_SIZE", 4)
    sid = _new_session(viewer.store, "behind", [events.message("user", "start")])
    page = viewer.open(sid)
    _wait_live(page)
    _append_messages(viewer, sid, 60, batch=True)  # one commit of 60: the queue of 4 overflows
    expect(_row(page, 61)).to_be_visible()
    assert _drawn_seqs(page) == list(range(1, 62))
    stats = page.evaluate("window.agenttrail.feedStats()")
    assert live_module.RESUME_CODE in stats["closes"] and stats["gaps"] == 0


# -- the wrench palette ----------------------------------------------------------------------


def test_the_palette_runs_a_tool_and_shows_it_as_you(viewer: Viewer) -> None:
    sid = _new_session(viewer.store, "tools", [events.message("user", "write me a file")])
    page = viewer.open(sid)
    _wait_live(page)
    page.keyboard.press("t")
    palette = page.locator("#palette")
    expect(palette).to_be_visible()
    expect(palette.locator(".tool-choice")).to_have_text(
        ["echo", "list_dir", "read_file", "write_file"]
    )
    palette.locator('.tool-choice[data-tool="write_file"]').click()
    palette.locator('input[name="path"]').fill("out/hello.txt")
    palette.locator('textarea[name="content"]').fill("hi <there>")
    _shot(page, "palette-form")
    palette.get_by_role("button", name="Run write_file").click()
    expect(palette).to_be_hidden()
    call = _row(page, 2)
    expect(call.locator(".chip--you")).to_have_text("You")
    expect(call.locator(".tool-name")).to_have_text("write_file")
    expect(call.locator(".seq")).to_have_text("2→3")
    expect(call.locator(".pill")).to_have_text("ok")
    assert (viewer.workspace / "out" / "hello.txt").read_text() == "hi <there>"
    assert [e.actor for e in viewer.store.read(sid, after_seq=1)] == ["user", "user"]

    # Forms come from the JSON Schema: integer, boolean, enum, number, nested object.
    page.locator("#tools-button").click()
    palette.locator('.tool-choice[data-tool="echo"]').click()
    palette.locator('input[name="count"][type="number"]').fill("3")
    palette.locator('input[name="loud"][type="checkbox"]').check()
    palette.locator('select[name="mode"]').select_option(label="b")
    palette.locator('fieldset input[name="options.tag"]').fill("x")
    palette.get_by_role("button", name="Run echo").click()
    expect(_row(page, 4).locator(".tool-name")).to_have_text("echo")
    result = next(iter(viewer.store.read(sid, after_seq=4))).payload
    assert result["output"] == {"count": 3, "loud": True, "mode": "b", "options": {"tag": "x"}}
    _shot(page, "palette-you-rows")


def test_a_409_during_an_agent_turn_says_so_and_changes_nothing(viewer: Viewer) -> None:
    viewer.expected.append("status of 409 (Conflict)")
    sid = _new_session(viewer.store, "busy", [events.message("user", "read my notes")])
    page = viewer.open(sid)
    _wait_live(page)
    with viewer.http() as http:
        turn = http.post(f"/v1/sessions/{sid}/turns", json={"holder": "agent"}).json()
        page.locator("#tools-button").click()
        palette = page.locator("#palette")
        palette.locator('.tool-choice[data-tool="read_file"]').click()
        palette.locator('input[name="path"]').fill("notes.txt")
        palette.get_by_role("button", name="Run read_file").click()
        conflict = palette.locator(".conflict")
        expect(conflict).to_contain_text("The agent is in the middle of a turn")
        expect(conflict).to_contain_text(turn["turn_id"])
        expect(conflict).to_contain_text("nothing was added to the log")
        _shot(page, "palette-409")
        head = viewer.store.head(sid)
        assert head is not None and head[0] == 1
        page.wait_for_timeout(300)
        assert _drawn_seqs(page) == [1]
        http.delete(f"/v1/sessions/{sid}/turns/{turn['turn_id']}")
        palette.get_by_role("button", name="Run read_file").click()  # free again: it runs
        expect(palette).to_be_hidden()
        expect(_row(page, 2).locator(".chip--you")).to_have_text("You")


# -- evidence --------------------------------------------------------------------------------


def test_evidence_chain_trace_rows_fountain_and_replay(viewer: Viewer) -> None:
    record_loan_session(viewer.store)
    page = viewer.open("loan-advice")
    expect(page.locator("#chain-badge")).to_have_text("✓ chain verified")
    page.locator("#transcript").focus()
    page.keyboard.press("2")
    evidence = page.locator("#evidence")
    expect(evidence.locator("#chain-verdict h3")).to_have_text("✓ Chain verified")
    rows = evidence.locator("table.traces tbody tr[data-trace]")
    expect(rows.first).to_be_visible()
    traces = viewer.store.traces("loan-advice")
    expect(rows).to_have_count(len(traces))
    statuses = [t.status for t in traces]
    assert "verified" in statuses
    expect(rows.locator(".pill")).to_have_text(statuses)
    first = rows.first
    expect(first.locator("code.hash")).to_have_attribute("title", traces[0].record_hash or "")
    first.get_by_role("button", name="Envelope").click()
    envelope = evidence.locator("pre.envelope").first
    expect(envelope).to_have_text(traces[0].envelope.decode())
    _shot(page, "evidence")
    with viewer.http() as http:
        with page.expect_download() as replay:
            evidence.locator("#replay-format").select_option("anthropic")
            evidence.locator("#replay-download").click()
        body = json.loads(Path(replay.value.path()).read_text())
        expected = http.get("/v1/sessions/loan-advice/replay", params={"format": "anthropic"})
        assert body["messages"] == expected.json()["messages"]
        assert replay.value.suggested_filename == "loan-advice.replay-anthropic.json"
        page.keyboard.press("3")
        expect(page.locator("pre.fountain-text")).to_contain_text("FADE IN:")
        with page.expect_download() as fountain:
            page.locator("#fountain-download").click()
        text = Path(fountain.value.path()).read_text()
        assert text == http.get("/v1/sessions/loan-advice/fountain").text
    _shot(page, "fountain")


def test_a_tampered_log_shows_a_broken_chain(viewer: Viewer, tmp_path: Path) -> None:
    sid = _new_session(viewer.store, "tampered", _showcase()[:4])
    # Someone who owns the file drops the guard rail and edits a stored row (as in
    # tests/test_docs.py): the chain, not the trigger, is the evidence.
    conn = sqlite3.connect(tmp_path / "log.db", isolation_level=None)
    conn.execute("DROP TRIGGER session_events_no_update")
    conn.execute(
        "UPDATE session_events SET payload = CAST(replace(CAST(payload AS TEXT), 'fail', 'pass') "
        "AS BLOB) WHERE session_id = ? AND seq = 2",
        (sid,),
    )
    conn.close()
    page = viewer.open(sid)
    expect(page.locator("#chain-badge")).to_have_text("✗ chain broken at seq 2")
    expect(page.locator(".session-item .badge--bad")).to_have_text("✗ chain broken at seq 2")
    page.locator("#chain-badge").click()
    expect(page.locator("#chain-verdict h3")).to_have_text("✗ Chain check failed")
    expect(page.locator("#chain-verdict")).to_contain_text("seq 2")
    _shot(page, "chain-broken")


# -- large sessions --------------------------------------------------------------------------


def _fifty_thousand(store: LogStore) -> str:
    sid = "big"
    store.create_session(NewSession(sid, "Fifty thousand events", "bench", "ana"))
    batch: list[NewEvent] = []
    for i in range(50_000):
        kind = i % 5
        if kind == 0:
            payload = events.message("user", f"question {i}")
        elif kind == 1:
            payload = events.tool_call(f"c{i}", "lookup", {"q": i})
        elif kind == 2:
            payload = events.tool_result(f"c{i - 1}", "lookup", output={"value": i})
        elif kind == 3:
            payload = events.message("assistant", f"answer {i}")
        else:
            payload = {"type": "annotation", "kind": "progress", "text": f"step {i}"}
        batch.append(NewEvent(payload))
        if len(batch) == 5000:
            store.append_batch(sid, batch)
            batch = []
    return sid


def test_a_fifty_thousand_event_session_opens_and_scrolls(viewer: Viewer) -> None:
    sid = _fifty_thousand(viewer.store)
    page = viewer.open(sid)
    expect(_row(page, 1).locator(".text")).to_have_text("question 0")
    expect(page.locator("#event-count")).to_have_text("50,000 events")
    page.locator("#transcript").focus()
    page.keyboard.press("End")
    expect(_row(page, 50_000)).to_be_visible()
    expect(_row(page, 49_999).locator(".text")).to_have_text("answer 49998")
    page.evaluate("document.getElementById('transcript').scrollTop = 1e6")  # the middle
    for _ in range(10):
        page.mouse.move(700, 500)
        page.mouse.wheel(0, 2500)
    _wait_until(
        page,
        "[...document.querySelectorAll('#rows .row')].some(r => +r.dataset.seq > 20000 "
        "&& +r.dataset.seq < 40000 && r.getBoundingClientRect().top > 0)",
    )
    assert page.evaluate("window.agenttrail.drawnRows()") < 2000  # only rows near the view
    page.goto(f"{viewer.url}/#{urlencode({'session': sid, 'seq': 33_333})}")
    expect(_row(page, 33_332)).to_be_focused()  # 33,333 is a result: it shows on its call
    expect(_row(page, 33_332).locator(".seq")).to_have_text("33332→33333")
    _shot(page, "fifty-thousand")


# -- reading comfort -------------------------------------------------------------------------


def _luminance(css_color: str) -> float:
    r, g, b = (int(x) for x in css_color[css_color.index("(") + 1 : -1].split(",")[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_dark_mode_and_a_phone_width(viewer: Viewer) -> None:
    sid = _new_session(viewer.store, "showcase", _showcase(), title="Showcase")
    dark = viewer.open(sid, color_scheme="dark")
    background = dark.evaluate("getComputedStyle(document.body).backgroundColor")
    text = dark.evaluate("getComputedStyle(document.body).color")
    assert _luminance(background) < 0.15 and _luminance(text) > 0.8
    _row(dark, 8).locator(".tool-head").click()
    _row(dark, 4).locator(".info").click()
    _shot(dark, "showcase-dark")

    phone = viewer.open(viewport={"width": 390, "height": 844}, color_scheme="light")
    expect(phone.locator(".session-item")).to_have_count(1)
    expect(phone.locator("#main")).to_be_hidden()  # one column: the list first
    phone.locator(".session-item").click()
    expect(phone.locator("#back")).to_be_visible()
    expect(phone.locator("#sidebar")).to_be_hidden()
    expect(_row(phone, 15).locator(".chip--you")).to_be_visible()
    wide = phone.evaluate("document.scrollingElement.scrollWidth")
    assert wide <= 390, f"the page is {wide}px wide on a 390px screen"
    _shot(phone, "showcase-phone")
    phone.locator("#back").click()
    expect(phone.locator("#sidebar")).to_be_visible()


def test_keyboard_navigation_and_search_across_sessions(viewer: Viewer) -> None:
    (report,) = import_paths(viewer.store, [TOOL_HEAVY])
    _new_session(viewer.store, "showcase", _showcase(), title="Showcase")
    page = viewer.open(report.session_id)
    page.locator("#transcript").focus()
    page.keyboard.press("j")
    expect(_row(page, 1)).to_be_focused()
    for _ in range(5):
        page.keyboard.press("j")
    expect(_row(page, 6)).to_be_focused()  # seq 6 is the Bash call (5 is an agent message)
    page.keyboard.press("Enter")
    expect(_row(page, 6).locator(".tool-head")).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("i")
    expect(page.locator("#meta-pop")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#meta-pop")).to_be_hidden()
    expect(_row(page, 6)).to_be_focused()
    page.keyboard.press("k")
    expect(_row(page, 5)).to_be_focused()
    page.keyboard.press("?")
    expect(page.locator("#help")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#help")).to_be_hidden()

    page.keyboard.press("/")
    expect(page.locator("#search")).to_be_focused()
    page.keyboard.type("xterm")
    hits = page.locator("#search-hits .hit")
    expect(hits.first).to_be_visible()
    expect(page.locator(".session-item")).to_have_count(1)  # only the session that matches
    _shot(page, "search")
    page.keyboard.press("Enter")
    expect(hits.first).to_be_focused()
    seq = int((hits.first.locator(".seq").text_content() or "").removeprefix("seq "))
    page.keyboard.press("Enter")
    expect(page.locator("#rows .row--flash")).to_have_count(1)
    assert seq in _drawn_seqs(page) or page.locator("#rows .row--flash").count() == 1
    page.locator("#search").fill("")
    page.locator("#transcript").focus()
    page.keyboard.press("]")  # the next session in the list (newest first, undated last)
    expect(page.locator("#session-title")).to_have_text("Showcase")
    page.keyboard.press("[")
    expect(page.locator("#session-title")).to_have_text("start phoenix in background")


# -- attachments and block order -------------------------------------------------------------


def _png(width: int, height: int) -> bytes:
    """A real PNG (RFC 2083): white RGB pixels, so the browser can decode it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = b"".join(b"\x00" + b"\xff" * 3 * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(pixels))
        + chunk(b"IEND", b"")
    )


def test_an_image_is_named_then_shown_as_a_thumbnail_and_runs_keep_their_order(
    viewer: Viewer,
) -> None:
    png = _png(3, 2)
    image = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(png).decode(),
        },
    }
    said = [{"type": "text", "text": "first I look"}, {"type": "text", "text": "then I read"}]
    sid = _new_session(
        viewer.store,
        "pictures",
        [
            events.message(
                "user", "what is this?", blocks=[{"type": "text", "text": "what is this?"}, image]
            ),
            events.message(
                "assistant",
                "first I look\nthen I read",
                blocks=said,
                order=[{"block": 0}, {"toolCall": "c1"}, {"block": 1}, {"toolCall": "c2"}],
            ),
            events.tool_call("c1", "look", {}),
            events.tool_call("c2", "read", {}),
            events.tool_result("c1", output="ok"),
            events.tool_result("c2", output="ok"),
        ],
    )
    page = viewer.open(sid)
    row = _row(page, 1)
    assert len(png) < 1024  # below 1 KiB a size reads as its exact count (views.units)
    expect(row).to_contain_text(f"[attachment: image/png, {len(png)} bytes, sha256")
    expect(row.locator("img")).to_have_count(0)  # a page of rows carries no bytes
    row.get_by_role("button", name="Show the image").click()
    thumb = _row(page, 1).locator("img.thumb")
    expect(thumb).to_be_visible()
    _wait_until(page, "document.querySelector('#rows img.thumb').naturalWidth === 3")
    runs = _row(page, 2).inner_text()
    assert runs.index("first I look") < runs.index("→ tool call c1") < runs.index("then I read")
    assert runs.index("then I read") < runs.index("→ tool call c2")


# marot/spotter test/fixtures/transcripts/short.jsonl (SOURCES.md): lines 5-10 are one API
# message (text, thinking, text, tool_use, a hook progress line, tool_use).
SHORT = REALDATA / "claude-code-spotter" / "short.jsonl"


def test_a_message_imported_while_it_grows_shows_once_with_its_calls_after_it(
    viewer: Viewer, tmp_path: Path
) -> None:
    lines = SHORT.read_bytes().splitlines(keepends=True)
    live = tmp_path / "growing" / SHORT.name
    live.parent.mkdir()
    live.write_bytes(b"".join(lines[:5]))  # the message's first line only
    (report,) = import_paths(viewer.store, [live])
    page = viewer.open(report.session_id)
    _wait_live(page)
    said = "Let me check the project structure"
    # lines 5-8 and the progress line 9: part (6, hidden), call (7), note (8)
    live.write_bytes(b"".join(lines[:9]))
    import_paths(viewer.store, [live])
    expect(_row(page, 5)).to_contain_text(said)
    _wait_until(page, "document.querySelector('#rows .row[data-seq=\"8\"]') !== null")
    assert _drawn_seqs(page) == [1, 2, 3, 4, 5, 7, 8]
    # the whole file: message (9, hidden), call (10), results (11, 12), the rest (13-15); the
    # second call reads right after the message, before the progress note that preceded it
    live.write_bytes(b"".join(lines))
    import_paths(viewer.store, [live])
    expect(_row(page, 10).locator(".seq")).to_have_text("10→12")
    expect(_row(page, 7).locator(".seq")).to_have_text("7→11")
    _wait_until(page, "document.querySelector('#rows .row[data-seq=\"15\"]') !== null")
    assert _drawn_seqs(page) == [1, 2, 3, 4, 5, 7, 10, 8, 13, 14, 15]
    expect(page.locator("#rows .row", has_text=said)).to_have_count(1)
    again = viewer.open(report.session_id)  # a page opened afresh reads the same
    assert _drawn_seqs(again) == [1, 2, 3, 4, 5, 7, 10, 8, 13, 14, 15]
    with viewer.http() as http:
        [found] = http.get("/v1/search", params={"q": said}).json()["sessions"]
    assert (found["total"], [h["seq"] for h in found["hits"]]) == (1, [5])
