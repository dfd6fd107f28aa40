"""A generated large session through the commands that read a session whole (issue 19): each
fast path writes the bytes its plain rule writes, at a size where the fast paths matter.

- ``replay``: its JSON is the standard library's ``json.dumps(body, indent=2,
  ensure_ascii=False)`` of the same request body (``codec.indented_json`` indents compact
  JSON outside its strings; this is the rule it must give);
- ``fountain``: every dialogue block written by a plain reference kept here (each line
  escaped character by character by the rules of ``docs/fountain-format.md``, Escaping,
  then the per-line rules for notes, guards and blank lines applied to every line) gives
  the same file, and the file reads back to the same messages; the reference and the fast
  escaping also agree on every text of the real files in ``../shared/realdata``;
- ``export``: exported, imported into a new log and exported again, the same bytes.

``show``'s plain layout is held against Rich itself in ``tests/views/test_table.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrail.formats.fountain import _elements, _escaping
from agenttrail.log.store import open_store
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.replay import replay
from tests.conftest import REALDATA, run_cli

EVENTS = 4_000

# Text that takes every escaping path: headings, transitions, notes and boneyards, a
# centred line, CJK and Arabic, a bidi control, a caps line (a rival cue), a line past
# Fountain's line length, quotes and backslashes for JSON, backslashes that would start an
# escape or end a line, a transition.
_TEXTS = [
    "What is in {path}?",
    "INT. KITCHEN - NIGHT\nlook at [[this]] and /* that */ \\ done",
    "FADE TO:\n\n\nTHE END.",
    ">centred<\n!forced action\n@model hi",
    "北京天气 {turn} مرحبا بالعالم \u202e reversed",
    'quotes " and backslashes \\ and a tab\t in "{path}"',
    "A CAPS LINE\nthen text",
    "x" * 300 + " long line {turn}",
    "C:\\Users\\u{{41}} \\#  \nends in a backslash \\\nTO:",
    "",
]


def _payloads() -> list[NewEvent]:
    out: list[NewEvent] = []
    turn = 0
    while len(out) < EVENTS:
        path = f"/tmp/ファイル{turn}.txt"
        said = _TEXTS[turn % len(_TEXTS)].format(path=path, turn=turn)
        output = ("R" * 102_400) if turn % 100 == 99 else (f"{said}\n" + "r" * 1000)
        meta = events.meta(model="gpt-4o", provider="openai", usage=events.usage(100 + turn, 20))
        for payload in (
            events.message("user", said or f"question {turn}"),
            events.message("assistant", f"Let me look at {path}.\n{said}", meta=meta),
            events.tool_call(f"call_{turn}", "read_file", {"path": path, "note": said}),
            events.tool_result(f"call_{turn}", "read_file", output=output),
            events.message("assistant", f"{path} holds {len(output):,} characters.", meta=meta),
        ):
            k = len(out)
            stamp = f"2026-01-01T{k // 3_600_000 % 24:02d}:{k // 60_000 % 60:02d}:"
            out.append(NewEvent(payload, f"{stamp}{k // 1000 % 60:02d}.{k % 1000:03d}000Z"))
        turn += 1
    return out


@pytest.fixture(scope="module")
def large_log(tmp_path_factory: pytest.TempPathFactory) -> str:
    db = tmp_path_factory.mktemp("large") / "log.db"
    with open_store(db, create=True) as store:
        store.append_batch("big", _payloads(), create=NewSession("big", "big", "harvey", "ana"))
    return str(db)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_replay_writes_what_the_standard_library_writes(large_log: str, provider: str) -> None:
    done = run_cli("replay", "big", "--format", provider, "--db", large_log)
    assert done.returncode == 0, done.stderr
    with open_store(large_log) as store:
        body = replay(list(store.read("big")), provider).body()
    assert len(body["messages"]) > EVENTS // 2
    assert done.stdout == json.dumps(body, indent=2, ensure_ascii=False) + "\n"


# The inline escapes of docs/fountain-format.md (Escaping), one character at a time.
_BACKSLASHED = set("\\[]*/-—(")
"""What a backslash escapes, and what is escaped with one (the others as code points)."""
_CODE_POINTS = {
    *map(chr, range(0x00, 0x09)),
    *map(chr, range(0x0B, 0x20)),
    *map(chr, range(0x7F, 0xA0)),
    "\u2028",
    "\u2029",
    *map(chr, range(0xD800, 0xE000)),
    *_escaping.BIDI_CONTROLS,
}
"""Characters always written as \\u{HEX}: control characters, line breaks other than the
line feed, lone surrogates, bidi controls."""


def _blank(text: str) -> bool:
    return text == "" or text.isspace()


def _escape_char(line: str, i: int) -> str:
    char, before, after = line[i], line[:i], line[i + 1 :]
    if char == "\\":
        starts_escape = after[:1] in _BACKSLASHED | _CODE_POINTS or after.startswith("u{")
        at_end = _blank(after[1:] if after[:1] == "#" else after)  # a lone \\ continues
        return "\\\\" if starts_escape or at_end else char
    if char in _CODE_POINTS:
        return f"\\u{{{ord(char):x}}}"
    if char == "-" and before.endswith(" "):  # rsdoiel: any " -" makes a heading
        return "\\-"
    headings = (
        (char == "#" and _blank(after))  # rsdoiel: a final # makes a heading
        or (char == ":" and after == "" and before.endswith(("TO", "IN")))  # a transition
        or (char == "." and before.endswith("THE END"))  # the end of the script
    )
    return f"\\u{{{ord(char):x}}}" if headings else char


def _escape_line(line: str, *, first: bool) -> str:
    escaped = "".join(_escape_char(line, i) for i in range(len(line)))
    return _escaping._pairs(escaped, first=first)


def _reference_lines(text: str, *, agent: bool) -> list[str]:
    """A dialogue block's lines by the rules alone: every line escaped character by
    character, every line tested for a guard, no test of the whole text first."""
    if text[:1] in ("", "\n"):
        rest = text.lstrip("\n")
        count = len(text) - len(rest) + (rest == "")
        after = _reference_lines(rest, agent=agent) if rest else []
        return [_escaping.BLANK_LINES.format(count=count), *after]
    cut = len(text) > _escaping.LINE_CHARS
    lines: list[str] = []
    for index, content in enumerate(text.split("\n")):
        width = _escaping.LINE_CHARS if cut else max(len(content), 1)
        pieces = [content[i : i + width] for i in range(0, len(content), width)] or [""]
        for number, piece in enumerate(pieces):
            first = index == 0 and number == 0
            line = _escape_line(piece, first=first and not cut)
            line += "\\" if number < len(pieces) - 1 else ""
            lines.append(line and _escaping._guarded(line, first, None, agent))
    lines = _escaping._blank_lines(lines)
    rival_cue = len(lines) > 1 and _escaping._CUE_LIKE.fullmatch(lines[0].strip())
    if not cut and (rival_cue or _escaping._ONLY_HIDDEN.fullmatch(lines[0])):
        lines.insert(0, _escaping.BLANK_LINES.format(count=0))
    return lines


def _strings(value: Any) -> list[str]:
    """Every string value in a decoded JSON value (keys left out)."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        else:
            stack.extend(
                item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
            )
    return found


def _realdata_texts() -> Iterator[str]:
    """Every string of the real JSON and JSON Lines files (../shared/realdata/SOURCES.md
    names where each comes from), and the lines of the real Harvey files."""
    for path in sorted(REALDATA.rglob("*")):
        if path.suffix == ".spmd":
            yield from path.read_text(encoding="utf-8").splitlines()
        elif path.suffix in (".json", ".jsonl"):
            text = path.read_text(encoding="utf-8")
            lines = [text] if path.suffix == ".json" else text.splitlines()
            for line in lines:
                if line.strip():
                    yield from _strings(json.loads(line))


def test_fountain_escaping_of_the_real_files_texts_is_the_plain_rule() -> None:
    texts = [text for text in _realdata_texts() if len(text) <= 100_000]
    assert len(texts) > 1_000
    for text in [*texts, *(t.format(path="/tmp/x", turn=1) for t in _TEXTS)]:
        for agent in (False, True):
            expected = _reference_lines(text, agent=agent)
            assert _escaping.dialogue_lines(text, agent=agent) == expected, text


def test_fountain_writes_what_the_plain_escaping_rules_write(
    large_log: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = run_cli("fountain", "big", "--db", large_log)
    assert fast.returncode == 0, fast.stderr
    assert "北京天气" in fast.stdout and "\\u{202e}" in fast.stdout
    # every dialogue block by the reference (no mention: this session routes nothing)
    monkeypatch.setattr(
        _elements,
        "dialogue_lines",
        lambda text, *, mention=None, agent=False: _reference_lines(text, agent=agent),
    )
    plain = run_cli("fountain", "big", "--db", large_log)
    assert plain.returncode == 0, plain.stderr
    assert fast.stdout == plain.stdout
    monkeypatch.undo()
    path = tmp_path / "big.fountain"
    path.write_text(fast.stdout, encoding="utf-8")
    back = tmp_path / "back.db"
    assert run_cli("import", str(path), "--db", str(back)).returncode == 0
    with open_store(large_log) as store, open_store(back) as again:
        (session,) = again.sessions()
        said = [e.payload["content"] for e in store.read("big") if e.type == "message"]
        read = [e.payload["content"] for e in again.read(session.id) if e.type == "message"]
    assert read == said


def test_export_import_export_gives_the_same_bytes(large_log: str, tmp_path: Path) -> None:
    first = run_cli("export", "big", "--db", large_log)
    assert first.returncode == 0, first.stderr
    path = tmp_path / "big.jsonl"
    path.write_text(first.stdout, encoding="utf-8")
    again = str(tmp_path / "again.db")
    assert run_cli("import", str(path), "--db", again).returncode == 0
    second = run_cli("export", "big", "--db", again)
    assert second.stdout == first.stdout
    assert len(first.stdout.splitlines()) == EVENTS
