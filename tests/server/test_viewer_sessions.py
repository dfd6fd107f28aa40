"""The viewer's sessions list, session header and compare view at 1920×1080 in real Chromium: a
compact list with totals per session, the ``● live`` badge only where something writes, the
switch that hides runtime rows, and two runs compared step by step (docs/viewer.md)."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from agenttrail.ingest.importer import import_paths
from agenttrail.model import NewEvent, events
from tests.conftest import REALDATA
from tests.server.conftest import Viewer, _new_session, _row, _shot, _wait_until
from tests.views.test_diff import COPY_ID, GLOB_CALL, _copy, _other_glob_pattern

# marot/spotter test/fixtures/transcripts/tool_heavy.jsonl (SOURCES.md): a Claude Code session
# written in February 2026, with 10 progress, 3 file-history-snapshot and 2 queue-operation
# records (counted with `jq -r .type tool_heavy.jsonl | sort | uniq -c`) and 2 local-command
# system records, which are not runtime rows.
TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"
FULL_HD = {"width": 1920, "height": 1080}


def _summaries_loaded(page: Page) -> None:
    _wait_until(page, "window.agenttrail.state.summaries.size > 0")
    expect(page.locator(".session-item", has_text="checking…")).to_have_count(0)


def test_the_list_shows_fifteen_sessions_on_a_1080_pixel_screen_with_totals(
    viewer: Viewer,
) -> None:
    (report,) = import_paths(viewer.store, [TOOL_HEAVY])
    for n in range(24):
        _new_session(viewer.store, f"s{n:02}", [events.message("user", f"task {n}")])
    page = viewer.open(viewport=FULL_HD)
    _summaries_loaded(page)
    bottom = page.locator("#sidebar").bounding_box()
    assert bottom is not None
    edge = bottom["y"] + bottom["height"]
    boxes = [b for b in (i.bounding_box() for i in page.locator(".session-item").all()) if b]
    whole = [b for b in boxes if b["y"] >= 0 and b["y"] + b["height"] <= edge]
    assert len(whole) >= 15, f"{len(whole)} sessions fit on the screen"
    item = page.locator(f'.session-item[data-id="{report.session_id}"]')
    # 40 events; 106,193 tokens over four model calls (tests/server/test_viewer.py)
    expect(item.locator(".s-total").first).to_have_text("40 ev")
    expect(item.locator(".s-tokens")).to_have_text("106.2K tok")
    expect(item.locator(".s-tokens")).to_have_attribute("title", _starts("4 model calls: "))
    expect(item.locator(".s-cost")).to_contain_text("$")
    expect(item.locator(".badge--ok")).to_have_text("✓")
    one = page.locator('.session-item[data-id="s00"]')
    expect(one.locator(".s-total")).to_have_text("1 ev")  # no model call: no tokens, no cost
    _shot(page, "sessions-1080p")


def _starts(prefix: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(prefix))


def test_only_sessions_being_written_wear_the_live_badge(viewer: Viewer) -> None:
    (old,) = import_paths(viewer.store, [TOOL_HEAVY])  # written in February 2026
    _new_session(viewer.store, "now", [events.message("user", "just now")])
    _new_session(
        viewer.store,
        "ended",
        [events.message("user", "hi"), {"type": "session_end", "reason": "done"}],
    )
    long_ago = "2020-01-01T00:00:00.000000Z"
    _new_session(viewer.store, "turn", [])
    viewer.store.append_batch("turn", [NewEvent(events.message("user", "x"), long_ago)])
    viewer.store.acquire_turn("turn", turn_id="turn_1", holder="agent", ttl_s=600)
    _new_session(viewer.store, "quiet", [])
    viewer.store.append_batch("quiet", [NewEvent(events.message("user", "x"), long_ago)])
    page = viewer.open(viewport=FULL_HD)
    _summaries_loaded(page)
    live = page.locator(".session-item:has(.s-live)")
    expect(live).to_have_count(2)
    assert sorted(live.evaluate_all("items => items.map(i => i.dataset.id)")) == ["now", "turn"]
    _shot(page, "sessions-live")

    page.locator(f'.session-item[data-id="{old.session_id}"]').click()
    expect(page.locator("#live-state")).to_have_attribute("data-state", "live")
    expect(page.locator("#live-state")).to_have_text("following")  # the page follows it …
    expect(page.locator("#chain-badge")).to_be_visible()
    expect(page.locator("#live-badge")).to_have_count(0)  # … but nobody writes it
    page.locator('.session-item[data-id="now"]').click()
    expect(page.locator("#live-badge")).to_have_text("● live")
    page.locator('.session-item[data-id="ended"]').click()
    expect(page.locator("#live-state")).to_have_attribute("data-state", "live")
    expect(page.locator("#chain-badge")).to_be_visible()
    expect(page.locator("#live-badge")).to_have_count(0)
    # an append to a quiet session makes it live as it arrives
    page.locator('.session-item[data-id="quiet"]').click()
    expect(page.locator("#live-state")).to_have_attribute("data-state", "live")
    expect(page.locator("#live-badge")).to_have_count(0)
    with viewer.http() as http:
        http.post("/v1/sessions/quiet/events", json={"payload": events.message("user", "back")})
    expect(_row(page, 2)).to_be_visible()
    expect(page.locator("#live-badge")).to_have_text("● live")


def _kinds(page: Page) -> list[str]:
    found: list[str] = page.eval_on_selector_all(
        "#rows .row--note .note-kind", "kinds => kinds.map(k => k.textContent)"
    )
    return found


def test_the_switch_hides_runtime_rows_and_counts_them(viewer: Viewer) -> None:
    (report,) = import_paths(viewer.store, [TOOL_HEAVY])
    page = viewer.open(report.session_id, viewport=FULL_HD)
    switch = page.locator("#runtime-switch")
    expect(switch).to_have_text("Hide 15 runtime rows")
    runtime = {"progress", "file-history-snapshot", "queue-operation"}
    _wait_until(page, "document.querySelectorAll('#rows .row--note').length >= 17")
    assert sorted(k for k in _kinds(page) if k in runtime) == sorted(
        ["progress"] * 10 + ["file-history-snapshot"] * 3 + ["queue-operation"] * 2
    )
    rows_before = page.locator("#rows .row").count()
    page.locator("#hide-runtime").check()
    expect(switch).to_have_text("15 runtime rows hidden")
    expect(page.locator("#rows .row")).to_have_count(rows_before - 15)
    assert [k for k in _kinds(page) if k in runtime] == []
    assert sorted(_kinds(page)) == ["system:local_command"] * 2  # not runtime rows
    expect(_row(page, 6).locator(".tool-name")).to_have_text("Bash")  # the conversation stays
    _shot(page, "runtime-rows-hidden")
    page.reload()  # the choice is remembered
    expect(page.locator("#hide-runtime")).to_be_checked()
    expect(page.locator("#rows .row").first).to_be_visible()
    _wait_until(page, "document.querySelectorAll('#rows .row').length > 10")
    assert [k for k in _kinds(page) if k in runtime] == []
    page.locator("#hide-runtime").uncheck()
    expect(switch).to_have_text("Hide 15 runtime rows")
    expect(page.locator("#rows .row")).to_have_count(rows_before)
    # a session with no runtime rows shows no switch
    _new_session(viewer.store, "plain", [events.message("user", "hi")])
    page.goto(f"{viewer.url}/#session=plain")
    expect(_row(page, 1)).to_be_visible()
    expect(page.locator("#chain-badge")).to_be_visible()
    expect(switch).to_be_hidden()


# -- comparing two sessions ------------------------------------------------------------------


def test_the_compare_view_shows_where_two_runs_part_and_what_changed(
    viewer: Viewer, tmp_path: Path
) -> None:
    # B is tool_heavy.jsonl with its Glob call's pattern changed (tests/views/test_diff.py)
    (a,) = import_paths(viewer.store, [TOOL_HEAVY])
    (b,) = import_paths(viewer.store, [_copy(tmp_path, _other_glob_pattern)])
    glob = next(e.seq for e in viewer.store.read(a.session_id) if e.payload.get("id") == GLOB_CALL)
    page = viewer.open(a.session_id, viewport=FULL_HD)
    page.locator("#compare-button").click()
    page.locator("#compare-with").select_option(b.session_id)
    page.locator("#compare-form button[type=submit]").click()
    expect(page.locator("#compare")).to_be_visible()
    verdict = page.locator("#compare-verdict")
    expect(verdict).to_contain_text("alike, then they part: A's tool call Glob")
    expect(verdict).to_contain_text(f"(seq {glob}, turn ")
    first = page.locator("#first-divergence")
    expect(first.locator("h3")).to_contain_text("First divergence · changed: 1 step")
    expect(first.locator(f'.compare-row .compare-step[data-seq="{glob}"]')).to_have_count(2)
    expect(page.locator("#first-changes dt")).to_have_text(["input"])
    expect(page.locator("#first-changes .compare-value--b pre")).to_contain_text('"**/*.ts"')
    expect(page.locator("#first-changes .compare-value--a pre")).not_to_contain_text("*.ts")
    # the steps before it are one block alike, folded; every step is in one block or another
    alike = page.locator(".compare-block--same").first
    expect(alike.locator("summary")).to_contain_text("✓ alike: ")
    steps = page.locator(".compare-row .compare-step").count()
    with viewer.http() as http:
        body = http.get(f"/v1/sessions/{a.session_id}/diff/{COPY_ID}").json()
    assert steps == body["steps"]["a"] + body["steps"]["b"]
    assert (
        body["prefix"] == page.locator(".compare-block--same").first.locator(".compare-row").count()
    )
    _shot(page, "compare")

    first.locator(f'.compare-step[data-seq="{glob}"]').first.click()  # A's step opens A there
    expect(page.locator("#session-title")).to_have_text("start phoenix in background")
    expect(page.locator("#rows .row--flash")).to_have_attribute("data-seq", str(glob))

    page.goto(f"{viewer.url}/#compare={a.session_id}&with={a.session_id}")
    expect(page.locator("#compare-verdict")).to_have_text(
        f"Identical: all {body['steps']['a']} steps alike."
    )
    expect(page.locator("#first-divergence")).to_have_count(0)
