"""Pair each tool call with its tool result, strictly by call id, and name what does not pair.

The transcript shows a ``tool_call`` and its ``tool_result`` as one row (seed ``the-log.txt``:
"The transcript UI pairs each tool_call with its tool_result into one row"). Pairing is a view
computed at read time over a whole session; the log itself is never changed.

Rules: a result pairs with the one call whose ``id`` equals its ``toolCallId``, wherever the
two sit in the session (parallel calls, results out of order, unrelated events between). Never
by position, never by tool name. What cannot be paired is kept and marked:

    missing_id      a call with no or an empty id, or a result with no or an empty toolCallId
    duplicate_id    two or more calls share an id: every one of them and every result naming
                    that id is ambiguous and stays unpaired
    orphan_result   a result whose id matches no call
    duplicate_result  two or more results name one call: the call and its results stay
                    unpaired
    no_result       a call with a unique id and no result (still running, or never recorded)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from agenttrail.events import Event

__all__ = ["ANOMALY_TEXT", "Anomaly", "Pairing", "pair_tool_calls"]

ANOMALY_TEXT = {
    "missing_id": "no call id: cannot be paired",
    "duplicate_id": "call id used by more than one call: ambiguous",
    "orphan_result": "result with no call",
    "duplicate_result": "more than one result for this call: ambiguous",
    "no_result": "call with no result",
}
"""One-line reader-facing text for each anomaly kind."""


@dataclass(frozen=True)
class Anomaly:
    """One event that could not be paired."""

    seq: int
    """The event's seq."""
    kind: str
    """A key of :data:`ANOMALY_TEXT`."""
    call_id: str | None
    """The id involved, if any."""

    def __str__(self) -> str:
        suffix = f" ({self.call_id!r})" if self.call_id else ""
        return f"seq {self.seq}: {ANOMALY_TEXT[self.kind]}{suffix}"


@dataclass(frozen=True)
class Pairing:
    """Tool calls and results of a session, paired."""

    result_of: dict[int, Event] = field(default_factory=dict)
    """Call seq → its one result event."""
    call_of: dict[int, Event] = field(default_factory=dict)
    """Result seq → its one call event."""
    anomalies: dict[int, Anomaly] = field(default_factory=dict)
    """Event seq → what is wrong with it."""


def _call_id(value: object) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def pair_tool_calls(events: Iterable[Event]) -> Pairing:
    """Pair ``tool_call`` and ``tool_result`` events by id (rules in the module docstring).

    Args:
        events: a session's events, any order (seq decides).

    Returns:
        The :class:`Pairing`; events of other types are ignored.
    """
    calls: dict[str, list[Event]] = defaultdict(list)
    results: dict[str, list[Event]] = defaultdict(list)
    pairing = Pairing()
    for event in events:
        kind = event.type
        if kind == "tool_call":
            call_id = _call_id(event.payload.get("id"))
            if call_id is None:
                pairing.anomalies[event.seq] = Anomaly(event.seq, "missing_id", None)
            else:
                calls[call_id].append(event)
        elif kind == "tool_result":
            call_id = _call_id(event.payload.get("toolCallId"))
            if call_id is None:
                pairing.anomalies[event.seq] = Anomaly(event.seq, "missing_id", None)
            else:
                results[call_id].append(event)
    for call_id, group in calls.items():
        answers = results.get(call_id, [])
        if len(group) > 1:
            for event in group + answers:
                pairing.anomalies[event.seq] = Anomaly(event.seq, "duplicate_id", call_id)
        elif len(answers) > 1:
            for event in group + answers:
                pairing.anomalies[event.seq] = Anomaly(event.seq, "duplicate_result", call_id)
        elif answers:
            pairing.result_of[group[0].seq] = answers[0]
            pairing.call_of[answers[0].seq] = group[0]
        else:
            pairing.anomalies[group[0].seq] = Anomaly(group[0].seq, "no_result", call_id)
    for call_id, answers in results.items():
        if call_id not in calls:
            for event in answers:
                pairing.anomalies[event.seq] = Anomaly(event.seq, "orphan_result", call_id)
    return pairing
