"""The elements of a Fountain session file and how events become them: the script being
written, the people's names, cues, and the notes of tool calls, RAG, recall, shell and errors
(rules in ``docs/fountain-format.md``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agenttrail.codec import json_line
from agenttrail.formats.fountain._escaping import (
    cue_line,
    dialogue_lines,
    escape_inline,
    escape_note,
    text_from_dialogue,
)
from agenttrail.formats.fountain._reader import FLOATING_TIMES, TIMES_KEY, role_of_cue
from agenttrail.model import Event, context_text, events, payload_attachments, tool_status
from agenttrail.model.reading import ERASED
from agenttrail.views.pairing import Pairing, erased_lines
from agenttrail.views.units import size_text

__all__ = [
    "ARGS_NOTE_CHARS",
    "FLOATING_TIMES",
    "TIMES_KEY",
    "Names",
    "Script",
    "SessionLike",
    "attachment_notes",
    "character_of",
    "clock",
    "note_field",
    "note_of",
    "recall_notes",
    "voice",
    "write_recall",
    "write_shell",
]

ARGS_NOTE_CHARS = 200
"""Longest compact-JSON argument text written into a tool note; longer arguments are cut
with a visible marker and the SHA-256 of the whole (never a megabyte on one line)."""


class SessionLike(Protocol):
    """What the writer needs of a session (a stored ``Session`` or an imported ``NewSession``)."""

    @property
    def title(self) -> str | None: ...
    @property
    def agent(self) -> str | None: ...
    @property
    def user(self) -> str | None: ...
    @property
    def workspace(self) -> str | None: ...
    @property
    def started(self) -> str | None: ...
    @property
    def metadata(self) -> dict[str, Any]: ...


@dataclass
class Names:
    """How the session's people appear: the agent's display name and cue, the user's cue."""

    agent: str
    agent_cue: str
    user_cue: str

    @classmethod
    def of(cls, session: SessionLike) -> Names:
        agent = session.agent or "Agent"
        return cls(
            agent=agent[:1].upper() + agent[1:],
            agent_cue=agent.upper(),
            user_cue=(session.user or "user").upper(),
        )


class Script:
    """The lines of a Fountain file, one writer per element (Harvey's ``recorder.go`` shape)."""

    def __init__(self, *, zoned: bool = True) -> None:
        self.lines: list[str] = []
        self.zoned = zoned
        """Whether times state their zone (:func:`clock`)."""

    def title_page(self, pairs: list[tuple[str, str]]) -> None:
        self.lines += [f"{key}: {escape_inline(value)}" for key, value in pairs]

    def transition(self, text: str, *, gap: int = 1) -> None:
        self.lines += [""] * gap + [text]

    def scene_heading(self, text: str) -> None:
        self.lines += ["", "", text]

    def action(self, text: str) -> None:
        """An action line built from escaped parts."""
        self.lines += ["", text]

    def notes(self, notes: list[str]) -> None:
        self.lines += [""] + [f"[[{note}]]" for note in notes]

    def dialogue(
        self,
        cue: str,
        text: str,
        *,
        parentheticals: Sequence[str] = (),
        mention: str | None = None,
        agent: bool = False,
        as_written: list[str] | None = None,
    ) -> None:
        """A cue, its parentheticals and the lines of ``text``; ``as_written``: the lines the
        text was read from, used as they are when they read back as ``text``."""
        body = dialogue_lines(text, mention=mention, agent=agent)
        if (
            as_written
            and as_written != body
            and text_from_dialogue(as_written, agent=agent) == text
        ):
            body = as_written
        self.lines += ["", cue_line(cue), *(f"({p})" for p in parentheticals), *body]

    def raw_dialogue(self, cue: str, line: str) -> None:
        """A dialogue block whose one line is structure we wrote (``! cmd``, forwarding)."""
        self.lines += ["", cue_line(cue), line]

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def clock(created_at: str, *, zoned: bool = True) -> str:
    """A log timestamp (RFC 3339, UTC) as a heading or title-page time: ``2026-06-24 10:02:30
    UTC``, or without the zone for a session whose times float."""
    return created_at[:19].replace("T", " ") + (" UTC" if zoned else "")


def _score(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) and not isinstance(value, bool) else "?"


def note_field(value: Any) -> str:
    return escape_note(str(value), field=True)


def write_recall(script: Script, event: Event) -> None:
    script.scene_heading(f"INT. CONTEXT RECALL {clock(event.created_at, zoned=script.zoned)}")
    script.notes(recall_notes(event))


def recall_notes(event: Event) -> list[str]:
    """``recall: ID (SOURCE) — score 0.87`` for each result of a ``recall`` event."""
    results = event.payload.get("results")
    return [
        f"recall: {note_field(r.get('id'))} ({note_field(r.get('source'))})"
        f" — score {_score(r.get('score'))}"
        for r in (results if isinstance(results, list) else [])
        if isinstance(r, dict)
    ]


def write_shell(script: Script, event: Event, names: Names, *, heading: bool = True) -> None:
    """A shell scene: the user's ``! command``, its output under ``SHELL``, its exit code."""
    p = event.payload
    command = str(p.get("command", ""))
    if heading:
        script.scene_heading(f"INT. SHELL {clock(event.created_at, zoned=script.zoned)}")
    # "!" makes the line an action to every reader, so only what ends a line is escaped.
    script.raw_dialogue(names.user_cue, "! " + escape_note(command))
    output = p.get("output")
    if isinstance(output, str) and output != "":
        script.dialogue("SHELL", output)
    code = p.get("exit_code")
    script.notes([f"shell: {note_field(command)} — exit {code if code is not None else '?'}"])


def character_of(payload: dict[str, Any]) -> str | None:
    name = payload.get("character")
    if isinstance(name, str) and name:
        return name
    meta = payload.get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("model"), str) and meta["model"]:
        return str(meta["model"]).upper()
    return None


def voice(
    payload: dict[str, Any], names: Names, model: str | None, *, cue: str | None = None
) -> tuple[str, list[str]]:
    """The cue a message is spoken under (``cue`` when given), and parentheticals for what the
    cue does not say."""
    role = payload.get("role")
    if cue is None and role == "user":
        cue = names.user_cue
    elif cue is None and role == "assistant":
        cue = character_of(payload) or model or names.agent_cue
    elif cue is None:
        cue = str(role or "message").upper()
    parens = []
    if role_of_cue(cue, names.user_cue) != role:
        parens.append(f"role: {note_field(role)}")
    actor = payload.get("actor")
    if isinstance(actor, str) and actor != events.event_actor({**payload, "actor": None}):
        parens.append(f"actor: {note_field(actor)}")
    return cue, parens


def note_of(event: Event, pairing: Pairing, *, whole: bool = False) -> str | None:
    """The note for a rag, tool, error or other non-dialogue event; ``None`` for dialogue.

    ``whole``: an annotation read from a Fountain file is written whole, as it was read;
    a runtime annotation is cut at :data:`ARGS_NOTE_CHARS`.
    """
    p = event.payload
    kind = event.type
    if kind == "message":
        return None
    if kind == "rag":
        return (
            f"rag: {note_field(p.get('chunks'))} chunks from {note_field(p.get('store'))}, "
            f"top score {_score(p.get('top_score'))}"
        )
    if kind == "tool_call":
        who = p.get("character")
        prefix = f"{note_field(who)}." if isinstance(who, str) and who else ""
        call = f"{note_field(p.get('name', ''))}({_args(p.get('input'))})"
        return f"{prefix}tool: {call} — {_call_status(event, pairing)}"
    if kind == "tool_result":
        call_id = p.get("toolCallId")
        return f"tool result: {note_field(json.dumps(call_id))} — {note_field(tool_status(p))}"
    if kind == "error":
        return f"error: {note_field(p.get('message', ''))}"
    if kind == "annotation":
        return _annotation_note(p, whole=whole)
    if kind == ERASED:  # as show writes it: who erased it and why, and a call's result
        return f"erased: {note_field('; '.join(erased_lines(event, pairing)))}"
    if kind == "erasure" and (said := context_text(p)) is not None:
        return f"erasure: {note_field(said[0])}"
    rest = json_line({k: v for k, v in p.items() if k != "type"})
    return f"event {note_field(kind or 'untyped')}: {note_field(_cut(rest, ARGS_NOTE_CHARS))}"


_NOTE_KINDS_WE_READ = frozenset(("rag", "recall", "shell", "tool", "tool result", "error"))
"""Note kinds the reader turns into events of their own: an annotation of such a kind has its
fields escaped, so that it reads back as an annotation."""


def _annotation_note(p: dict[str, Any], *, whole: bool) -> str:
    text = p.get("text")
    body = text if isinstance(text, str) else json_line(p.get("data"))
    body = body if whole else _cut(body, ARGS_NOTE_CHARS)
    kind = str(p.get("kind", "note"))
    if p.get("bare"):
        return escape_note(body)  # a note that had no "kind:" of its own
    if kind in _NOTE_KINDS_WE_READ or kind.endswith(".tool"):
        return f"{note_field(kind)}: {note_field(body)}"
    return f"{escape_note(kind)}: {escape_note(body)}"


def attachment_notes(payload: dict[str, Any]) -> list[str]:
    """``attachment: image/png, 12,345 bytes, sha256 ab12cd34`` for each attachment of a
    message or tool result (:func:`agenttrail.model.payload_attachments`): named, never its
    bytes (docs/fountain-format.md)."""
    return [f"attachment: {note_field(a.label(size_text))}" for a in payload_attachments(payload)]


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{text[:limit]}…(cut: {len(text)} chars, sha256 {digest})"


def _args(value: Any) -> str:
    return note_field(_cut(value if isinstance(value, str) else json_line(value), ARGS_NOTE_CHARS))


def _call_status(event: Event, pairing: Pairing) -> str:
    result = pairing.result_of.get(event.seq)
    if result is not None and result.erased:  # kept paired by its erasure record
        return note_field(pairing.erased.get(result.seq, f"erased seq {result.seq}"))
    if result is not None:
        return note_field(tool_status(result.payload))
    anomaly = pairing.anomalies.get(event.seq)
    call_id = json.dumps(event.payload.get("id"))
    if anomaly is None or anomaly.kind == "no_result":
        return "no result"
    if anomaly.kind == "missing_id":
        return "no call id"
    if anomaly.kind == "duplicate_id":
        return f"ambiguous id {note_field(call_id)}"
    return f"several results for id {note_field(call_id)}"
