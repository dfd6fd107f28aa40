"""A generated large session through the commands that read a session whole (issue 19): each
fast path writes the bytes its plain rule writes, at a size where the fast paths matter.

- ``replay``: its JSON is the standard library's ``json.dumps(body, indent=2,
  ensure_ascii=False)`` of the same request body (``codec.indented_json`` indents compact
  JSON outside its strings; this is the rule it must give);
- ``fountain``: every dialogue block written by the full escaping rules
  (``_escaping._flagged_lines``) instead of the one-line fast path gives the same file, and
  the file reads back to the same messages;
- ``export``: exported, imported into a new log and exported again, the same bytes.

``show``'s plain layout is held against Rich itself in ``tests/views/test_table.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenttrail.formats.fountain import _escaping
from agenttrail.log.store import open_store
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.replay import replay
from tests.conftest import run_cli

EVENTS = 4_000

# Text that takes every escaping path: headings, transitions, notes and boneyards, a
# centred line, CJK and Arabic, a bidi control, a caps line (a rival cue), a line past
# Fountain's line length, quotes and backslashes for JSON.
_TEXTS = [
    "What is in {path}?",
    "INT. KITCHEN - NIGHT\nlook at [[this]] and /* that */ \\ done",
    "FADE TO:\n\n\nTHE END.",
    ">centred<\n!forced action\n@model hi",
    "北京天气 {turn} مرحبا بالعالم \u202e reversed",
    'quotes " and backslashes \\ and a tab\t in "{path}"',
    "A CAPS LINE\nthen text",
    "x" * 300 + " long line {turn}",
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


def test_fountain_writes_what_the_full_escaping_rules_write(
    large_log: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = run_cli("fountain", "big", "--db", large_log)
    assert fast.returncode == 0, fast.stderr
    # the fast path off: every dialogue line goes through the full rules
    monkeypatch.setattr(_escaping, "_plain_line", lambda text, *, agent: False)
    full = run_cli("fountain", "big", "--db", large_log)
    assert full.returncode == 0, full.stderr
    assert fast.stdout == full.stdout
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
