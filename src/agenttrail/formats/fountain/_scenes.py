"""Rendering a session that did not come from a Fountain file: one scene per turn, recall and
shell command, with the headings, action lines and routing records that the Harvey session
format gives them (docs/fountain-format.md, Elements)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agenttrail.formats.fountain._elements import (
    FLOATING_TIMES,
    TIMES_KEY,
    Names,
    Script,
    SessionLike,
    attachment_notes,
    character_of,
    clock,
    note_of,
    voice,
    write_recall,
    write_shell,
)
from agenttrail.formats.fountain._escaping import cue_line, escape_inline
from agenttrail.model import UNDATED, UNDATED_NOTE, Event, prose_text, text_of
from agenttrail.views.order import reading_order
from agenttrail.views.pairing import Pairing, pair_tool_calls

__all__ = ["render_scenes"]


@dataclass
class _Scene:
    """Events that share one scene: a turn, a recall or a shell command."""

    kind: str  # "turn" | "recall" | "shell"
    events: list[Event] = field(default_factory=list)
    has_prompt: bool = False


def _is_prompt(event: Event, kind: str | None) -> bool:
    return kind == "message" and event.payload.get("role") == "user" and event.actor == "user"


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
        prompt = _is_prompt(event, kind)
        starts_turn = prompt or kind == "rag"
        if current is None or current.kind != "turn" or (starts_turn and current.has_prompt):
            current = _Scene("turn")
            scenes.append(current)
        current.events.append(event)
        current.has_prompt = current.has_prompt or prompt
    return scenes, ended


def _title_page(session: SessionLike, names: Names) -> list[tuple[str, str]]:
    # The session's own start only: a source without a date has none, and its events carry the
    # time they were imported, which is no date of the session's.
    started = session.started
    pairs = [
        ("Title", session.title or "Untitled session"),
        ("Credit", str(session.metadata.get("credit") or f"Recorded by {names.agent}")),
        ("Author", names.user_cue),
    ]
    if started:
        zoned = not session.metadata.get(FLOATING_TIMES)
        pairs += [("Date", clock(started, zoned=zoned)), ("Draft date", started[:10])]
    if UNDATED in session.metadata:  # each heading has a time, here the import's
        pairs.append((TIMES_KEY, UNDATED_NOTE))
    extra = session.metadata.get("title_page")
    if isinstance(extra, dict):
        pairs += [(str(k), str(v)) for k, v in extra.items()]
    return pairs


DIALECTS = ("agenttrail", "harvey")
"""``agenttrail``: the session's own names, ``EXT.`` for remote turns. ``harvey``: what Harvey's
``--continue`` reads (docs/fountain-format.md, The Harvey dialect)."""


def render_scenes(session: SessionLike, items: Sequence[Event], *, dialect: str) -> str:
    """Render a session that did not come from a Fountain file (see
    :func:`agenttrail.formats.fountain.fountain_from_events`)."""
    names = Names.of(session)
    harvey = dialect == "harvey"
    if harvey:  # Harvey's reader knows its chat scenes by "HARVEY AND <USER> TALKING"
        names = Names(agent="Harvey", agent_cue="HARVEY", user_cue=names.user_cue)
    pairing = pair_tool_calls(items)
    scenes, ended = _scenes(items)
    script = Script(zoned=not session.metadata.get(FLOATING_TIMES))
    script.title_page(_title_page(session, names))
    script.transition("FADE IN:")
    for scene in scenes:
        if scene.kind == "recall":
            write_recall(script, scene.events[0])
        elif scene.kind == "shell":
            write_shell(script, scene.events[0], names)
        else:
            _write_turn(script, scene, names, session.workspace, pairing, harvey=harvey)
    if ended:
        script.transition("THE END.", gap=2)
    return script.text()


def _turn_model(scene: _Scene) -> tuple[str | None, str]:
    """The model cue of a turn and where it ran (``local`` or ``remote``)."""
    model, location = None, "local"
    spoken = [event.payload for event in scene.events if event.type == "message"]
    for p in spoken:
        meta = p.get("meta")
        if not isinstance(meta, dict):
            continue
        if meta.get("location") == "remote":
            location = "remote"
        if model is None and isinstance(meta.get("model"), str) and meta["model"]:
            model = meta["model"].upper()
    for p in spoken:
        if model is None and p.get("role") == "assistant":
            model = character_of(p)
    return model, location


def _write_turn(
    script: Script,
    scene: _Scene,
    names: Names,
    workspace: str | None,
    pairing: Pairing,
    *,
    harvey: bool,
) -> None:
    model, location = _turn_model(scene)
    stamp = clock(scene.events[0].created_at, zoned=script.zoned)
    # Names are escaped like any text; the model name is written as it is, dots included (the
    # reader ends it at " Workspace: " or at the line's last dot).
    agent, user = escape_inline(names.agent), cue_line(names.user_cue)
    where = f" Workspace: {escape_inline(workspace)}." if workspace else ""
    if location == "remote" and model:
        # Harvey's reader skips EXT scenes: its dialect says "routing to" in an INT scene.
        place = (
            f"INT. HARVEY AND {user} TALKING"
            if harvey
            else f"EXT. {escape_inline(model)} AND {user}"
        )
        script.scene_heading(f"{place} {stamp}")
        script.action(f"{agent} routing to {escape_inline(model)} (cloud API).{where}")
    else:
        script.scene_heading(f"INT. {cue_line(names.agent_cue)} AND {user} TALKING {stamp}")
        with_model = f" Model: {escape_inline(model)}." if model else ""
        script.action(f"{agent} and {user} are in chat mode.{with_model}{where}")
    notes: list[str] = []
    forwarded = False
    for shown in reading_order(scene.events):
        event = shown.event
        kind = event.type
        if event.seq in pairing.call_of:  # a result, or an erased one kept paired
            continue  # its status is on its call's note
        note = None if kind == "message" else note_of(event, pairing)
        if note is not None:
            notes.append(note)
            shown_result = pairing.result_of.get(event.seq) if kind == "tool_call" else event
            if shown_result is not None:
                notes.extend(attachment_notes(shown_result.payload))
            continue
        if notes:
            script.notes(notes)
            notes = []
        prompt = _is_prompt(event, kind)
        cue, parens = voice(
            event.payload,
            names,
            model,
            cue=_harvey_cue(event, prompt, names, model) if harvey else None,
        )
        mention = model if location == "remote" and prompt else None
        said = prose_text(event.payload.get("content"))
        if shown.run is not None:  # one run of a message whose text and calls interleave
            said = text_of(shown.run.blocks) or ""
            if not shown.first and not said.strip():
                continue
        agent_speaks = cue == names.agent_cue
        script.dialogue(cue, said, parentheticals=parens, mention=mention, agent=agent_speaks)
        attached = {**event.payload, "blocks": shown.run.blocks} if shown.run else event.payload
        if named := attachment_notes(attached):
            script.notes(named)  # right under the dialogue they belong to
        if prompt and not forwarded and model and model != names.agent_cue:
            script.raw_dialogue(names.agent_cue, f"Forwarding to {escape_inline(model)}.")
            forwarded = True
    if notes:
        script.notes(notes)


def _harvey_cue(event: Event, prompt: bool, names: Names, model: str | None) -> str | None:
    """The cue in the Harvey dialect: Harvey's reader takes a user-cue line for the user's
    turn and any cue but HARVEY's for the model's reply, so tool results, system prompts and
    other runtime messages speak as HARVEY (with their role and actor in parentheticals), and
    a reply never does."""
    role = event.payload.get("role")
    if prompt:
        return None
    if role == "assistant":
        cue = character_of(event.payload) or model
        return cue if cue and cue != names.agent_cue else "MODEL"
    return names.agent_cue
