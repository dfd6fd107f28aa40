"""The provider-neutral half of replay: which events are sent, in which order, paired how.

:func:`plan` reads a session's events up to a seq and returns a :class:`Plan`: a list of items
in log order (system prompts, assistant turns with their calls, and user-side context), every
call with the one result that will be sent behind it, the promoted tool set, and notes for
everything left out. The renderers in :mod:`agenttrail.replay` turn a plan into one provider's
messages. Pairing is strictly by id, as in :mod:`agenttrail.views.pairing`; where that module marks
an ambiguity, replay has to send something valid, so it keeps the first call with an id and
the first result naming it, and notes the rest (rules in ``docs/replay.md``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Literal

from agenttrail.errors import InputError
from agenttrail.model import Actor, Event
from agenttrail.model.parts import whole_messages
from agenttrail.providers import openai

__all__ = ["AssistantTurn", "Call", "Note", "Plan", "SystemItem", "UserItem", "plan"]

UserKind = Literal["user", "runtime", "trigger", "action", "action_result"]
"""What a user-side item is: the user's own words, the runtime speaking (actor ``system``), a
trigger firing, a tool the user ran, or its result."""


@dataclass(frozen=True)
class Note:
    """One thing replay left out or filled in, so that nothing changes silently."""

    seq: int | None
    """The event concerned; ``None`` for a note about the whole replay."""
    kind: str
    """A stable code, listed in ``docs/replay.md`` (``placeholder``, ``orphan_result``, …)."""
    text: str
    """One line for a reader, without the seq."""

    def __str__(self) -> str:
        return f"seq {self.seq}: {self.text}" if self.seq is not None else self.text


@dataclass
class Call:
    """An agent's tool call that will be sent, with the result sent behind it."""

    event: Event
    """The ``tool_call`` event."""
    id: str
    """Its id, verbatim (never invented or repaired)."""
    result: Event | None = None
    """The first result naming this id, anywhere in the replayed events; ``None`` gets a
    placeholder (unless the call runs on the provider's side)."""

    @property
    def payload(self) -> dict[str, Any]:
        return self.event.payload

    @property
    def name(self) -> str:
        name = self.payload.get("name")
        return name if isinstance(name, str) else ""

    @property
    def server(self) -> bool:
        """True for a call the provider runs itself (Anthropic ``server_tool_use``)."""
        return self.payload.get("server") is True


@dataclass
class AssistantTurn:
    """One assistant message and the calls issued with it (its message may be absent when
    the log holds calls with no assistant message before them)."""

    message: Event | None
    calls: list[Call] = field(default_factory=list)


@dataclass(frozen=True)
class UserItem:
    """Something on the user's side of the conversation, at its place in the log."""

    kind: UserKind
    event: Event
    call: Event | None = None
    """For ``action_result``: the user's ``tool_call`` it answers."""


@dataclass(frozen=True)
class SystemItem:
    """A ``system`` (or ``developer``) message: a system prompt or the runtime's instruction."""

    event: Event


PlanItem = AssistantTurn | UserItem | SystemItem


@dataclass
class Plan:
    """What replay sends, provider-neutral."""

    items: list[PlanItem]
    """In log order."""
    tools: tuple[str, ...]
    """The promoted tool set: tool names in order of first use (docs/specs.md, The log)."""
    notes: list[Note]
    """What was left out while planning."""


_SYSTEM_ROLES = frozenset({"system", "developer"})
_USER, _SYSTEM, _TRIGGER = Actor.USER.value, Actor.SYSTEM.value, Actor.TRIGGER.value
"""The actors as text, looked up once (an enum member's ``value`` is a descriptor call)."""


def _id(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def _is_result(event: Event) -> bool:
    return event.type == "tool_result" or (
        event.type == "message" and event.payload.get("role") == "tool"
    )


def _result_id(event: Event) -> str | None:
    return _id(event.payload.get("toolCallId"))


def select(events: Iterable[Event], upto_seq: int | None) -> list[Event]:
    """The events with ``seq <= upto_seq`` (all when ``None``), in seq order, an API message
    stored in growing parts read once, whole (:func:`agenttrail.model.parts.whole_messages`).

    Raises:
        InputError: ``upto_seq`` is negative, or the events belong to several sessions.
    """
    if upto_seq is not None and upto_seq < 0:
        raise InputError(f"upto_seq must be 0 or more, not {upto_seq}")
    chosen = sorted(
        (e for e in events if upto_seq is None or e.seq <= upto_seq), key=attrgetter("seq")
    )
    sessions = sorted({e.session_id for e in chosen})
    if len(sessions) > 1:
        raise InputError(f"replay takes one session's events, got {len(sessions)} sessions")
    return whole_messages(chosen)


def plan(events: Iterable[Event], upto_seq: int | None = None) -> Plan:
    """Plan the replay of ``events`` up to ``upto_seq`` (rules in the module docstring).

    Raises:
        InputError: as :func:`select`.
    """
    chosen = select(events, upto_seq)
    calls = [event for event in chosen if event.type == "tool_call"]
    results = [event for event in chosen if _is_result(event)]
    notes: list[Note] = []
    tools: dict[str, None] = {}
    agent_calls: dict[str, Call] = {}
    user_calls: dict[str, Event] = {}
    dropped_calls: set[int] = set()
    for event in calls:
        payload = event.payload
        name = payload.get("name")
        if isinstance(name, str) and name:
            tools.setdefault(name)
        call_id = _id(payload.get("id"))
        if event.actor == _USER:
            if call_id is not None:
                user_calls.setdefault(call_id, event)
            continue
        if call_id is None:
            dropped_calls.add(event.seq)
            notes.append(
                Note(event.seq, "missing_id", f"call {name!r} has no id: not sent, nor results")
            )
        elif call_id in agent_calls:
            dropped_calls.add(event.seq)
            first = agent_calls[call_id].event.seq
            notes.append(
                Note(
                    event.seq,
                    "duplicate_call",
                    f"call id {call_id!r} was already used by seq {first}: this call is not "
                    "sent (providers need unique ids)",
                )
            )
        else:
            agent_calls[call_id] = Call(event, call_id)
            if payload.get("pairedBy") == openai.LEGACY_PAIRING:
                notes.append(
                    Note(
                        event.seq,
                        "legacy_call",
                        f"call {name!r} was a legacy function_call with no id: sent as a tool "
                        f"call with the synthetic id {call_id!r} the importer gave it",
                    )
                )

    agent_results: dict[int, Call] = {}
    action_results: dict[int, Event] = {}
    for event in results:
        result_id = _result_id(event)
        by_user = event.actor == _USER
        if result_id is None:
            notes.append(Note(event.seq, "missing_id", "result with no call id: not sent"))
        elif result_id in agent_calls and not (by_user and result_id in user_calls):
            call = agent_calls[result_id]
            if call.result is None:
                call.result = event
                agent_results[event.seq] = call
            else:
                notes.append(
                    Note(
                        event.seq,
                        "duplicate_result",
                        f"another result for call {result_id!r} was already sent "
                        f"(seq {call.result.seq}): not sent",
                    )
                )
        elif result_id in user_calls:
            action_results[event.seq] = user_calls[result_id]
        else:
            notes.append(
                Note(
                    event.seq,
                    "orphan_result",
                    f"result for {result_id!r}, which matches no call: not sent",
                )
            )

    items: list[PlanItem] = []
    skipped: Counter[str] = Counter()
    open_turn: AssistantTurn | None = None
    failures: list[int] = []  # seqs of the errors logged since the last item was planned
    planned = 0
    for event in chosen:
        if len(items) != planned:
            planned, failures = len(items), []
        kind = event.type
        payload = event.payload
        role = payload.get("role") if kind == "message" else None
        if kind == "tool_call":
            if event.actor == _USER:
                items.append(UserItem("action", event))
                open_turn = None
            elif event.seq not in dropped_calls:
                call = agent_calls[payload["id"]]
                if open_turn is None:
                    open_turn = AssistantTurn(None)
                    items.append(open_turn)
                open_turn.calls.append(call)
        elif kind == "tool_result" or role == "tool":  # _is_result, role already read
            if event.seq in action_results:
                items.append(UserItem("action_result", event, action_results[event.seq]))
                open_turn = None
            elif event.seq in agent_results and not agent_results[event.seq].server:
                # sent behind its call; a later call starts a new turn (a server tool's result
                # is part of the assistant's own message, so the turn goes on)
                open_turn = None
        elif kind == "message" and role in _SYSTEM_ROLES:
            items.append(SystemItem(event))
            open_turn = None
        elif kind == "message" and role == "assistant":
            open_turn = AssistantTurn(event)
            items.append(open_turn)
        elif kind == "message" and role == "user":
            actor = event.actor
            user_kind: UserKind = (
                "runtime" if actor == _SYSTEM else "trigger" if actor == _TRIGGER else "user"
            )
            retried = _retried(items, user_kind, event) if failures else None
            if retried is not None:
                notes.append(_retry_note(event, retried, failures))
            else:
                items.append(UserItem(user_kind, event))
            open_turn = None
        elif kind == "message":
            notes.append(Note(event.seq, "unknown_role", f"message with role {role!r}: not sent"))
        else:
            skipped[str(kind)] += 1
            if kind == "error":
                failures.append(event.seq)
    if skipped:
        listed = ", ".join(f"{n} {k}" for k, n in sorted(skipped.items()))
        notes.append(
            Note(None, "not_sent", f"events that are not model messages, not sent: {listed}")
        )
    return Plan(items, tuple(tools), notes)


def _retried(items: list[PlanItem], kind: UserKind, event: Event) -> Event | None:
    """The user message ``event`` repeats, when the client sent it again after failures.

    That is: ``event`` is the user's own message, the item planned last is the user's own
    message with the same text and blocks, and only failures (``error`` events, which are
    not sent) were logged between the two. The log keeps every attempt; replay sends one.
    """
    last = items[-1] if items else None
    if kind != "user" or not isinstance(last, UserItem) or last.kind != "user":
        return None
    before, now = last.event.payload, event.payload
    if (before.get("content"), before.get("blocks")) != (now.get("content"), now.get("blocks")):
        return None
    return last.event


def _retry_note(event: Event, first: Event, failures: list[int]) -> Note:
    seqs = ", ".join(str(seq) for seq in failures)
    failed = "the failure at seq" if len(failures) == 1 else "the failures at seqs"
    return Note(
        event.seq,
        "retried_user",
        f"the user message of seq {first.seq} sent again after {failed} {seqs}: one turn, "
        "sent once",
    )
