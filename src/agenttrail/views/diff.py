"""Where two sessions part: both read as steps (a message, a tool call, a tool result),
aligned turn by turn and call by call, and the first step where they differ, with what
changed (``agenttrail diff A B``).

Each session is read as every view reads it (:func:`agenttrail.model.parts.whole_messages`);
runtime notes (``annotation``) and the session's end are left out, as they say nothing about
what the agent did. A step's signature is what it says, not where or when: a message's role,
text and model, a call's tool name and arguments, a result's output and status; ids, times,
sources and usage are not compared, so two runs of one task align where they did the same
thing. The alignment is :class:`difflib.SequenceMatcher` over the signatures (junk heuristic
off), the standard library's longest-matching-blocks diff.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agenttrail.codec import indented_json, json_line
from agenttrail.model import Event, message_text, output_text, tool_status, usage_of
from agenttrail.model.parts import whole_messages
from agenttrail.views.safe import safe

__all__ = [
    "CHANGE_TEXT_CHARS",
    "STEP_TEXT_CHARS",
    "Block",
    "Change",
    "Divergence",
    "SessionDiff",
    "Step",
    "diff_sessions",
    "steps_of",
]

SKIPPED = frozenset({"annotation", "session_end"})
"""Event types that are not steps: runtime notes and the end of a session."""

CHANGE_TEXT_CHARS = 2000
"""Characters of each side of a changed field in the compare view: a tool's whole output can
be megabytes; the start shows what changed, ``agenttrail diff --json`` gives all of it."""

STEP_TEXT_CHARS = 300
"""Characters of a step's text in the alignment the compare view shows: a line or two, enough
to recognise the step; the session itself holds the rest."""

_NOT_COMPARED = frozenset({"meta", "source", "id", "toolCallId", "messageId", "requestId"})
"""Keys of an other payload left out of its signature: ids, sources and meta differ between
two runs that did the same thing."""


@dataclass(frozen=True)
class Step:
    """One step of a session: what it did, at which seq and turn."""

    seq: int
    turn: int
    """1 for the steps up to the second user message, and so on; 0 before the first."""
    kind: str
    """The event type: ``message``, ``tool_call``, ``tool_result``, ``error``, ..."""
    fields: dict[str, Any]
    """What is compared (``role``, ``text``, ``model``, ``name``, ``input``, ``output``,
    ``status``, or ``payload`` for other types), and ``usage``, shown but not compared."""

    def signature(self) -> str:
        """The fields that must be equal for two steps to align, as canonical JSON."""
        return json_line(
            {"kind": self.kind, **{k: v for k, v in self.fields.items() if k != "usage"}}
        )

    def label(self) -> str:
        """``assistant message``, ``tool call Bash``, ``tool result Bash``, ``error``."""
        if self.kind == "message":
            return f"{self.fields.get('role')} message"
        name = self.fields.get("name")
        return f"{self.kind.replace('_', ' ')} {name}" if name else self.kind.replace("_", " ")

    def text(self) -> str:
        """What the step says, as one text to show: a message's text, a call's input and a
        result's output (as compact JSON when not text), an other event's payload."""
        value = next(
            (self.fields[k] for k in ("text", "input", "output", "payload") if k in self.fields),
            None,
        )
        return value if isinstance(value, str) else json_line(value)

    def record(self) -> dict[str, Any]:
        """JSON form for the compare view: ``{seq, turn, step, text, text_chars}``, the text
        made safe to show (:func:`agenttrail.views.safe.safe`) and clipped to
        :data:`STEP_TEXT_CHARS` (``text_chars`` is its whole length)."""
        text = safe(self.text())
        return {
            "seq": self.seq,
            "turn": self.turn,
            "step": safe(self.label()),
            "text": text[:STEP_TEXT_CHARS],
            "text_chars": len(text),
        }


def steps_of(events: Iterable[Event]) -> list[Step]:
    """A session's events (seq order) as steps."""
    steps: list[Step] = []
    names: dict[str, str] = {}  # tool call id -> name, to name a result's tool
    turn = 0
    for event in whole_messages(events):
        payload = event.payload
        kind = event.type or "(untyped)"
        if kind in SKIPPED:
            continue
        fields: dict[str, Any]
        if kind == "message":
            if event.actor == "user":
                turn += 1
            meta = payload.get("meta")
            model = meta.get("model") if isinstance(meta, dict) else None
            fields = {"role": payload.get("role"), "text": message_text(payload), "model": model}
            fields["usage"] = usage_of(meta)
        elif kind == "tool_call":
            called = str(payload.get("name"))
            if isinstance(payload.get("id"), str):
                names[payload["id"]] = called
            fields = {"name": called, "input": payload.get("input")}
        elif kind == "tool_result":
            call = payload.get("toolCallId")
            name = payload.get("name") or (names.get(call) if isinstance(call, str) else None)
            status = tool_status(payload)
            fields = {"name": name, "output": output_text(payload), "status": str(status)}
        else:
            fields = {"payload": {k: v for k, v in payload.items() if k not in _NOT_COMPARED}}
        steps.append(Step(event.seq, turn, kind, fields))
    return steps


@dataclass(frozen=True)
class Change:
    """One field that differs between two aligned steps."""

    field: str
    a: Any
    b: Any


@dataclass(frozen=True)
class Block:
    """One block of the alignment: steps both sessions have alike, or a divergence."""

    tag: str
    """``same``, ``changed``, ``only_a`` or ``only_b``."""
    a: list[Step]
    """A's steps of this block (empty for ``only_b``)."""
    b: list[Step]
    """B's steps of this block (empty for ``only_a``)."""
    changes: list[Change] = field(default_factory=list)
    """For ``changed``: the fields of the first step of each that differ."""

    def view(self) -> dict[str, Any]:
        """JSON form for the compare view: ``{tag, a: [step], b: [step], changes: [{field,
        a, b}]}``, each step as :meth:`Step.record`, each changed value as text to show (a
        string as it is, anything else as indented JSON), made safe
        (:func:`agenttrail.views.safe.safe`) and clipped to :data:`CHANGE_TEXT_CHARS`."""
        return {
            "tag": self.tag,
            "a": [s.record() for s in self.a],
            "b": [s.record() for s in self.b],
            "changes": [
                {"field": c.field, "a": _shown(c.a), "b": _shown(c.b)} for c in self.changes
            ],
        }


@dataclass(frozen=True)
class Divergence(Block):
    """A place where the sessions differ: a step of each changed, or a step only one has."""

    def record(self) -> dict[str, Any]:
        """JSON form: ``{tag, a: {seqs, turn, step}, b: ..., changes: [{field, a, b}]}``."""

        def side(steps: list[Step]) -> dict[str, Any] | None:
            if not steps:
                return None
            first = steps[0]
            return {
                "seqs": [s.seq for s in steps],
                "turn": first.turn,
                "step": first.label(),
            }

        return {
            "tag": self.tag,
            "a": side(self.a),
            "b": side(self.b),
            "changes": [{"field": c.field, "a": c.a, "b": c.b} for c in self.changes],
        }


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else indented_json(value, 2)
    return safe(text)[:CHANGE_TEXT_CHARS]


@dataclass(frozen=True)
class SessionDiff:
    """Two sessions aligned."""

    a: list[Step]
    b: list[Step]
    same: int
    """Steps both have alike, in order."""
    prefix: int
    """Steps alike before the first divergence (all of them when there is none)."""
    divergences: list[Divergence]
    """Every place they differ, in order; the first is where they part."""
    blocks: list[Block] = field(default_factory=list)
    """The whole alignment, in order: alike blocks and divergences (the compare view)."""

    @property
    def first(self) -> Divergence | None:
        """Where the sessions part; ``None`` when every step is alike."""
        return self.divergences[0] if self.divergences else None

    def record(self) -> dict[str, Any]:
        """JSON form (``agenttrail diff --json``): ``{identical, steps: {a, b}, same,
        prefix, first, divergences}``, each divergence as :meth:`Divergence.record`."""
        return {
            "identical": not self.divergences,
            "steps": {"a": len(self.a), "b": len(self.b)},
            "same": self.same,
            "prefix": self.prefix,
            "first": self.first.record() if self.first else None,
            "divergences": [d.record() for d in self.divergences],
        }


def _changes(a: Step, b: Step) -> list[Change]:
    if a.kind != b.kind:
        return [Change("kind", a.kind, b.kind)]
    keys = [*a.fields, *(k for k in b.fields if k not in a.fields)]
    return [
        Change(k, a.fields.get(k), b.fields.get(k))
        for k in keys
        if a.fields.get(k) != b.fields.get(k)
    ]


_BLOCK_TAGS = {"replace": "changed", "delete": "only_a", "insert": "only_b"}
""":meth:`difflib.SequenceMatcher.get_opcodes` tags of a divergence as :class:`Block` tags."""


def diff_sessions(a_events: Iterable[Event], b_events: Iterable[Event]) -> SessionDiff:
    """Align two sessions' events (each in seq order) and say where they differ.

    The first divergence is the first block of the alignment that is not alike; for a
    ``changed`` block its first steps are compared field by field (usage included, as
    context: two runs rarely spend the same tokens).
    """
    a, b = steps_of(a_events), steps_of(b_events)
    matcher = difflib.SequenceMatcher(
        None, [s.signature() for s in a], [s.signature() for s in b], autojunk=False
    )
    divergences: list[Divergence] = []
    blocks: list[Block] = []
    same = 0
    prefix: int | None = None
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            same += i2 - i1
            blocks.append(Block("same", a[i1:i2], b[j1:j2]))
            continue
        if prefix is None:
            prefix = same
        changes = _changes(a[i1], b[j1]) if tag == "replace" else []
        divergences.append(Divergence(_BLOCK_TAGS[tag], a[i1:i2], b[j1:j2], changes))
        blocks.append(divergences[-1])
    return SessionDiff(a, b, same, same if prefix is None else prefix, divergences, blocks)
