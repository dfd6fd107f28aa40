"""The terminal transcript (agenttrail.views.terminal) on real logs: one row per event, a tool
call and its result on one row, anomalies flagged, text from the log made safe, long text
clipped unless ``full``."""

from __future__ import annotations

import io
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore
from agenttrail.model import Event, NewEvent, NewSession, events
from agenttrail.views.safe import safe
from agenttrail.views.terminal import render_session, transcript_table
from agenttrail.views.terminal_text import (
    ANNOTATION_CHARS,
    ARGS_CHARS,
    RESULT_CHARS,
    RESULT_LINES,
)
from agenttrail.views.transcript import IndexCache
from tests.conftest import REALDATA

# marot/spotter test/fixtures/transcripts/tool_heavy.jsonl (the real data's SOURCES.md,
# tests/conftest.py REALDATA)
TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"

DAY = "2026-01-01T10:00:{:02d}.000000Z"


def _log(
    store: LogStore,
    payloads: list[dict[str, Any]],
    *,
    times: list[str] | None = None,
    sid: str = "s",
) -> str:
    """A session holding ``payloads``, one second apart unless ``times`` says otherwise."""
    store.create_session(NewSession(sid, "a title", "harvey", "ana"))
    stamps = times or [DAY.format(i) for i in range(len(payloads))]
    batch = [NewEvent(p, created_at=t) for p, t in zip(payloads, stamps, strict=True)]
    store.append_batch(sid, batch)
    return sid


def _text(renderable: Any, width: int = 4000) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None).print(renderable)
    return buffer.getvalue()


def _rows(store: LogStore, sid: str, **kwargs: Any) -> list[list[str]]:
    """The table's rows as ``[seq, time, actor, event, text]`` lists of cell lines joined."""
    table = transcript_table(list(store.read(sid)), **kwargs)
    cells = [[_text(cell).rstrip("\n") for cell in column.cells] for column in table.columns]
    return [list(row) for row in zip(*cells, strict=True)]


def test_a_call_and_its_result_are_one_row_whatever_stands_between(store: LogStore) -> None:
    sid = _log(
        store,
        [
            events.tool_call("c1", "grep", {"pattern": "x"}),  # 1
            events.message("user", "also check the tests"),  # 2
            events.tool_call("c2", "read", {"path": "a.py"}),  # 3
            events.tool_result("c2", "read", output="print(1)"),  # 4
            events.tool_result("c1", "grep", output="a.py:1"),  # 5
        ],
    )
    rows = _rows(store, sid)
    assert [row[0] for row in rows] == ["1→5", "2", "3→4"]
    assert rows[0][2:] == ["agent", "tool", 'grep({"pattern": "x"}) — ok\na.py:1']
    assert rows[1][2:] == ["user", "user", "also check the tests"]
    assert rows[2][4] == 'read({"path": "a.py"}) — ok\nprint(1)'


def test_what_does_not_pair_is_flagged_with_the_reason(store: LogStore) -> None:
    sid = _log(
        store,
        [
            events.tool_call("c1", "run", {}),  # 1: no result
            events.tool_result("ghost", "x", output="boo"),  # 2: orphan
            events.tool_call("d", "a", {}),  # 3, 4: one id, two calls
            events.tool_call("d", "b", {}),
            events.tool_result("d", output="?"),  # 5
            events.tool_call("", "nameless", {}),  # 6: no id
        ],
    )
    flags = {row[0]: row[4].splitlines()[-1] for row in _rows(store, sid)}
    assert flags == {
        "1": "⚠ call with no result",
        "2": "⚠ result with no call",
        "3": "⚠ call id used by more than one call: ambiguous",
        "4": "⚠ call id used by more than one call: ambiguous",
        "5": "⚠ call id used by more than one call: ambiguous",
        "6": "⚠ no call id: cannot be paired",
    }


def test_a_failed_tool_says_its_error_once(store: LogStore) -> None:
    sid = _log(
        store,
        [
            events.tool_call("c1", "read", {"path": "gone"}),
            events.tool_result("c1", "read", output="error: no such file"),
            events.tool_call("c2", "make", {}),
            events.tool_result("c2", "make", output="cc failed\nstop", exit_code=2),
        ],
    )
    rows = _rows(store, sid)
    assert rows[0][4] == 'read({"path": "gone"}) — error: no such file'
    assert rows[1][4] == "make({}) — error: exit 2\ncc failed\nstop"


def test_control_and_bidi_characters_and_lone_surrogates_become_visible_escapes() -> None:
    assert safe("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert safe("\u202eevil\u2066x\u2069\u200f") == "\\u202eevil\\u2066x\\u2069\\u200f"
    assert safe("bad \udc81 half") == "bad \\udc81 half"
    assert safe("nul\x00 del\x7f c1\x85 bell\x07") == "nul\\x00 del\\x7f c1\\x85 bell\\x07"
    assert safe("lines\nand\ttabs stay, so does café ✓") == "lines\nand\ttabs stay, so does café ✓"


_ESCAPED = [
    *map(chr, [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]),
    "\u061c",
    "\u200e",
    "\u200f",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
    "\ud800",
    "\udc81",
    "\udfff",
]
"""What safe() escapes, written out from its rule: C0 and C1 controls but newline and tab,
the bidi controls, lone surrogates."""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*_ESCAPED, "a", " ", "\n", "\t", "…", "ⓘ", "—", "é", "中", "😀"])))
def test_safe_escapes_each_such_character_in_any_text(chars: list[str]) -> None:
    # a line of text that is not ASCII is passed through unchanged only when it needs nothing
    # escaped (the fast path asks Python whether it is printable)
    def escaped(c: str) -> str:
        if c not in _ESCAPED:
            return c
        return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"

    assert safe("".join(chars)) == "".join(map(escaped, chars))


def test_text_from_the_log_is_never_markup_or_terminal_control(store: LogStore) -> None:
    store.create_session(NewSession("s", "Title \x1b[2J", "harvey", workspace="/w\u202e"))
    store.append_batch(
        "s",
        [
            NewEvent(events.message("user", "[bold]not markup[/bold] \x1b[31mred \udc81")),
            NewEvent(events.tool_call("c", "sh\u202e", {"cmd": "[red]x[/red]"})),
        ],
    )
    console = Console(file=io.StringIO(), width=200, color_system=None)
    render_session(console, store.get_session("s"), store.read("s"))
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert shown.startswith("Title \\x1b[2J\nsession s\nagent: harvey\nworkspace: /w\\u202e\n")
    assert "[bold]not markup[/bold] \\x1b[31mred \\udc81" in shown
    assert 'sh\\u202e({"cmd": "[red]x[/red]"})' in shown
    assert "\x1b" not in shown and "\u202e" not in shown


def test_long_text_is_clipped_unless_full_is_asked_for(store: LogStore) -> None:
    many_lines = "\n".join(f"line {i}" for i in range(RESULT_LINES + 4))
    one_long_line = "y" * (RESULT_CHARS + 20)
    sid = _log(
        store,
        [
            events.tool_call("a", "read", {"text": "x" * (ARGS_CHARS + 10)}),
            events.tool_result("a", output=many_lines),
            events.tool_call("b", "dump", {}),
            events.tool_result("b", output=one_long_line),
            {"type": "annotation", "kind": "hook", "data": {"blob": "z" * (ANNOTATION_CHARS + 5)}},
        ],
    )
    clipped = _rows(store, sid)
    args, *result = clipped[0][4].splitlines()
    # `{"text": "` is 10 characters of the ARGS_CHARS shown
    assert args == f'read({{"text": "{"x" * (ARGS_CHARS - 10)}…) — ok'
    hidden = len(many_lines) - len("\n".join(many_lines.splitlines()[:RESULT_LINES]))
    assert result == [
        *many_lines.splitlines()[: RESULT_LINES - 1],
        f"line {RESULT_LINES - 1}… ({hidden:,} more characters; --full shows them)",
    ]
    assert clipped[1][4].splitlines()[1] == (
        f"{'y' * RESULT_CHARS}… (20 more characters; --full shows them)"
    )
    note = clipped[2][4]
    assert len(note) == ANNOTATION_CHARS + 1 and note.endswith("…")
    whole = _rows(store, sid, full=True)
    assert whole[0][4].splitlines()[1:] == many_lines.splitlines()
    assert whole[1][4].splitlines()[1] == one_long_line
    assert whole[2][4] == '{"blob": "' + "z" * (ANNOTATION_CHARS + 5) + '"}'
    assert whole[0][4].splitlines()[0] == clipped[0][4].splitlines()[0]  # arguments stay cut


def test_rows_are_timed_by_the_clock_or_by_the_day_when_a_session_spans_days(
    store: LogStore,
) -> None:
    payloads = [events.message("user", "hi"), events.message("assistant", "hello")]
    sid = _log(store, payloads)
    assert [row[1] for row in _rows(store, sid)] == ["10:00:00", "10:00:01"]
    times = ["2026-01-01T23:59:59.000000Z", "2026-01-02T08:00:00.000000Z"]
    later = _log(store, payloads, times=times, sid="later")
    assert [row[1] for row in _rows(store, later)] == ["01-01 23:59:59", "01-02 08:00:00"]


def test_the_row_where_the_chain_breaks_is_marked(store: LogStore) -> None:
    sid = _log(
        store,
        [
            events.message("user", "hi"),
            events.tool_call("c", "read", {}),
            events.tool_result("c", output="ok"),
        ],
    )
    mark = "⚠ the chain breaks at seq {}"
    at_result = _rows(store, sid, broken_at=3)  # shown on its call's row
    assert [row[4].splitlines()[-1] for row in at_result] == ["hi", mark.format(3)]
    at_message = _rows(store, sid, broken_at=1)
    assert at_message[0][4] == "hi\n" + mark.format(1)
    assert mark.format(1) not in at_message[1][4]


def test_meta_shows_the_model_and_the_token_counts_that_are_known(store: LogStore) -> None:
    usage = events.usage(input=120, output=9, cache_read=None, cache_write=4)
    meta = events.meta(model="llama3", provider="ollama", usage=usage, duration_ms=812)
    sid = _log(store, [events.message("assistant", "done", meta=meta, character="HARVEY")])
    (row,) = _rows(store, sid)
    assert row[3] == "assistant HARVEY"
    assert row[4] == "done\nⓘ llama3 · ollama · tokens in 120, out 9, cache write 4 · 812 ms"
    # thousands separated, as show's header and usage write them
    usage = events.usage(input=12_345, output=9, cache_read=1_015_436, cache_write=None)
    sid = _log(store, [events.message("assistant", "done", meta=events.meta(usage=usage))], sid="t")
    (row,) = _rows(store, sid)
    assert row[4] == "done\nⓘ tokens in 12,345, out 9, cache read 1,015,436"


def test_a_real_claude_code_session_pairs_every_call_by_id(store: LogStore) -> None:
    (report,) = import_paths(store, [TOOL_HEAVY])
    rows = _rows(store, report.session_id)
    paired = [row[0] for row in rows if "→" in row[0]]
    # The pairs the transcript test reads from the same file (tests/views/test_transcript.py).
    assert paired == ["6→12", "14→18", "29→33", "30→32", "35→38", "36→39"]
    assert not any("⚠" in row[4] for row in rows)
    shown = {int(row[0].split("→")[0]) for row in rows}
    every: list[Event] = list(store.read(report.session_id))
    assert shown == {e.seq for e in every} - {12, 18, 32, 33, 38, 39}


def test_a_runtime_note_is_summed_up_as_the_viewer_sums_it(store: LogStore) -> None:
    # The real transcript's progress, file-history-snapshot and queue-operation lines: show
    # wrote each as its data's JSON (`{"cwd": "/home/…", "data": {"type": …`); the viewer
    # as its fields that say something (`hook_progress · bd prime · SessionStart:startup`).
    (report,) = import_paths(store, [TOOL_HEAVY])
    viewer = IndexCache().page(store, report.session_id, after_seq=0, limit=1000).rows
    notes = {r["seq"]: r["text"] for r in viewer if r["view"] == "note" and r.get("runtime")}
    assert len(notes) == 15
    shown = {int(row[0]): row[4] for row in _rows(store, report.session_id) if "→" not in row[0]}
    for seq, text in notes.items():
        assert shown[seq] == text[:ANNOTATION_CHARS] + ("…" if len(text) > ANNOTATION_CHARS else "")
    assert any(t.startswith("hook_progress · ") for t in notes.values())
    # Against the file itself: each progress line's row is the values of its `data` (its
    # hook, event and command), none of the line's own fields (its cwd, ids, times).
    lines = [json.loads(line) for line in TOOL_HEAVY.read_text(encoding="utf-8").splitlines()]
    progress = [line for line in lines if line.get("type") == "progress"]
    rows = [row for row in _rows(store, report.session_id) if row[3] == "progress"]
    assert len(rows) == len(progress) == 10
    for row, line in zip(rows, progress, strict=True):
        pieces = row[4].removesuffix("…").split(" · ")
        whole = pieces if not row[4].endswith("…") else pieces[:-1]
        values = {str(v) for v in line["data"].values()}
        assert pieces[0] == line["data"]["type"] and set(whole) <= values
        assert len(whole) == len(values) or row[4].endswith("…")
        assert line["cwd"] not in row[4]
