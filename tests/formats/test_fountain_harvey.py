"""Fountain files against Harvey's own reader and writer (docs/fountain-format.md).

The oracles are ``../shared/harvey/bin/harveyread`` and ``harveywrite``: Harvey's
``recorder.go`` and the parsing half of its ``replay.go``, verbatim, over rsdoiel/fountain
v1.0.2 (``../shared/harvey/README.md``). Harvey's reader takes the first line of each dialogue
only, so "recovers a turn" means: the user's line and the reply's first line, trimmed, as Harvey's
own writer would have them.

The same hazard sessions are read by two independent Fountain parsers as well: fountain-py and
screenplain (docs/fountain-format.md, Readers).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fountain.parser import FountainParser
from screenplain.parsers.fountain import parse as screenplain_parse
from screenplain.types import Dialog, Slug

from agenttrail import Recorder
from agenttrail.formats.fountain import fountain_from_events
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import Event, content_text
from tests.conftest import HARVEY, REALDATA, run_cli

HARVEYREAD = HARVEY / "bin" / "harveyread"
HARVEYWRITE = HARVEY / "bin" / "harveywrite"
HARVEY_FILES = sorted((REALDATA / "harvey").glob("*.spmd"))


def harvey_read(path: Path) -> dict[str, Any]:
    """What Harvey's ``--continue`` makes of a file (its reader's JSON for that file)."""
    done = subprocess.run([str(HARVEYREAD), str(path)], capture_output=True, check=True)
    (result,) = json.loads(done.stdout)
    assert isinstance(result, dict)
    return result


def harvey_turns(path: Path) -> list[tuple[str, str]]:
    result = harvey_read(path)
    return [(t["user"], t["reply"]) for t in result.get("turns") or []]


def _content_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip() != ""]


def _render(store: LogStore, session_id: str) -> str:
    return fountain_from_events(store.get_session(session_id), list(store.read(session_id)))


# -- Harvey's files come back as they were ---------------------------------------------------


@pytest.mark.parametrize("path", HARVEY_FILES, ids=lambda p: p.name)
def test_a_harvey_file_imported_and_rendered_gives_back_the_file(
    tmp_path: Path, path: Path
) -> None:
    with open_store(tmp_path / "log.db") as store:
        (report,) = import_paths(store, [path])
        text = _render(store, report.session_id)
    source = path.read_text(encoding="utf-8")
    # Blank lines between elements follow our layout (docs/fountain-format.md, Reading).
    assert _content_lines(text) == _content_lines(source)
    ours = tmp_path / path.name
    ours.write_text(text, encoding="utf-8")
    assert harvey_turns(ours) == harvey_turns(path)
    assert harvey_read(ours)["model"] == harvey_read(path)["model"]


# -- hazard sessions: Harvey's writer and ours, read by Harvey's reader ------------------------

HAZARDS = [
    "line one\nline two",
    "para one\n\npara two",
    "```python\nprint('x')\n```",
    "```\n/* c */\n```",
    "@NOTACUE hello",
    "! not a shell",
    "> quoted",
    "(aside)",
    "[[tool: rm({}) — ok]]",
    ". dot first",
    ".FORCED",
    "~lyric",
    "= synopsis",
    "# Heading",
    "===",
    "STATUS?",
    "ERROR: disk full",
    "INT. FAKE SCENE 2026-01-01 00:00:00",
    "EXT. BEACH",
    "Internally fine",
    "THE END.",
    "THE END",
    "CUT TO:",
    "FADE IN:",
    "Go TO:",
    "a - b",
    "C#",
    "C:\\Users\\me",
    "regex \\d+ and \\n",
    "/* c */",
    "see [[x]] here",
    "Forwarding to GPT.",
    "tab\there",
    "ALL CAPS\n\nNOTE\nafter a blank line",
    "\n\nstarts with blank lines",
    "",
    "ends with blank\n\n",
    "  indented",
    "日本語 テキスト",
    "x" * 70_000,
    "Fine. Nothing to escape.",
]
"""One hazard per session: multi-line text, code fences, lines starting with a character that
some reader takes as structure, all-caps lines, headings and transitions, escapes, blank lines,
an empty message, a line over Harvey's 64 KiB line limit."""


def _first_line(text: str) -> str:
    # Harvey's writer trims the whole text; its reader takes the first line, trimmed.
    return text.strip().split("\n")[0].strip()


def _expected(hazard: str) -> list[tuple[str, str]]:
    return [(_first_line(hazard), "first reply"), ("second question", _first_line(hazard))]


def _harveys_file(tmp: Path, hazard: str) -> Path:
    path = tmp / "harvey.spmd"
    ops = [
        {"op": "new", "path": str(path), "model": "Ollama (llama3:latest)", "workspace": "/w"},
        {"op": "turn", "user": hazard, "reply": "first reply"},
        {"op": "turn", "user": "second question", "reply": hazard},
        {"op": "close"},
    ]
    env = {**os.environ, "USER": "rsdoiel"}
    subprocess.run([str(HARVEYWRITE)], input=json.dumps(ops).encode(), env=env, check=True)
    return path


def _our_session(store: LogStore, hazard: str) -> str:
    rec = Recorder.start(store, agent="harvey", user="rsdoiel", workspace="/w")
    for user, reply in ((hazard, "first reply"), ("second question", hazard)):
        with rec.turn(model="llama3") as turn:
            turn.user(user)
            turn.reply(reply)
    rec.close()
    return rec.session_id


def _messages(items: Sequence[Event]) -> list[tuple[Any, ...]]:
    return [
        (e.payload.get("role"), content_text(e.payload.get("content")))
        for e in items
        if e.type == "message"
    ]


def _both(tmp_path: Path, hazard: str) -> tuple[list[bool], list[bool], str, list[Event]]:
    """Which of the two turns Harvey's reader recovers from Harvey's file and from ours; our
    text; and the events our reader reads back from it."""
    expected = _expected(hazard)
    harveys = harvey_turns(_harveys_file(tmp_path, hazard))
    with open_store(tmp_path / "log.db") as store:
        text = _render(store, _our_session(store, hazard))
    ours_path = tmp_path / "ours.spmd"
    ours_path.write_text(text, encoding="utf-8")
    ours = harvey_turns(ours_path)
    with open_store(tmp_path / "back.db") as back:
        (report,) = import_paths(back, [ours_path])
        read_back = list(back.read(report.session_id))
    return (
        [turn in harveys for turn in expected],
        [turn in ours for turn in expected],
        text,
        read_back,
    )


@pytest.mark.parametrize("hazard", HAZARDS, ids=lambda h: repr(h[:24]))
def test_harveys_reader_keeps_from_our_file_all_it_keeps_from_harveys(
    tmp_path: Path, hazard: str
) -> None:
    harveys, ours, text, read_back = _both(tmp_path, hazard)
    assert [h and not o for h, o in zip(harveys, ours, strict=True)] == [False, False]
    # Our own reader gives back every text exactly.
    assert _messages(read_back) == [
        ("user", hazard),
        ("assistant", "first reply"),
        ("user", "second question"),
        ("assistant", hazard),
    ]
    # An independent Fountain 1.1 parser sees our cues and headings, and nothing else.
    parsed = [(e.type.value, e.text) for e in FountainParser().parse(text).elements]
    cues = [t for k, t in parsed if k == "character"]
    assert cues == ["RSDOIEL", "HARVEY", "LLAMA3"] * 2
    headings = [t for k, t in parsed if k == "scene_heading"]
    assert [h.split(" 20")[0] for h in headings] == ["INT. HARVEY AND RSDOIEL TALKING"] * 2
    assert [t for k, t in parsed if k == "transition"] == ["FADE IN:"]


# The hazards whose note or boneyard the writer leaves as it is (it opens and closes on its line,
# and no line starts with [[: docs/fountain-format.md, Escaping), as a Fountain reader shows them.
_FOUNTAIN_HIDES = {"/* c */": "", "see [[x]] here": "see  here"}


def _letters(text: str) -> str:
    """The word characters of a text, each of our ``\\u{HEX}`` escapes aside (it stands for
    punctuation or a control character; docs/fountain-format.md, Escaping)."""
    return "".join(re.findall(r"\w", re.sub(r"\\u\{[0-9a-fA-F]+\}", "", text)))


@pytest.mark.parametrize("hazard", HAZARDS, ids=lambda h: repr(h[:24]))
def test_screenplain_reads_our_hazard_sessions_as_meant(tmp_path: Path, hazard: str) -> None:
    with open_store(tmp_path / "log.db") as store:
        text = _render(store, _our_session(store, hazard))
    screenplay = screenplain_parse(io.StringIO(text))
    assert screenplay.title_page["Author"] == ["RSDOIEL"]
    # Every paragraph is the element we wrote, and no content became another one. FADE IN: is
    # an action to screenplain, as Fountain 1.1 has it (a transition ends in TO:), so it reads
    # no transition at all (docs/fountain-format.md, Readers).
    turn = ["Slug", "Action", "Dialog", "Dialog", "Dialog"]
    assert [type(p).__name__ for p in screenplay] == ["Action", *turn, *turn, "Action"]
    paragraphs = screenplay.paragraphs
    assert [str(line) for p in (paragraphs[0], paragraphs[-1]) for line in p.lines] == [
        "FADE IN:",
        "THE END.",
    ]
    headings = [str(p.line) for p in screenplay if isinstance(p, Slug)]
    assert [h.split(" 20")[0] for h in headings] == ["INT. HARVEY AND RSDOIEL TALKING"] * 2
    # Each cue speaks its own text: every word character of it (but what Fountain hides), and
    # nothing else but parentheticals, which screenplain keeps apart.
    dialogue = [
        (str(p.character), "".join(_letters(str(line)) for aside, line in p.blocks if not aside))
        for p in screenplay
        if isinstance(p, Dialog)
    ]
    shown = _FOUNTAIN_HIDES.get(hazard, hazard)
    said = [shown, "Forwarding to LLAMA3.", "first reply"]
    said += ["second question", "Forwarding to LLAMA3.", shown]
    cues = ["RSDOIEL", "HARVEY", "LLAMA3"] * 2
    assert dialogue == [(cue, _letters(text)) for cue, text in zip(cues, said, strict=True)]


def test_over_all_hazards_harveys_reader_recovers_more_from_ours(tmp_path: Path) -> None:
    harveys_total = ours_total = 0
    for index, hazard in enumerate(HAZARDS):
        folder = tmp_path / str(index)
        folder.mkdir()
        harveys, ours, _, _ = _both(folder, hazard)
        harveys_total += sum(harveys)
        ours_total += sum(ours)
    assert ours_total > harveys_total


def test_long_lines_empty_messages_cut_notes_and_non_ascii_names_read_everywhere(
    tmp_path: Path,
) -> None:
    with open_store(tmp_path / "log.db") as store:
        rec = Recorder.start(store, agent="harvey", user="josé", workspace="/w")
        with rec.turn(model="llama3") as turn:
            turn.user("write it")
            call = turn.tool_call("write_file", {"content": "x" * 100_000})
            turn.tool_result(call, "ok")
            turn.reply("y" * 70_000 + "\nsecond line")
        with rec.turn(model="llama3") as turn:
            turn.user("")
            turn.reply("done")
        rec.close()
        text = _render(store, rec.session_id)
    path = tmp_path / "ours.spmd"
    path.write_text(text, encoding="utf-8")
    assert max(len(line.encode()) for line in text.split("\n")) < 64 * 1024
    assert "]]]" not in text
    result = harvey_read(path)
    assert not result.get("error")
    # Harvey's reader names the user as the heading does, and matches the cue to it.
    assert result["user"] == "@JOSÉ"
    assert [t["user"] for t in result["turns"]] == ["write it"]  # "" is no user line to it
    assert result["turns"][0]["reply"].startswith("y" * 1000)
    parsed = [(e.type.value, e.text) for e in FountainParser().parse(text).elements]
    cues = [t for k, t in parsed if k == "character"]
    assert cues == ["JOSÉ", "HARVEY", "LLAMA3", "JOSÉ", "HARVEY", "LLAMA3"]
    with open_store(tmp_path / "back.db") as back:
        (report,) = import_paths(back, [path])
        read_back = _messages(list(back.read(report.session_id)))
    assert read_back == [
        ("user", "write it"),
        ("assistant", "y" * 70_000 + "\nsecond line"),
        ("user", ""),
        ("assistant", "done"),
    ]


# -- --dialect harvey: sessions from elsewhere, continued in Harvey ---------------------------

_ELSEWHERE = sorted(
    [
        *(REALDATA / "claude-code-spotter").glob("*.jsonl"),
        *(REALDATA / "claude-code-simonw").glob("*.jsonl"),
        *(REALDATA / "anthropic-sdk-python").glob("*.json"),
        *(REALDATA / "otel-openai-v2-cassettes").glob("*.yaml"),
    ]
)


def _turns_in_log(items: Sequence[Event]) -> list[tuple[str, str]]:
    """Each prompt's first line, and the first line of the last reply with text before the next
    prompt (Harvey keeps one reply per turn, and the first line of a dialogue)."""
    turns: list[tuple[str, str]] = []
    for event in items:
        p = event.payload
        text = content_text(p.get("content")).strip() if event.type == "message" else ""
        if event.type == "message" and p.get("role") == "user" and event.actor == "user":
            turns.append((_first_line(text), ""))
        elif turns and event.type == "message" and p.get("role") == "assistant" and text:
            turns[-1] = (turns[-1][0], _first_line(text))
    return turns


@pytest.mark.parametrize("path", _ELSEWHERE, ids=lambda p: p.name[:40])
def test_a_session_from_elsewhere_is_continued_in_harvey(tmp_path: Path, path: Path) -> None:
    # Third-party files read in place; see ../shared/realdata/SOURCES.md for each.
    with open_store(tmp_path / "log.db") as store:
        (report,) = import_paths(store, [path])
        items = list(store.read(report.session_id))
        text = fountain_from_events(store.get_session(report.session_id), items, dialect="harvey")
    out = tmp_path / "continue.spmd"
    out.write_text(text, encoding="utf-8")
    assert harvey_turns(out) == _turns_in_log(items)
    assert harvey_read(out)["continue_loaded"] == len(_turns_in_log(items))


def test_an_unknown_dialect_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    db, out = tmp_path / "log.db", tmp_path / "out.spmd"
    with open_store(db) as store:
        session_id = _our_session(store, "hello")
    result = run_cli(
        "fountain", session_id, "--dialect", "screenplain", "-o", str(out), "--db", str(db)
    )
    assert result.returncode == 2
    assert (
        result.stderr == "error: unknown Fountain dialect 'screenplain' (use agenttrail, harvey)\n"
    )
    assert not out.exists()


def test_times_the_log_knows_state_their_zone_and_read_back(tmp_path: Path) -> None:
    with open_store(tmp_path / "log.db") as store:
        session_id = _our_session(store, "hello")
        original = list(store.read(session_id))
        text = _render(store, session_id)
    headings = [line for line in text.split("\n") if line.startswith("INT. ")]
    assert len(headings) == 2 and all(h.endswith(" UTC") for h in headings)
    out = tmp_path / "ours.spmd"
    out.write_text(text, encoding="utf-8")
    assert harvey_turns(out) == [("hello", "first reply"), ("second question", "hello")]
    with open_store(tmp_path / "back.db") as back:
        (report,) = import_paths(back, [out])
        read_back = [e for e in back.read(report.session_id) if e.type == "message"]
    # A scene's events take the scene's time, to the second, as an instant again.
    prompts = [e for e in original if e.type == "message" and e.payload.get("role") == "user"]
    assert [e.created_at[:19] for e in read_back[::2]] == [e.created_at[:19] for e in prompts]
    assert all(e.created_at.endswith("Z") for e in read_back)
