"""Rendering a session read from a Fountain file back as the file was.

The reader keeps what a file says beyond its events (docs/fountain-format.md, Reading): the
title page's lines, every scene heading and action line as written (``annotation`` events of
kind ``scene`` and ``action``), each routing record ``Forwarding to X.`` (kind ``routing``),
parentheticals, and notes it does not know. This writer puts them back in their place and
writes nothing the log does not hold: no generated heading, action line or routing record.
Blank lines between elements follow our layout, not the file's.
"""

from __future__ import annotations

from collections.abc import Sequence

from agenttrail.formats.fountain._elements import (
    Names,
    Script,
    SessionLike,
    attachment_notes,
    note_of,
    recall_notes,
    voice,
    write_shell,
)
from agenttrail.model import Event, prose_text
from agenttrail.views.pairing import pair_tool_calls

__all__ = ["is_from_fountain", "render_as_read"]

TITLE_PAGE_LINES = "title_page_lines"
"""Session metadata key: the title page of the file the session was read from, line by line."""


def is_from_fountain(session: SessionLike) -> bool:
    """True for a session read from a Fountain file (its title page is kept as read)."""
    lines = session.metadata.get(TITLE_PAGE_LINES)
    return isinstance(lines, list) and all(isinstance(line, str) for line in lines)


def _routed_to(items: Sequence[Event], start: int) -> str | None:
    """The model the routing record that follows a user's line names (the same scene)."""
    for event in items[start + 1 :]:
        p = event.payload
        if event.type == "annotation" and p.get("kind") == "scene":
            return None
        if event.type == "annotation" and p.get("kind") == "routing":
            text = str(p.get("text", ""))
            return text.removeprefix("Forwarding to ").removesuffix(".")
        if event.type == "message" and p.get("role") == "user":
            return None
    return None


def render_as_read(session: SessionLike, items: Sequence[Event]) -> str:
    """Render a session read from a Fountain file (see :mod:`._verbatim`)."""
    names = Names.of(session)
    pairing = pair_tool_calls(items)
    script = Script()
    script.lines += list(session.metadata[TITLE_PAGE_LINES])
    script.transition("FADE IN:")
    notes: list[str] = []
    model: str | None = None
    for index, event in enumerate(items):
        p = event.payload
        kind = event.type
        annotation = p.get("kind") if kind == "annotation" else None
        if kind == "tool_result" and event.seq in pairing.call_of:
            continue  # its status is on its call's note
        if kind == "recall":
            notes += recall_notes(event)
            continue
        if kind in ("message", "shell", "session_end") or annotation in (
            "scene",
            "action",
            "routing",
        ):
            if notes:
                script.notes(notes)
                notes = []
        else:
            note = note_of(event, pairing, whole=True)
            if note is not None:
                notes.append(note)
                result = pairing.result_of.get(event.seq) if kind == "tool_call" else event
                if result is not None:
                    notes.extend(attachment_notes(result.payload))
            continue
        text = str(p.get("text", ""))
        if annotation == "scene":
            script.scene_heading(text)
        elif annotation == "action":
            script.action(text)
        elif annotation == "routing":
            script.raw_dialogue(str(p.get("character") or names.agent_cue), text)
            model = text.removeprefix("Forwarding to ").removesuffix(".")
        elif kind == "shell":
            write_shell(script, event, names, heading=False)
        elif kind == "session_end":
            script.transition("THE END.", gap=2)
        else:
            _message(script, items, index, names, model)
    if notes:
        script.notes(notes)
    return script.text()


def _message(
    script: Script, items: Sequence[Event], index: int, names: Names, model: str | None
) -> None:
    event = items[index]
    p = event.payload
    cue, parens = voice(p, names, model)
    others = p.get("parentheticals")
    if isinstance(others, list):
        parens = [*(str(o) for o in others), *parens]
    mention = _routed_to(items, index) if p.get("role") == "user" else None
    said = prose_text(p.get("content"))
    written = p.get("as_written")
    script.dialogue(
        cue,
        said,
        parentheticals=parens,
        mention=mention,
        agent=cue == names.agent_cue,
        as_written=[str(line) for line in written] if isinstance(written, list) else None,
    )
    if named := attachment_notes(p):
        script.notes(named)
