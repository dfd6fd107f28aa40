"""Fountain session screenplays (Harvey session format v1.2): writer and reader.

The screenplay is the human-readable audit trail of a session (docs/specs.md,
The Harvey audit trail; the full format and our escaping rules are
in ``docs/fountain-format.md``)::

    Title: Harvey Session                      title page
    ...
    FADE IN:

    INT. CONTEXT RECALL 2026-06-24 10:00:01    once, before the first turn, when recalled
    [[recall: ID (SOURCE) — score 1.00]]

    INT. HARVEY AND RSDOIEL TALKING <ts>       one scene per chat turn (INT. = local)
    Harvey and RSDOIEL are in chat mode. Model: LLAMA3. Workspace: <workspace>.
    [[rag: 3 chunks from rag_store.db, top score 0.87]]
    RSDOIEL / <the user's line>
    HARVEY / Forwarding to LLAMA3.
    [[tool: read_file({"path":"harvey.go"}) — ok]]
    LLAMA3 / <the reply>

    INT. SHELL <ts>                            a shell command, its output, its exit code
    EXT. MISTRAL AND RSDOIEL <ts>              a turn that ran remotely (EXT. = remote)
    THE END.                                   only when the session closed cleanly

Every text from the log goes through :mod:`agenttrail.formats.fountain._escaping`, so nothing in a
reply, a prompt or a tool's output can open a scene, a cue, a note or a boneyard. Tool notes
carry the status only (Harvey's "status-only" principle); pairing anomalies are spelled out in
the status so that reading a file back gives the same call/result pairing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agenttrail.codec import json_line
from agenttrail.formats._common import ImportedSession
from agenttrail.formats.fountain._escaping import cue_line, dialogue_lines, escape_inline
from agenttrail.formats.fountain._reader import read_session, role_of_cue
from agenttrail.model import (
    Event,
    events,
    payload_attachments,
    prose_text,
    text_of,
    tool_status,
)
from agenttrail.model.parts import whole_messages
from agenttrail.views.order import reading_order
from agenttrail.views.pairing import Pairing, pair_tool_calls

__all__ = ["NAME", "fountain_from_events", "read", "sniff"]

NAME = "fountain"

SUFFIXES = (".spmd", ".fountain")
"""File name endings of Fountain session files (Harvey writes ``.spmd``)."""

ARGS_NOTE_CHARS = 200
"""Longest compact-JSON argument text written into a tool note; longer arguments are cut
with a visible marker and the SHA-256 of the whole (never a megabyte on one line)."""

_NOTE_ESCAPES = "—("
"""Characters escaped inside note fields: ``—`` separates fields, ``(`` opens the arguments."""


class _SessionLike(Protocol):
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


# ---------------------------------------------------------------------------------------------
# Writer


@dataclass
class _Names:
    """How the session's people appear: the agent's display name and cue, the user's cue."""

    agent: str
    agent_cue: str
    user_cue: str

    @classmethod
    def of(cls, session: _SessionLike) -> _Names:
        agent = session.agent or "Agent"
        return cls(
            agent=agent[:1].upper() + agent[1:],
            agent_cue=agent.upper(),
            user_cue=(session.user or "user").upper(),
        )


@dataclass
class _Scene:
    """Events that share one scene: a turn, a recall or a shell command."""

    kind: str  # "turn" | "recall" | "shell"
    events: list[Event] = field(default_factory=list)
    has_prompt: bool = False


def _is_prompt(event: Event) -> bool:
    p = event.payload
    return event.type == "message" and p.get("role") == "user" and event.actor == "user"


def _scenes(items: Sequence[Event]) -> tuple[list[_Scene], bool]:
    """Group a session's events into scenes: one per turn, per recall, per shell command.

    Returns the scenes and whether the session closed cleanly (a ``session_end`` event).
    """
    scenes: list[_Scene] = []
    ended = False
    current: _Scene | None = None
    for event in items:
        kind = event.type
        if kind == "session_end":
            ended = True
            continue
        if kind in ("recall", "shell"):
            current = None
            scenes.append(_Scene(kind, [event]))
            continue
        starts_turn = _is_prompt(event) or kind == "rag"
        if current is None or current.kind != "turn" or (starts_turn and current.has_prompt):
            current = _Scene("turn")
            scenes.append(current)
        current.events.append(event)
        current.has_prompt = current.has_prompt or _is_prompt(event)
    return scenes, ended


class _Script:
    """The lines of a Fountain file, one writer per element (Harvey's ``recorder.go`` shape)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

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
    ) -> None:
        body = dialogue_lines(text, mention=mention, agent=agent)
        self.lines += ["", cue_line(cue), *(f"({p})" for p in parentheticals), *body]

    def raw_dialogue(self, cue: str, line: str) -> None:
        """A dialogue block whose one line is structure we wrote (``! cmd``, forwarding)."""
        self.lines += ["", cue_line(cue), line]

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _clock(created_at: str) -> str:
    return created_at[:19].replace("T", " ")


def _title_page(session: _SessionLike, names: _Names) -> list[tuple[str, str]]:
    # The session's own start only: a source without a date has none, and its events carry the
    # time they were imported, which is no date of the session's.
    started = session.started
    pairs = [
        ("Title", session.title or "Untitled session"),
        ("Credit", str(session.metadata.get("credit") or f"Recorded by {names.agent}")),
        ("Author", names.user_cue),
    ]
    if started:
        pairs += [("Date", _clock(started)), ("Draft date", started[:10])]
    extra = session.metadata.get("title_page")
    if isinstance(extra, dict):
        pairs += [(str(k), str(v)) for k, v in extra.items()]
    return pairs


def fountain_from_events(session: _SessionLike, items: Sequence[Event]) -> str:
    """Render a session as a Fountain screenplay (Harvey session format v1.2).

    Args:
        session: the session row (title, agent, user, workspace, started, metadata).
        items: the session's events in seq order (read through
            :func:`agenttrail.model.parts.whole_messages`).

    Returns:
        The whole file as text, ending with a newline.

    Example::

        INT. HARVEY AND RSDOIEL TALKING 2026-06-24 10:02:30

        Harvey and RSDOIEL are in chat mode. Model: LLAMA3. Workspace: <workspace>.

        RSDOIEL
        Does harvey.go compile cleanly?

        HARVEY
        Forwarding to LLAMA3.

        [[tool: read_file({"path":"harvey.go"}) — ok]]
        [[tool: run_shell({"cmd":"go build ./..."}) — error: exit 1]]

        LLAMA3
        There is a compilation error. Line 42 references an undefined variable.
    """
    items = whole_messages(items)  # an API message stored in growing parts is one speech
    names = _Names.of(session)
    pairing = pair_tool_calls(items)
    scenes, ended = _scenes(items)
    script = _Script()
    script.title_page(_title_page(session, names))
    script.transition("FADE IN:")
    for scene in scenes:
        if scene.kind == "recall":
            _write_recall(script, scene.events[0])
        elif scene.kind == "shell":
            _write_shell(script, scene.events[0], names)
        else:
            _write_turn(script, scene, names, session.workspace, pairing)
    if ended:
        script.transition("THE END.", gap=2)
    return script.text()


def _score(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) and not isinstance(value, bool) else "?"


def _field(value: Any) -> str:
    return escape_inline(str(value), also=_NOTE_ESCAPES)


def _write_recall(script: _Script, event: Event) -> None:
    script.scene_heading(f"INT. CONTEXT RECALL {_clock(event.created_at)}")
    results = event.payload.get("results")
    script.notes(
        [
            f"recall: {_field(r.get('id'))} ({_field(r.get('source'))})"
            f" — score {_score(r.get('score'))}"
            for r in (results if isinstance(results, list) else [])
            if isinstance(r, dict)
        ]
    )


def _write_shell(script: _Script, event: Event, names: _Names) -> None:
    p = event.payload
    command = str(p.get("command", ""))
    script.scene_heading(f"INT. SHELL {_clock(event.created_at)}")
    script.raw_dialogue(names.user_cue, "! " + escape_inline(command))
    output = p.get("output")
    if isinstance(output, str) and output != "":
        script.dialogue("SHELL", output)
    exit_code = p.get("exit_code")
    script.notes([f"shell: {_field(command)} — exit {exit_code if exit_code is not None else '?'}"])


def _turn_model(scene: _Scene) -> tuple[str | None, str]:
    """The model cue of a turn and where it ran (``local`` or ``remote``)."""
    model, location = None, "local"
    for event in scene.events:
        meta = event.payload.get("meta")
        if event.type != "message" or not isinstance(meta, dict):
            continue
        if meta.get("location") == "remote":
            location = "remote"
        if model is None and isinstance(meta.get("model"), str) and meta["model"]:
            model = meta["model"].upper()
    for event in scene.events:
        if model is None and event.type == "message" and event.payload.get("role") == "assistant":
            model = _character(event.payload)
    return model, location


def _character(payload: dict[str, Any]) -> str | None:
    name = payload.get("character")
    if isinstance(name, str) and name:
        return name
    meta = payload.get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("model"), str) and meta["model"]:
        return str(meta["model"]).upper()
    return None


def _write_turn(
    script: _Script, scene: _Scene, names: _Names, workspace: str | None, pairing: Pairing
) -> None:
    model, location = _turn_model(scene)
    stamp = _clock(scene.events[0].created_at)
    # Names are escaped like any text; a dot inside the model name is escaped in the action
    # line, where a dot ends the field.
    agent, user = escape_inline(names.agent), cue_line(names.user_cue)
    where = f" Workspace: {escape_inline(workspace)}." if workspace else ""
    if location == "remote" and model:
        script.scene_heading(f"EXT. {escape_inline(model)} AND {user} {stamp}")
        script.action(f"{agent} routing to {escape_inline(model)} (cloud API).{where}")
    else:
        script.scene_heading(f"INT. {cue_line(names.agent_cue)} AND {user} TALKING {stamp}")
        with_model = f" Model: {escape_inline(model)}." if model else ""
        script.action(f"{agent} and {user} are in chat mode.{with_model}{where}")
    notes: list[str] = []
    forwarded = False
    for shown in reading_order(scene.events):
        event = shown.event
        if event.type == "tool_result" and event.seq in pairing.call_of:
            continue  # its status is on its call's note
        note = _note(event, pairing)
        if note is not None:
            notes.append(note)
            shown_result = pairing.result_of.get(event.seq) if event.type == "tool_call" else event
            if shown_result is not None:
                notes.extend(_attachment_notes(shown_result.payload))
            continue
        if notes:
            script.notes(notes)
            notes = []
        cue, parens = _voice(event.payload, names, model)
        mention = model if location == "remote" and _is_prompt(event) else None
        said = prose_text(event.payload.get("content"))
        if shown.run is not None:  # one run of a message whose text and calls interleave
            said = text_of(shown.run.blocks) or ""
            if not shown.first and not said.strip():
                continue
        agent_speaks = cue == names.agent_cue
        script.dialogue(cue, said, parentheticals=parens, mention=mention, agent=agent_speaks)
        attached = {**event.payload, "blocks": shown.run.blocks} if shown.run else event.payload
        if named := _attachment_notes(attached):
            script.notes(named)  # right under the dialogue they belong to
        if _is_prompt(event) and not forwarded and model and model != names.agent_cue:
            script.raw_dialogue(names.agent_cue, f"Forwarding to {escape_inline(model)}.")
            forwarded = True
    if notes:
        script.notes(notes)


def _voice(payload: dict[str, Any], names: _Names, model: str | None) -> tuple[str, list[str]]:
    """The cue a message is spoken under, and parentheticals for what the cue does not say."""
    role = payload.get("role")
    if role == "user":
        cue = names.user_cue
    elif role == "assistant":
        cue = _character(payload) or model or names.agent_cue
    else:
        cue = str(role or "message").upper()
    parens = []
    if role_of_cue(cue, names.user_cue) != role:
        parens.append(f"role: {_field(role)}")
    actor = payload.get("actor")
    if isinstance(actor, str) and actor != events.event_actor({**payload, "actor": None}):
        parens.append(f"actor: {_field(actor)}")
    return cue, parens


def _note(event: Event, pairing: Pairing) -> str | None:
    """The note for a rag, tool, error or other non-dialogue event; ``None`` for dialogue."""
    p = event.payload
    kind = event.type
    if kind == "message":
        return None
    if kind == "rag":
        return (
            f"rag: {_field(p.get('chunks'))} chunks from {_field(p.get('store'))}, "
            f"top score {_score(p.get('top_score'))}"
        )
    if kind == "tool_call":
        who = p.get("character")
        prefix = f"{_field(who)}." if isinstance(who, str) and who else ""
        call = f"{_field(p.get('name', ''))}({_args(p.get('input'))})"
        return f"{prefix}tool: {call} — {_call_status(event, pairing)}"
    if kind == "tool_result":
        call_id = p.get("toolCallId")
        return f"tool result: {_field(json.dumps(call_id))} — {_field(tool_status(p))}"
    if kind == "error":
        return f"error: {_field(p.get('message', ''))}"
    if kind == "annotation":
        text = p.get("text")
        body = text if isinstance(text, str) else json_line(p.get("data"))
        return f"{_field(p.get('kind', 'note'))}: {_field(_cut(body, ARGS_NOTE_CHARS))}"
    rest = json_line({k: v for k, v in p.items() if k != "type"})
    return f"event {_field(kind or 'untyped')}: {_field(_cut(rest, ARGS_NOTE_CHARS))}"


def _attachment_notes(payload: dict[str, Any]) -> list[str]:
    """``attachment: image/png, 12,345 bytes, sha256 ab12cd34`` for each attachment of a
    message or tool result (:func:`agenttrail.model.payload_attachments`): named, never its
    bytes (docs/fountain-format.md)."""
    return [f"attachment: {_field(a.label())}" for a in payload_attachments(payload)]


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{text[:limit]}…(cut: {len(text)} chars, sha256 {digest})"


def _args(value: Any) -> str:
    return _field(_cut(value if isinstance(value, str) else json_line(value), ARGS_NOTE_CHARS))


def _call_status(event: Event, pairing: Pairing) -> str:
    result = pairing.result_of.get(event.seq)
    if result is not None:
        return _field(tool_status(result.payload))
    anomaly = pairing.anomalies.get(event.seq)
    call_id = json.dumps(event.payload.get("id"))
    if anomaly is None or anomaly.kind == "no_result":
        return "no result"
    if anomaly.kind == "missing_id":
        return "no call id"
    if anomaly.kind == "duplicate_id":
        return f"ambiguous id {_field(call_id)}"
    return f"several results for id {_field(call_id)}"


# ---------------------------------------------------------------------------------------------
# Reader


def sniff(path: Path, data: bytes) -> bool:
    """True for a Fountain session: a title page, then ``FADE IN:`` or a scene heading."""
    head = data[:65536].lstrip()
    if not head.startswith(b"Title:"):
        return path.suffix.lower() in SUFFIXES and bool(head)
    return b"\nFADE IN:" in head or b"\nINT. " in head or b"\nEXT. " in head


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read a Fountain session file (ours or Harvey's, older ones included) into one session.

    Raises:
        FormatError: not UTF-8, no title page, or a note cut off; names the line.
    """
    return [read_session(path, data)]
