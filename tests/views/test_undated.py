"""Sessions whose source gives no time at all (a ToolBench answer, an Anthropic SDK recording):
their events have the import's time, and no view gives that time as theirs
(docs/log-format.md, ``created_at``): ``show`` and the viewer leave the time column empty,
``usage --by day`` groups their calls under ``(no date)``, and no ``--since`` or ``--until``
takes them. A Claude Code transcript, which dates every line, is the control."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agenttrail.log.store import open_store
from agenttrail.model import UNDATED, UNDATED_NOTE
from agenttrail.views.transcript import IndexCache
from tests.conftest import REALDATA, run_cli

TOOLBENCH = REALDATA / "toolbench" / "10_ChatGPT_DFS_woFilter_w2.json"
"""SOURCES.md: a ToolBench answer; its ten steps carry no time."""

RECORDING = REALDATA / "anthropic-sdk-python" / "092be1de-d3f8-4c22-a4ea-a7ad54689836.json"
"""SOURCES.md: an Anthropic SDK test recording: two model calls with usage, no dates."""

SPOTTER = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"
"""SOURCES.md: a Claude Code transcript written in February 2026, every line dated, four
model calls with usage."""

CLOCK = re.compile(r"\d\d:\d\d:\d\d")

LEFT_OUT = "1 session with no times left out: no date range takes them"


def _imported(db: str, path: Path) -> str:
    """Import ``path`` into ``db``; the session's id (import prints it)."""
    done = run_cli("import", str(path), "--db", db)
    assert done.returncode == 0, done.stderr
    (session_id,) = done.stdout.split()
    return session_id


def test_an_import_without_times_is_marked_undated_and_one_with_times_is_not(db_url: str) -> None:
    toolbench, spotter = _imported(db_url, TOOLBENCH), _imported(db_url, SPOTTER)
    with open_store(db_url) as store:
        undated, dated = store.get_session(toolbench), store.get_session(spotter)
    assert (undated.dated, undated.started) == (False, None)
    assert "no times" in undated.metadata[UNDATED]
    assert dated.dated and UNDATED not in dated.metadata
    assert dated.started is not None and dated.started.startswith("2026-02")


def test_sessions_since_or_until_leave_out_a_session_of_no_time(db_url: str) -> None:
    toolbench, spotter = _imported(db_url, TOOLBENCH), _imported(db_url, SPOTTER)

    def listed(*args: str) -> list[str]:
        done = run_cli("sessions", "--db", db_url, "--json", *args)
        assert done.returncode == 0, done.stderr
        # left out, and said so: it would vanish from the list without a word
        assert (LEFT_OUT in done.stderr) == bool(args), done.stderr
        return sorted(json.loads(line)["id"] for line in done.stdout.splitlines())

    assert listed() == sorted([toolbench, spotter])
    assert listed("--since", "2000-01-01") == [spotter]
    # its row was written today, which an --until after today took as its start
    assert listed("--until", "2999-12-31") == [spotter]


def test_usage_by_day_puts_calls_of_no_time_under_no_date_last(db_url: str) -> None:
    _imported(db_url, RECORDING)
    _imported(db_url, SPOTTER)
    done = run_cli("usage", "--by", "day", "--json", "--db", db_url)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(row["day"], row["calls"]) for row in rows][-1] == (None, 2)  # JSON's no value
    assert all(row["day"].startswith("2026-02") for row in rows[:-1])
    assert sum(row["calls"] for row in rows[:-1]) == 4
    since = run_cli("usage", "--json", "--since", "2000-01-01", "--db", db_url)
    assert [json.loads(line)["calls"] for line in since.stdout.splitlines()] == [4]
    assert LEFT_OUT in since.stderr
    terminal = run_cli("usage", "--by", "day", "--db", db_url)  # in a pipe: the TSV lines
    assert terminal.stdout.splitlines()[-1].split("\t")[:2] == ["(no date)", "2"]


def test_show_gives_the_events_of_no_time_no_time(db_url: str) -> None:
    toolbench, spotter = _imported(db_url, TOOLBENCH), _imported(db_url, SPOTTER)
    undated = run_cli("show", toolbench, "--db", db_url)
    assert undated.returncode == 0, undated.stderr
    assert (
        "times: the source gives no times: each event has the time it was imported"
        in undated.stdout
    )
    rows = [line for line in undated.stdout.splitlines() if line.startswith("│")]
    assert len(rows) > 10 and not any(CLOCK.search(line) for line in rows)
    dated = run_cli("show", spotter, "--db", db_url, "--tail", "3")
    assert "times: none" not in dated.stdout
    assert CLOCK.search(dated.stdout.split("┃ text")[1])  # the control: its rows have times


def test_a_session_of_no_time_is_not_live_after_its_import(db_url: str) -> None:
    # its events have the import's time, seconds ago: read as theirs, it was ● live
    toolbench = _imported(db_url, TOOLBENCH)
    with open_store(db_url) as store:
        (summary,) = IndexCache().overviews(store, [toolbench])
    assert (summary["live"], summary["last_event_at"]) == (False, None)


def test_search_since_or_until_takes_no_event_of_no_time(db_url: str) -> None:
    toolbench, spotter = _imported(db_url, TOOLBENCH), _imported(db_url, SPOTTER)

    def found(*args: str) -> set[str]:
        done = run_cli("search", "the", "--db", db_url, *args)
        assert done.returncode == 0, done.stderr
        assert (LEFT_OUT in done.stderr) == bool(args), done.stderr
        return {line.split("\t")[0] for line in done.stdout.splitlines()}

    assert found() == {toolbench, spotter}
    assert found("--since", "2000-01-01") == {spotter}
    assert found("--until", "2999-12-31") == {spotter}


def test_no_session_the_other_filters_leave_out_is_said_left_out(db_url: str) -> None:
    # The note counts the sessions of no time that the command would have taken but for the
    # date range: not another agent's, not one without a model call to sum, not one without
    # the words sought. Counting them sent a user looking for sessions that were never there.
    toolbench, spotter = _imported(db_url, TOOLBENCH), _imported(db_url, SPOTTER)
    with open_store(db_url) as store:
        agent = store.get_session(spotter).agent
    assert agent is not None
    for args in (
        ("sessions", "--agent", agent),
        ("usage",),  # the ToolBench answer holds no model call with usage
        ("search", "xterm"),  # in the transcript only
    ):
        done = run_cli(*args, "--since", "2000-01-01", "--db", db_url)
        assert done.returncode == 0, done.stderr
        assert spotter in done.stdout and toolbench not in done.stdout
        assert "left out" not in done.stderr, (args, done.stderr)
    words = run_cli("search", "the", "--since", "2000-01-01", "--db", db_url)  # in both
    assert LEFT_OUT in words.stderr and toolbench not in words.stdout


def test_fountain_says_its_headings_have_the_imports_time_and_reads_it_back(
    db_url: str, tmp_path: Path
) -> None:
    # A scene heading needs a time: a session of no time gets the import's, and its title
    # page says so; a Fountain file that says so imports as a session of no time again.
    toolbench, spotter = _imported(db_url, TOOLBENCH), _imported(db_url, SPOTTER)
    written = run_cli("fountain", toolbench, "--db", db_url)
    assert written.returncode == 0, written.stderr
    title_page = written.stdout.split("\n\n")[0].splitlines()
    assert f"Times: {UNDATED_NOTE}" in title_page
    assert not any(line.startswith(("Date:", "Draft date:")) for line in title_page)
    control = run_cli("fountain", spotter, "--db", db_url).stdout.split("\n\n")[0]
    assert "Times:" not in control and "Date: 2026-02-" in control
    path = tmp_path / "undated.fountain"
    path.write_text(written.stdout, encoding="utf-8")
    other = str(tmp_path / "other.db")
    again = _imported(other, path)
    with open_store(other) as store:
        session = store.get_session(again)
    assert (session.dated, session.started) == (False, None)
    assert "title_page" not in session.metadata  # the line is the mark, not an extra key


def test_an_export_says_its_session_has_no_times(db_url: str, tmp_path: Path) -> None:
    recording = _imported(db_url, RECORDING)
    written = tmp_path / "session.md"
    done = run_cli("export", recording, "-o", str(written), "--db", db_url)
    assert done.returncode == 0, done.stderr
    text = written.read_text(encoding="utf-8")
    assert f"- **times**: {UNDATED_NOTE}" in text
    # its cost names the price table after a dot: the table's date is in parentheses already
    assert re.search(r"- \*\*cost\*\*: \$[0-9.]+ · genai-prices \S+ \(published [^()]+\)\n", text)
