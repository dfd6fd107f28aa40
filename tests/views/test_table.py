"""A table printed a chunk at a time (agenttrail.views.table) prints the lines Rich prints for
the whole table at once: Rich itself is the oracle, on real sessions, on a generated session
of 5,000 events, and on made-up cells (wide characters, tabs, markup, long words)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich._wrap import divide_line
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.model.parts import whole_messages
from agenttrail.views.order import reading_order
from agenttrail.views.pairing import pair_tool_calls
from agenttrail.views.table import StyledText, _divide_one_cell, cell_width, print_table
from agenttrail.views.terminal import (
    READ_AHEAD,
    _template,
    _transcript_rows,
    print_session,
    render_session,
    transcript_table,
)
from tests.conftest import REALDATA

# Every transcript file of the real data that import reads (SOURCES.md lists them).
REAL_FILES = sorted(
    p
    for folder in ("claude-code-simonw", "claude-code-spotter", "harvey", "toolbench")
    for p in (REALDATA / folder).glob("*")
    if p.suffix in (".jsonl", ".spmd", ".json")
)


def _console(width: int, *, colour: bool) -> Console:
    if colour:
        return Console(
            file=io.StringIO(), width=width, force_terminal=True, color_system="truecolor"
        )
    return Console(file=io.StringIO(), width=width, color_system=None)


def _printed(console: Console) -> str:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def _same_as_rich(db: Path, session_id: str, width: int, *, colour: bool) -> None:
    with open_store(str(db)) as store:
        session = store.get_session(session_id)
        streamed = _console(width, colour=colour)
        render_session(streamed, session, store.read(session_id))
        read_twice = _console(width, colour=colour)  # reads the session as it prints
        print_session(read_twice, session, store)
        whole = _console(width, colour=colour)
        events = whole_messages(store.read(session_id))
        whole.print(transcript_table(events, width=width, dated=session.dated))
    assert _printed(whole), "the oracle printed the table"
    assert _printed(streamed).endswith(_printed(whole))
    assert _printed(read_twice) == _printed(streamed)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_show_prints_what_rich_prints_for_the_whole_table(tmp_path: Path, path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(str(db), create=True) as store:
        reports = import_paths(store, [path])
    for report in reports:
        for width in (60, 100, 180):
            _same_as_rich(db, report.session_id, width, colour=False)
        _same_as_rich(db, report.session_id, 120, colour=True)


def _large_session(db: Path, n: int) -> None:
    """``n`` events of messages, tool calls and results (one in 50 results 20 KiB), over two
    days, with a long character name (its label is cut); one call's result comes more than
    :data:`READ_AHEAD` events later, and one result comes before its call."""
    batch: list[NewEvent] = [
        NewEvent(events.tool_call("far", "wait", {}), "2026-01-01T09:00:00.000000Z"),
        NewEvent(events.tool_result("early", "look", output="seen"), "2026-01-01T09:00:00.000000Z"),
        NewEvent(events.tool_call("early", "look", {}), "2026-01-01T09:00:01.000000Z"),
    ]
    for turn in range(n // 4):
        call = f"call_{turn}"
        output = ("line of output " * 8 + "\n") * (1400 if turn % 50 == 49 else 2)
        for payload in (
            events.message("user", f"question {turn}: what is in file {turn}?"),
            events.message(
                "assistant", "Looking. " * (turn % 7), character="A VERY LONG CHARACTER NAME"
            ),
            events.tool_call(call, "read_file", {"path": f"/tmp/file{turn}.txt"}),
            events.tool_result(call, "read_file", output=output),
        ):
            day = 1 + len(batch) * 2 // n
            batch.append(NewEvent(payload, f"2026-01-0{day}T10:00:00.000000Z"))
    far = NewEvent(events.tool_result("far", "wait", output="done"), "2026-01-02T11:00:00.000000Z")
    assert n - 4 > READ_AHEAD
    with open_store(str(db), create=True) as store:
        store.append_batch("big", [*batch[: n - 1], far], create=NewSession("big", "big", "x"))


def test_show_of_a_large_session_prints_what_rich_prints(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    _large_session(db, 5000)
    _same_as_rich(db, "big", 120, colour=False)


_CELL = st.text(
    st.sampled_from([*"ab c\t\n[]:-", "界", "é", "—", "…", "\u0301", "😀", " "]),
    max_size=60,
)


def _three_columns() -> Table:
    """A right-aligned number, a label cut with an ellipsis, and the text taking the rest."""
    table = Table(expand=True, pad_edge=False)
    table.add_column("n", justify="right", no_wrap=True)
    table.add_column("label", no_wrap=True, overflow="ellipsis", max_width=6)
    table.add_column("text", ratio=1, overflow="fold")
    return table


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(_CELL, _CELL, _CELL), max_size=7),
    width=st.integers(20, 90),
    chunk=st.integers(1, 4),
    colour=st.booleans(),
)
def test_chunks_print_what_rich_prints(
    rows: list[tuple[str, str, str]], width: int, chunk: int, colour: bool
) -> None:
    def cells() -> list[tuple[str, Text, Text]]:
        return [(a, Text(b), Text(c)) for a, b, c in rows]

    whole = _three_columns()
    for row in cells():
        whole.add_row(*row)
    expected = _console(width, colour=colour)
    expected.print(whole)
    streamed = _console(width, colour=colour)
    print_table(streamed, _three_columns(), cells, chunk_rows=chunk)
    assert _printed(streamed) == _printed(expected)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(_CELL, _CELL, _CELL, _CELL), max_size=7),
    width=st.integers(20, 90),
    colour=st.booleans(),
)
def test_styled_cells_with_their_widths_given_print_what_rich_prints(
    rows: list[tuple[str, str, str, str]], width: int, colour: bool
) -> None:
    """StyledText cells (laid out from their plain text without colour, the short ones
    padded without dividing them) and ``widest`` given by the caller (:func:`cell_width`,
    the rows built once) print what Rich prints for the Text those cells stand for."""

    def cells() -> list[tuple[StyledText, StyledText, StyledText]]:
        built = []
        for a, b, c, d in rows:
            text = StyledText(c, style="red")
            text.append(d, style="bold")
            built.append((StyledText(a), StyledText(b, style="dim"), text))
        return built

    whole = _three_columns()
    for a, b, c, d in rows:
        text = Text(c, style="red")
        text.append(d, style="bold")
        whole.add_row(Text(a), Text(b, style="dim"), text)
    expected = _console(width, colour=colour)
    expected.print(whole)
    widest = [max((cell_width(row[i].plain) for row in cells()), default=0) for i in range(3)]
    called = 0

    def once() -> list[tuple[StyledText, StyledText, StyledText]]:
        nonlocal called
        called += 1
        return cells()

    streamed = _console(width, colour=colour)
    print_table(streamed, _three_columns(), once, widest=widest, chunk_rows=3)
    assert _printed(streamed) == _printed(expected)
    assert called == 1


def test_a_window_of_a_session_with_erasures_prints_what_rich_prints(tmp_path: Path) -> None:
    """``show --since`` measures the rows it prints, not the session's: a window whose seqs
    are narrower than the session's, and erased calls and results (kept paired by their
    erasure record), against Rich printing the same rows as one table."""
    db = tmp_path / "log.db"
    batch = [
        NewEvent(events.tool_call("c0", "look", {}), "2026-01-01T09:00:00.000000Z"),
        NewEvent(events.tool_result("c0", "look", output="x"), "2026-01-02T09:00:00.000000Z"),
    ]
    for turn in range(1, 30):
        for payload in (
            events.message("user", f"question {turn}", character="A LONG NAME" * (turn == 1)),
            events.tool_call(f"c{turn}", "look", {"n": turn}),
            events.tool_result(f"c{turn}", "look", output="seen " * turn),
        ):
            batch.append(NewEvent(payload, "2026-01-03T10:00:00.000000Z"))
    with open_store(str(db), create=True) as store:
        store.append_batch("w", batch, create=NewSession("w", "window", "x"))
        store.erase("w", [6, 10, 11], by="me", reason="test")
        session = store.get_session("w")
        for since in (1, 5, 11, 12, 80):  # 5 and 11: a call before the window, its result in it
            for width in (60, 120):
                streamed = _console(width, colour=False)
                print_session(streamed, session, store, since=since)
                held = list(store.read("w"))
                whole = _template(width)
                for row in _transcript_rows(
                    reading_order(held),
                    pair_tool_calls(held),
                    "day and time",  # the session's events fall on three days
                    full=False,
                    broken_at=None,
                    since=since,
                ):
                    whole.add_row(*row)
                expected = _console(width, colour=False)
                expected.print(whole)
                assert _printed(streamed).endswith(_printed(expected))


def test_show_of_a_large_session_with_usage_heads_it_as_the_whole_session_does(
    tmp_path: Path,
) -> None:
    """``print_session`` sums usage and cost as it first reads the session (nothing held);
    ``render_session``, which holds the session and reads it by the logical-session rule,
    is the reference, on 3,000 events of several models and providers over two years."""
    db = tmp_path / "log.db"
    models = [("gpt-4o", "openai"), ("claude-sonnet-4-5", "anthropic"), ("house-model", None)]
    batch: list[NewEvent] = []
    for turn in range(600):
        model, provider = models[turn % 3]
        usage = events.usage(1000 + 997 * turn, 20 + turn, cache_read=turn * 400)
        meta = events.meta(model=model, provider=provider, usage=usage)
        for payload in (
            events.message("user", f"question {turn}"),
            events.message("assistant", f"answer {turn}", meta=meta),
            events.tool_call(f"c{turn}", "look", {"n": turn}),
            events.tool_result(f"c{turn}", "look", output="seen " * turn),
            events.message("assistant", "done", meta=meta),
        ):
            batch.append(NewEvent(payload, f"202{4 + turn // 300}-05-01T10:00:00.000000Z"))
    with open_store(str(db), create=True) as store:
        store.append_batch("u", batch, create=NewSession("u", "usage", "x"))
        session = store.get_session("u")
        streamed = _console(120, colour=False)
        print_session(streamed, session, store)
        whole = _console(120, colour=False)
        render_session(whole, session, store.read("u"))
    assert "1,200 model calls" in _printed(whole) and "+ unknown" in _printed(whole)
    assert _printed(streamed) == _printed(whole)


@settings(max_examples=2000, deadline=None)
@given(
    st.text(alphabet="aab  \xa0—", max_size=200),  # one cell each; NBSP is space to a regex
    st.integers(1, 60),
    st.booleans(),
)
def test_a_line_of_one_cell_characters_breaks_where_rich_breaks_it(
    line: str, width: int, fold: bool
) -> None:
    # show's word division of one-cell text, a regex match per line of the result, against
    # Rich's own word-at-a-time divide_line: runs of spaces, words longer than the width,
    # folded or not, a folded word's last piece of space
    assert _divide_one_cell(line, width, fold=fold) == divide_line(line, width, fold=fold)


def test_show_prints_an_event_appended_between_its_two_reads(tmp_path: Path) -> None:
    """``print_session`` reads a session twice (to measure, to print); an event a live
    session gains in between is printed too, its actor and event columns its own (the
    first read knew only the others')."""

    class AppendsOnFirstWrite(io.StringIO):
        def __init__(self, store: LogStore) -> None:
            super().__init__()
            self.store: LogStore | None = store

        def write(self, text: str) -> int:
            if self.store is not None:  # the header: the first read is done
                store, self.store = self.store, None
                store.append_batch("live", [NewEvent(events.error("the tool crashed"))])
            return super().write(text)

    with open_store(str(tmp_path / "log.db"), create=True) as store:
        store.append_batch(
            "live",
            [
                NewEvent(events.message("user", "hello")),
                NewEvent(events.message("assistant", "hi")),
                NewEvent(events.error("the model timed out")),
            ],
            create=NewSession("live", "a live session"),
        )
        console = Console(file=AppendsOnFirstWrite(store), width=100, color_system=None)
        print_session(console, store.get_session("live"), store)
    (row,) = [line for line in _printed(console).splitlines() if "the tool crashed" in line]
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert (cells[0], *cells[2:]) == ("4", "system", "error", "the tool crashed")
