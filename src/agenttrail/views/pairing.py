"""Pair each tool call with its tool result, strictly by call id, and name what does not pair.

The transcript shows a ``tool_call`` and its ``tool_result`` as one row (docs/specs.md, The log:
"The transcript UI pairs each tool_call with its tool_result into one row"). Pairing is a view
computed at read time over a whole session; the log itself is never changed.

A call or result that was erased (``agenttrail erase``) reads as ``erased``; the erasure
record keeps its type and call id (``kept``, docs/log-format.md, Erasure), which pairs it as
before, so its partner is shown as erased rather than flagged (:func:`tool_refs`); erasures
made before ``kept`` existed leave their partners unpaired.

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

The names are :class:`AnomalyKind`, defined here once; the export and the REST event JSON
carry them as ``anomalies`` (docs/log-format.md, Anomalies).
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from agenttrail.model import Event, context_text, tool_status

__all__ = [
    "ANOMALY_TEXT",
    "Anomaly",
    "AnomalyKind",
    "Pairing",
    "SeqPairing",
    "ToolRef",
    "anomaly_names",
    "erased_lines",
    "erased_notes",
    "pair_refs",
    "pair_tool_calls",
    "tool_ref",
    "tool_refs",
]


class AnomalyKind(enum.StrEnum):
    """Why a tool call or result is not paired (rules in the module docstring)."""

    MISSING_ID = "missing_id"
    """A call with no or an empty ``id``, or a result with no or an empty ``toolCallId``."""
    DUPLICATE_ID = "duplicate_id"
    """Two or more calls share an id: they and every result naming it are ambiguous."""
    ORPHAN_RESULT = "orphan_result"
    """A result whose id matches no call."""
    DUPLICATE_RESULT = "duplicate_result"
    """Two or more results name one call: the call and its results are ambiguous."""
    NO_RESULT = "no_result"
    """A call with a unique id and no result (still running, or never recorded)."""


ANOMALY_TEXT = {
    AnomalyKind.MISSING_ID: "no call id: cannot be paired",
    AnomalyKind.DUPLICATE_ID: "call id used by more than one call: ambiguous",
    AnomalyKind.ORPHAN_RESULT: "result with no call",
    AnomalyKind.DUPLICATE_RESULT: "more than one result for this call: ambiguous",
    AnomalyKind.NO_RESULT: "call with no result",
}
"""One-line reader-facing text for each anomaly kind."""


@dataclass(frozen=True)
class Anomaly:
    """One event that could not be paired."""

    seq: int
    """The event's seq."""
    kind: AnomalyKind
    """What is wrong (a key of :data:`ANOMALY_TEXT`)."""
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
    erased: dict[int, str] = field(default_factory=dict)
    """Erased event seq → ``erased seq N by WHO: WHY`` (:func:`erased_notes`)."""


def _call_id(value: object) -> str | None:
    return value if isinstance(value, str) and value != "" else None


class ToolRef(NamedTuple):
    """A tool call or tool result reduced to what pairing reads (a tuple: ``show`` makes one
    per call and result, and a frozen dataclass cost five times as much)."""

    seq: int
    """The event's seq."""
    kind: str
    """``tool_call`` or ``tool_result``."""
    call_id: str | None
    """The call's ``id`` or the result's ``toolCallId``; ``None`` when missing or empty."""


def tool_ref(event: Event) -> ToolRef | None:
    """The :class:`ToolRef` of a ``tool_call`` or ``tool_result`` event; ``None`` for others."""
    kind = event.type
    if kind == "tool_call":
        return ToolRef(event.seq, kind, _call_id(event.payload.get("id")))
    if kind == "tool_result":
        return ToolRef(event.seq, kind, _call_id(event.payload.get("toolCallId")))
    return None


def tool_refs(event: Event) -> list[ToolRef]:
    """What pairing reads of an event: the :func:`tool_ref` of a call or result; for an
    erasure record, a ref for each tool call and result it erased, from its ``kept``
    (``{"seq", "type", "id" | "toolCallId"}``, docs/log-format.md, Erasure); ``[]`` else."""
    ref = tool_ref(event)
    if ref is not None:
        return [ref]
    kept = event.payload.get("kept") if event.type == "erasure" else None
    refs = []
    for item in kept if isinstance(kept, list) else []:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in ("tool_call", "tool_result") and isinstance(item.get("seq"), int):
            key = "id" if kind == "tool_call" else "toolCallId"
            refs.append(ToolRef(item["seq"], kind, _call_id(item.get(key))))
    return refs


def erased_notes(event: Event) -> dict[int, str]:
    """For an erasure record, each seq it erased → ``erased seq N by WHO: WHY`` (its
    :func:`agenttrail.model.context_text` for that seq alone); ``{}`` for other events."""
    seqs = event.payload.get("seqs") if event.type == "erasure" else None
    notes = {}
    for seq in seqs if isinstance(seqs, list) else []:
        said = context_text({**event.payload, "seqs": [seq]})
        if isinstance(seq, int) and said is not None:
            notes[seq] = said[0]
    return notes


def erased_lines(event: Event, pairing: Pairing) -> list[str]:
    """An erased event as the views write it: ``erased seq N by WHO: WHY``, and for an
    erased tool call its result's line (``its result — ok``, or the result's own erasure),
    the call kept paired by its erasure record (:func:`tool_refs`)."""
    lines = [pairing.erased.get(event.seq, "payload erased")]
    result = pairing.result_of.get(event.seq)
    if result is not None:
        erased = pairing.erased.get(result.seq) if result.erased else None
        lines.append(f"its result — {erased or tool_status(result.payload)}")
    return lines


@dataclass(frozen=True)
class SeqPairing:
    """Tool calls and results paired by seq only (see :func:`pair_refs`)."""

    result_seq: dict[int, int] = field(default_factory=dict)
    """Call seq → the seq of its one result."""
    call_seq: dict[int, int] = field(default_factory=dict)
    """Result seq → the seq of its one call."""
    anomalies: dict[int, Anomaly] = field(default_factory=dict)
    """Event seq → what is wrong with it."""


def pair_refs(refs: Iterable[ToolRef]) -> SeqPairing:
    """Pair tool calls and results given as :class:`ToolRef` (rules in the module docstring).

    The same rules as :func:`pair_tool_calls`, over seqs and ids alone, so that a view that
    keeps a large session's refs (the web viewer's index) can pair again as the log grows
    without holding every payload.

    Args:
        refs: the session's tool calls and results, any order (seq decides nothing here:
            pairing is by id).

    Returns:
        The :class:`SeqPairing`.
    """
    calls: dict[str, list[int]] = defaultdict(list)
    results: dict[str, list[int]] = defaultdict(list)
    pairing = SeqPairing()
    for ref in refs:
        if ref.call_id is None:
            pairing.anomalies[ref.seq] = Anomaly(ref.seq, AnomalyKind.MISSING_ID, None)
        elif ref.kind == "tool_call":
            calls[ref.call_id].append(ref.seq)
        elif ref.kind == "tool_result":
            results[ref.call_id].append(ref.seq)
    for call_id, group in calls.items():
        answers = results.get(call_id, [])
        if len(group) > 1:
            for seq in group + answers:
                pairing.anomalies[seq] = Anomaly(seq, AnomalyKind.DUPLICATE_ID, call_id)
        elif len(answers) > 1:
            for seq in group + answers:
                pairing.anomalies[seq] = Anomaly(seq, AnomalyKind.DUPLICATE_RESULT, call_id)
        elif answers:
            pairing.result_seq[group[0]] = answers[0]
            pairing.call_seq[answers[0]] = group[0]
        else:
            pairing.anomalies[group[0]] = Anomaly(group[0], AnomalyKind.NO_RESULT, call_id)
    for call_id, answers in results.items():
        if call_id not in calls:
            for seq in answers:
                pairing.anomalies[seq] = Anomaly(seq, AnomalyKind.ORPHAN_RESULT, call_id)
    return pairing


def pair_tool_calls(events: Iterable[Event]) -> Pairing:
    """Pair ``tool_call`` and ``tool_result`` events by id (rules in the module docstring).

    Args:
        events: a session's events, any order (seq decides).

    Returns:
        The :class:`Pairing`; events of other types are ignored.
    """
    by_seq: dict[int, Event] = {}
    refs: list[ToolRef] = []
    erased: dict[int, str] = {}
    for event in events:  # one test of its type per event: a long session is mostly others
        ref = tool_ref(event)
        if ref is not None:
            refs.append(ref)
            by_seq[event.seq] = event
        elif event.type == "erasure":
            refs += tool_refs(event)
            erased.update(erased_notes(event))
        elif event.erased:
            by_seq[event.seq] = event
    seqs = pair_refs(ref for ref in refs if ref.seq in by_seq)  # an erased event not given
    return Pairing(
        result_of={call: by_seq[result] for call, result in seqs.result_seq.items()},
        call_of={result: by_seq[call] for result, call in seqs.call_seq.items()},
        anomalies=seqs.anomalies,
        erased=erased,
    )


def anomaly_names(anomalies: Mapping[int, Anomaly], seq: int) -> list[str]:
    """The names (:class:`AnomalyKind` values) of event ``seq``'s anomalies, ``[]`` for none.

    This is the derived ``anomalies`` field of an exported event and of the REST event JSON
    (docs/log-format.md, Anomalies): a list, so that a later rule can add a second name.

    Args:
        anomalies: the ``anomalies`` of a :class:`Pairing` or :class:`SeqPairing`.
        seq: the event's seq.
    """
    anomaly = anomalies.get(seq)
    return [] if anomaly is None else [anomaly.kind.value]
