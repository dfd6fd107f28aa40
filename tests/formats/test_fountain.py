"""Fountain session screenplays: the seed's golden file both ways, escaping, reading, interop.

Golden file: the complete example of Fountain session format v1.2 (docs/fountain-format.md),
read in place from ``../shared/fountain/seed-example.spmd``.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fountain.parser import FountainParser
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from screenplain.parsers.fountain import parse as screenplain_parse
from screenplain.types import Action, Dialog, Slug, Transition

from agenttrail import Recorder
from agenttrail.formats import detect, fountain
from agenttrail.formats.fountain import _escaping, fountain_from_events
from agenttrail.ingest.importer import import_paths
from agenttrail.ingest.sample import SAMPLE_SESSION_ID, record_sample
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import Event, content_text
from agenttrail.views.pairing import pair_tool_calls
from tests.conftest import REALDATA, SHARED, run_cli

GOLDEN = SHARED / "fountain" / "seed-example.spmd"


def _write_and_read(store: LogStore, session_id: str, tmp: Path) -> tuple[str, list[Event]]:
    """Render a stored session, read the file back into a fresh store; return text and events."""
    text = fountain_from_events(store.get_session(session_id), list(store.read(session_id)))
    path = tmp / "session.spmd"
    path.write_text(text, encoding="utf-8")
    with open_store(tmp / "back.db") as back:
        (report,) = import_paths(back, [path])
        return text, list(back.read(report.session_id))


def _messages(items: Sequence[Event]) -> list[tuple[Any, ...]]:
    return [
        (e.payload.get("role"), content_text(e.payload.get("content")), e.actor)
        for e in items
        if e.type == "message"
    ]


def _pairing_shape(items: Sequence[Event]) -> list[tuple[str, ...]]:
    """Each tool call (name, how it paired) and each unpaired result, in log order."""
    pairing = pair_tool_calls(items)
    shape = []
    for e in items:
        anomaly = pairing.anomalies.get(e.seq)
        if e.type == "tool_call":
            state = anomaly.kind if anomaly else "paired"
            shape.append(("call", str(e.payload.get("name")), state))
        elif e.type == "tool_result" and anomaly is not None:
            shape.append(("result", anomaly.kind))
    return shape


# -- golden file ------------------------------------------------------------------------------


def test_reading_and_writing_the_golden_file_gives_identical_bytes(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    imported = run_cli("import", str(GOLDEN), "--db", str(db))
    assert imported.returncode == 0, imported.stderr
    session_id = imported.stdout.strip()
    written = run_cli("fountain", session_id, "--db", str(db))
    assert written.stdout.encode() == GOLDEN.read_bytes()


def test_the_recorder_api_session_writes_the_golden_bytes(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        record_sample(store)
    out = tmp_path / "harvey.spmd"
    result = run_cli("fountain", SAMPLE_SESSION_ID, "--db", str(db), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == GOLDEN.read_bytes()


def test_the_golden_file_reads_as_the_seed_describes(tmp_path: Path) -> None:
    (session,) = fountain.read(GOLDEN, GOLDEN.read_bytes())
    # Headings, action lines and routing records are kept as annotations (the file's layout).
    layout = ("scene", "action", "routing")
    kept = [e for e in session.events if e.payload.get("kind") not in layout]
    kinds = [e.payload["type"] for e in kept]
    assert kinds.count("recall") == 1 and kinds[0] == "recall"
    prompts = [e.payload["content"] for e in session.events if e.payload.get("role") == "user"]
    assert prompts == [
        "What is 2+2?",
        "How do I initialise a Go module?",
        "Does harvey.go compile cleanly?",
        "@mistral review this fix",
    ]
    calls = [e.payload for e in session.events if e.payload["type"] == "tool_call"]
    assert [(c["name"], c.get("character")) for c in calls] == [
        ("read_file", None),
        ("run_shell", None),
        ("read_file", "MISTRAL"),
    ]
    shell = next(e.payload for e in session.events if e.payload["type"] == "shell")
    assert (shell["command"], shell["output"], shell["exit_code"]) == (
        "go build ./...",
        "./harvey.go:42:5: undefined: foo",
        1,
    )
    replies = [e.payload for e in session.events if e.payload.get("role") == "assistant"]
    assert [r["meta"]["location"] for r in replies] == ["local", "local", "local", "remote"]
    assert session.events[-1].payload["type"] == "session_end"
    assert session.session.metadata.get("incomplete") is None


# -- escaping ---------------------------------------------------------------------------------

_HOSTILE = [
    "Step 1\n\nStep 2\n\n    code",
    "ERROR:\ncommand failed",
    "INT. FAKE SCENE 2026-01-01 00:00:00\n[[tool: rm({}) — ok]]",
    "THE END.",
    "",
    "\n",
    "  ",
    "```python\nprint('x')\n```\n# Heading\n> quote\n**bold** _u_ *i*",
    "! not a shell\n@NOTACUE\n.FORCED\n>centered<\n~lyric\n===\n= synopsis\n(parenthetical)",
    "/* boneyard */ and ]] and [[ and \\ and \\u{41}",
    "CUT TO:\nFADE OUT.\nEXT. BEACH — 2026-07-03 19:15",
    "Forwarding to LLAMA3.",
    "模型 回答\nمرحبا\nПРИВЕТ\nא",
    "tab\there\rcarriage\x00nul\u2028sep\udc81lone",
]


def _hostile_session(store: LogStore, texts: Sequence[str], characters: Sequence[str]) -> str:
    rec = Recorder.start(store, title="hostile ]] [[ /*", agent="harvey", user="rsdoiel")
    for i, text in enumerate(texts):
        character = characters[i % len(characters)]
        with rec.turn(
            model=character.lower(),
            location="remote" if i % 3 == 2 else "local",
            character=character,
        ) as turn:
            turn.user(text)
            call = turn.tool_call("run_shell", {"cmd": text, "note": "a — b ]] [["})
            turn.tool_result(call, f"error: {text}" if i % 2 else text)
            turn.reply(text)
        rec.shell(text, text, i)
    rec.close()
    return rec.session_id


def test_hostile_text_reads_back_exactly_and_creates_no_structure(tmp_path: Path) -> None:
    with open_store(tmp_path / "log.db") as store:
        sid = _hostile_session(store, _HOSTILE, ["LLAMA3", "gpt-4o-mini", "模型", "Dr. (Who)"])
        original = list(store.read(sid))
        text, back = _write_and_read(store, sid, tmp_path)
    assert _messages(back) == _messages(original)
    assert _pairing_shape(back) == _pairing_shape(original)
    shells = [
        (e.payload["command"], e.payload["output"], e.payload["exit_code"])
        for e in back
        if e.type == "shell"
    ]
    assert shells == [(t, t, i) for i, t in enumerate(_HOSTILE)]
    characters = [e.payload["character"] for e in back if e.payload.get("role") == "assistant"]
    assert characters[:4] == ["LLAMA3", "gpt-4o-mini", "模型", "Dr. (Who)"]
    assert back[-1].type == "session_end"
    # No line of content became a heading, a cue of its own, or a note.
    assert text.count("\nINT. FAKE") == 0 and "\n[[tool: rm" not in text
    assert "\nTHE END.\n" not in text[:-10]
    parsed = _elements(text)
    assert ("character", "ERROR:") not in parsed  # dialogue right under its cue


_any_text = st.text(st.characters(codec=None, categories=None), max_size=60) | st.sampled_from(
    _HOSTILE
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(_any_text, min_size=1, max_size=4),
    names=st.lists(st.text(min_size=1, max_size=12).filter(str.strip), min_size=1, max_size=3),
)
def test_any_text_reads_back_byte_for_byte(texts: list[str], names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp) / "log.db") as store:
        sid = _hostile_session(store, texts, names)
        original = list(store.read(sid))
        _, back = _write_and_read(store, sid, Path(tmp))
        assert _messages(back) == _messages(original)
        assert _pairing_shape(back) == _pairing_shape(original)


# One line of words, or one made of what the escaping rules look at: the starts of headings,
# guards and routing records, escapes, notes, boneyards, line ends, blank lines.
_LINE_PIECES = st.sampled_from(
    [
        "int",
        "EXT",
        "I/E",
        "est ",
        "Est.",
        "FADE TO",
        ".x",
        "THE END",
        "La Fin.",
        "Forwarding to ",
        "@m ",
        "\\",
        "\\u{41}",
        "[[",
        "]]",
        "/*",
        "*/",
        " -",
        "-",
        "#",
        "TO:",
        "IN:",
        "!",
        "(",
        ">",
        "~",
        "=",
        "—",
        ":",
        ".",
        " ",
        "\n",
        "\u2028",
        "\x85",
        "\u202e",
        "\ud800",
        "ABC",
        "x",
    ]
)
_DIALOGUE_TEXT = st.text(st.characters(codec=None, categories=None), max_size=30) | st.lists(
    _LINE_PIECES | st.text("abcdefghij XYZ?,'0123456789", max_size=8), max_size=8
).map("".join)


@settings(max_examples=500, deadline=None)
@given(text=_DIALOGUE_TEXT, agent=st.booleans(), mention=st.sampled_from([None, "m", "LLAMA3"]))
def test_a_plain_line_is_written_as_the_full_rules_write_it(
    text: str, agent: bool, mention: str | None
) -> None:
    """dialogue_lines' fast path (a one-line text no test flags) gives what the full rules
    give, which the tests above read back through three parsers."""
    if not text or text.startswith("\n"):
        return  # the rules for leading empty lines come first, on both paths
    assert _escaping.dialogue_lines(text, mention=mention, agent=agent) == (
        _escaping._flagged_lines(text, mention=mention, agent=agent)
    )


def test_long_arguments_are_cut_with_their_sha256(tmp_path: Path) -> None:
    with open_store(tmp_path / "log.db") as store:
        rec = Recorder.start(store, agent="harvey", user="u")
        with rec.turn(model="m") as turn:
            turn.user("write it")
            call = turn.tool_call("write_file", {"content": "x" * 1_000_000})
            turn.tool_result(call, "ok")
        text = fountain_from_events(
            store.get_session(rec.session_id), list(store.read(rec.session_id))
        )
    note = next(line for line in text.splitlines() if line.startswith("[[tool: write_file"))
    assert len(note) < 400
    whole = json.dumps({"content": "x" * 1_000_000}, separators=(",", ":"))
    digest = hashlib.sha256(whole.encode()).hexdigest()
    assert f"…\\(cut: {len(whole)} chars, sha256 {digest})" in note


# -- reading Harvey's files, old and new -----------------------------------------------------

_HARVEY_OLD = """Title: Harvey Session
Credit: Recorded by Harvey
Author: RSDOIEL
Date: 2026-07-03 19:00:00
Draft date: 2026-07-03

FADE IN:


INT. HARVEY AND RSDOIEL TALKING — 2026-07-03 19:15

Harvey and RSDOIEL are in chat mode. Model: LLAMA3.

RSDOIEL
What is in main.go?

HARVEY
Forwarding to LLAMA3.

Harvey calls read_file: {"path": "main.go"}

[[model switch: llama3 — mistral — user asked]]

[[write: notes.md — 120 bytes]]

[[tool: grep({"q":"a — b"}) — ok]]

LLAMA3
It prints hello.

RSDOIEL
And tests?

LLAMA3
There are none.


INT. WORKSHOP 2026-07-03 19:20

[[mystery: something new]]
"""


def test_an_old_harvey_file_reads_every_exchange_and_keeps_what_it_does_not_know(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.spmd"
    path.write_text(_HARVEY_OLD, encoding="utf-8")
    assert detect(path, path.read_bytes()) is fountain
    (session,) = fountain.read(path, path.read_bytes())
    payloads = [e.payload for e in session.events]
    prompts = [p["content"] for p in payloads if p.get("role") == "user"]
    replies = [p["content"] for p in payloads if p.get("role") == "assistant"]
    assert prompts == ["What is in main.go?", "And tests?"]  # two turns in one scene
    assert replies == ["It prints hello.", "There are none."]
    calls = [p for p in payloads if p["type"] == "tool_call"]
    assert [(c["name"], c["input"]) for c in calls] == [
        ("read_file", {"path": "main.go"}),
        ("grep", {"q": "a — b"}),  # two separators: split on the last
    ]
    kinds = [p.get("kind") for p in payloads if p["type"] == "annotation"]
    assert kinds == [
        *("scene", "action", "routing", "model switch", "write"),
        *("scene", "mystery"),
    ]
    assert session.events[0].created_at == "2026-07-03T19:15:00.000000Z"  # minutes only
    assert session.session.metadata["incomplete"] is True  # no THE END.
    assert session.warnings


def test_a_turns_line_with_a_line_after_it_still_names_agent_model_and_workspace(
    tmp_path: Path,
) -> None:
    # Harvey's recorder may note an unanswered mention under the turn's line, in the same
    # paragraph (the real ff-example5.spmd does): the agent was then read as HARVEY, the
    # model and the workspace lost.
    path = tmp_path / "mention.spmd"
    path.write_text(
        "Title: Offline Model\nAuthor: RSDOIEL\nDate: 2026-05-04 17:00:00\n\nFADE IN:\n\n"
        "INT. HARVEY AND RSDOIEL TALKING 2026-05-04 17:00:00\n\n"
        "Harvey and RSDOIEL are in chat mode. Model: llama3:latest. Workspace: /home/u/p.\n"
        "(@offline-model mentioned but does not respond)\n\n"
        "RSDOIEL\n@offline-model what is your status?\n\nHARVEY\nIt does not respond.\n\n"
        "THE END.\n",
        encoding="utf-8",
    )
    (session,) = fountain.read(path, path.read_bytes())
    assert (session.session.agent, session.session.workspace) == ("Harvey", "/home/u/p")
    [reply] = [e.payload for e in session.events if e.payload.get("role") == "assistant"]
    assert reply["meta"]["model"] == "llama3:latest"


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", 1, "not UTF-8"),
        (b"INT. HOUSE 2026-01-01 00:00:00\n\nJOHN\nHi\n", 1, "no title page"),
        (
            b"Title: T\nAuthor: U\n\nFADE IN:\n\n\nINT. A AND U TALKING 2026-01-01 00:00:00\n\n"
            b'[[tool: read_file({"path":',
            9,
            "not closed",
        ),
    ],
)
def test_a_file_that_is_not_a_session_is_refused_naming_the_line(
    tmp_path: Path, content: bytes, line: int, message: str
) -> None:
    path = tmp_path / "bad.spmd"
    path.write_bytes(content)
    db = tmp_path / "log.db"
    result = run_cli("import", str(path), "--db", str(db))
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {path}:{line}:") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1
    with open_store(db) as store:
        assert store.sessions() == []


# -- every real session renders and reads back ---------------------------------------------

_REAL = sorted(
    [
        *(REALDATA / "claude-code-spotter").glob("*.jsonl"),
        *(REALDATA / "claude-code-simonw").glob("*.jsonl"),
        *(REALDATA / "anthropic-sdk-python").glob("*"),
        *(REALDATA / "otel-openai-v2-cassettes").glob("*"),
    ]
)


@pytest.mark.parametrize("path", _REAL, ids=lambda p: p.name[:40])
def test_every_real_session_renders_and_reads_back(tmp_path: Path, path: Path) -> None:
    # Third-party files read in place; see ../shared/realdata/SOURCES.md for each.
    with open_store(tmp_path / "log.db") as store:
        (report,) = import_paths(store, [path])
        original = list(store.read(report.session_id))
        text, back = _write_and_read(store, report.session_id, tmp_path)
    assert _messages(back) == _messages(original)
    assert _pairing_shape(back) == _pairing_shape(original)
    doc = FountainParser().parse(text)
    assert not [e for e in doc.elements if e.type.value == "scene_heading" and "FAKE" in e.text]


# -- an independent parser reads our structure as we meant it ---------------------------------


def _elements(text: str) -> list[tuple[str, str]]:
    return [(e.type.value, e.text) for e in FountainParser().parse(text).elements]


def test_an_independent_parser_reads_the_golden_file_as_meant() -> None:
    parsed = _elements(GOLDEN.read_text(encoding="utf-8"))
    headings = [t for k, t in parsed if k == "scene_heading"]
    assert headings == [
        line for line in GOLDEN.read_text().splitlines() if line.startswith(("INT.", "EXT."))
    ]
    notes = [t for k, t in parsed if k == "note"]
    assert len(notes) == 7
    cues = [t for k, t in parsed if k == "character"]
    # Two lines of the seed are Harvey commands that Fountain itself reads otherwise: the
    # shell command "! go build ./..." (a forced action) and the routing mention
    # "@mistral review this fix" (a forced cue). docs/fountain-format.md records both.
    assert cues == ["RSDOIEL", "HARVEY", "LLAMA3"] * 3 + [
        "SHELL",
        "RSDOIEL",
        "mistral review this fix",
        "HARVEY",
        "MISTRAL",
    ]


def test_screenplain_reads_the_golden_file_as_meant() -> None:
    source = GOLDEN.read_text(encoding="utf-8")
    screenplay = screenplain_parse(io.StringIO(source))
    assert [str(p.line) for p in screenplay if isinstance(p, Slug)] == [
        line for line in source.splitlines() if line.startswith(("INT.", "EXT."))
    ]
    # screenplain reads Harvey's two commands as the dialogue they are (unlike fountain-py).
    assert [str(p.character) for p in screenplay if isinstance(p, Dialog)] == [
        *(["RSDOIEL", "HARVEY", "LLAMA3"] * 3),
        *("RSDOIEL", "SHELL", "RSDOIEL", "HARVEY", "MISTRAL"),
    ]
    assert not [p for p in screenplay if isinstance(p, Transition)]  # FADE IN: is an action
    # screenplain hides a note, but a block of several notes leaves an empty action behind
    # (docs/fountain-format.md, Readers): one per such block in the file.
    note_blocks = [
        len(list(lines))
        for is_note, lines in itertools.groupby(source.splitlines(), lambda x: x.startswith("[["))
        if is_note
    ]
    empty = [p for p in screenplay if isinstance(p, Action) and not any(map(str, p.lines))]
    assert len(empty) == len([n for n in note_blocks if n > 1])


def test_an_independent_parser_reads_hostile_sessions_as_meant(tmp_path: Path) -> None:
    with open_store(tmp_path / "log.db") as store:
        sid = _hostile_session(store, _HOSTILE * 3, ["LLAMA3", "gpt-4o-mini", "模型"])
        session = store.get_session(sid)
        text = fountain_from_events(session, list(store.read(sid)))
    parsed = _elements(text)
    ours_headings = [line for line in text.splitlines() if line.startswith(("INT. ", "EXT. "))]
    assert [t for k, t in parsed if k == "scene_heading"] == ours_headings
    assert len(ours_headings) == 2 * len(_HOSTILE) * 3
    # The parser applies Fountain's own backslash escapes inside notes, so compare what kind
    # of note each one is (the text before its first colon), in order.
    notes = [t.split(":", 1)[0] for k, t in parsed if k == "note"]
    ours_notes = [line.split(":", 1)[0] for line in text.splitlines() if line.startswith("[[")]
    assert notes == ours_notes
    cues = {t for k, t in parsed if k == "character"}
    assert cues <= {"RSDOIEL", "HARVEY", "LLAMA3", "gpt-4o-mini", "模型", "SHELL", "GPT-4O-MINI"}
    assert not [
        t
        for k, t in parsed
        if k in ("transition", "section", "synopsis", "page_break") and t not in ("FADE IN:",)
    ]


def test_the_issues_cases_read_as_meant_by_an_independent_parser(tmp_path: Path) -> None:
    with open_store(tmp_path / "log.db") as store:
        rec = Recorder.start(store, agent="harvey", user="rsdoiel")
        with rec.turn(model="llama3") as turn:
            turn.user("show me")
            turn.reply("Step 1\n\nStep 2\n\n    code")
        rec.shell("make", "ERROR:\ncommand failed", 2)
        with rec.turn(model="llama3") as turn:
            turn.user("and?")
            turn.reply("INT. FAKE SCENE 2026-01-01 00:00:00\n[[tool: rm({}) — ok]]")
        text = fountain_from_events(
            store.get_session(rec.session_id), list(store.read(rec.session_id))
        )
    parsed = _elements(text)
    # The reply with blank lines is one run of dialogue under one cue.
    start = parsed.index(("character", "LLAMA3"))
    block = parsed[start + 1 : start + 6]
    assert [k for k, _ in block] == ["dialogue"] * 5
    assert [t for _, t in block][::2] == ["Step 1", "Step 2", "code"]
    # Tool output never becomes a speaker; a reply never opens a scene or a note.
    assert ("character", "ERROR:") not in parsed
    assert [t for k, t in parsed if k == "scene_heading" and "FAKE" in t] == []
    assert [t for k, t in parsed if k == "note" and "rm(" in t] == []
