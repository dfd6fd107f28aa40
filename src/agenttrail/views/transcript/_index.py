"""The transcript index: what each row depends on beyond its own event, kept as the log grows.

Rows are described in :mod:`agenttrail.views.transcript`; this module decides which row shows
each event (its own, its call's, a run's card, its message's first part) and which earlier rows
an event changes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any

from agenttrail.model import Event, LogReader
from agenttrail.model.parts import MessageParts
from agenttrail.views.pairing import SeqPairing, ToolRef, erased_notes, pair_refs, tool_refs
from agenttrail.views.safe import safe
from agenttrail.views.transcript._rows import (
    Row,
    event_fields,
    is_runtime,
    kind_row,
    run_card,
    tool_row,
)
from agenttrail.views.transcript._runs import Run, agent_id_of, run_id_of

__all__ = ["ANOMALY_SEQS", "TranscriptIndex", "TranscriptPage"]

ANOMALY_SEQS = 200
"""Seqs of anomalies listed in a summary (the count covers all): enough to step through."""


@dataclass(frozen=True)
class TranscriptPage:
    """Rows for a range of seqs, and rows before it that events in the range changed."""

    rows: list[Row]
    """One row per event with ``after_seq`` < seq, in seq order."""
    updates: list[Row]
    """Rows of earlier events whose row depends on an event in ``rows`` (a call whose result
    arrived, a run's events once its card exists, a message's first part once the whole
    message arrived); a reader replaces what it holds."""
    head_seq: int
    """The last seq the index had seen when the page was made."""
    next_after_seq: int | None
    """The ``after_seq`` of the next page, ``None`` at the head."""

    def body(self) -> dict[str, Any]:
        """The page as a JSON-ready mapping: its fields, in the order above."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


class TranscriptIndex:
    """What a session's rows depend on beyond their own event, for seqs 1..``head``.

    Holds, per event, only its seq, type, call id and ``agentId``, and for the parts and calls
    of an assistant message their ``messageId`` and source lines
    (:class:`agenttrail.model.parts.MessageParts`, the rule every reader of messages follows:
    a message stored in growing parts shows once, whole, at its first part's seq, with its
    calls after it); pairing is recomputed from those refs
    (:func:`agenttrail.views.pairing.pair_refs`) whenever the index grows. Not thread-safe:
    :class:`IndexCache` serialises the use of each index.

    Args:
        session_id: the session.
        created_at: the session row's ``created_at``: a session removed and created again
            under the same id is a different log.
        dated: False when the session's source gives no times (``Session.dated``): its
            events' times are the import's, so it has no :attr:`last_event_at`.
    """

    def __init__(self, session_id: str, created_at: str, *, dated: bool = True) -> None:
        self.session_id = session_id
        self.created_at = created_at
        self.dated = dated
        self.head = 0
        self.pairing = SeqPairing()
        self.runs: dict[str, Run] = {}
        self.parts = MessageParts()
        self._refs: list[ToolRef] = []
        self._by_call_id: dict[str, list[int]] = defaultdict(list)
        self._call_id_of: dict[int, str] = {}
        self._agent_of: dict[int, str] = {}
        self._finishes: dict[int, str] = {}
        self._erased: dict[int, str] = {}
        self._types: Counter[str] = Counter()
        self._paired_at: dict[int, int] = {}
        self._run_at: dict[int, int] = {}
        self._run_of_seq: dict[int, str] = {}
        self._runtime = 0
        self.last_event_at: str | None = None
        """``created_at`` of the last event (``None`` for an empty session, or one whose
        source gives no times)."""
        self.ended = False
        """Whether the last event is a ``session_end``."""

    # -- building ------------------------------------------------------------------------

    def extend(self, events: Iterable[Event]) -> None:
        """Add events after ``head`` (in seq order; older ones are ignored) and pair again."""
        grew = False
        for event in events:
            if event.seq <= self.head:
                continue
            self.head = event.seq
            grew = True
            payload = event.payload
            self.parts.add(event)
            self._types[event.type or "(untyped)"] += 1
            self._runtime += is_runtime(payload)
            self.last_event_at = event.created_at if self.dated else None
            self.ended = event.type == "session_end"
            self._erased.update(erased_notes(event))
            for ref in tool_refs(event):  # an erasure's are of the erased events before it
                self._refs.append(ref)
                if ref.call_id is not None:
                    self._by_call_id[ref.call_id].append(ref.seq)
                    self._call_id_of[ref.seq] = ref.call_id
                if ref.kind == "tool_result" and ref.seq == event.seq:
                    finished = run_id_of(payload)
                    if finished is not None:
                        self._finishes[event.seq] = finished
            agent = agent_id_of(payload)
            if agent is not None:
                self._agent_of[event.seq] = agent
        if grew:
            self._recompute()

    def _recompute(self) -> None:
        self.pairing = pair_refs(self._refs)
        runs: dict[str, Run] = {}
        for result_seq, agent in sorted(self._finishes.items()):
            if agent not in runs:  # the first result that names a run finishes it
                runs[agent] = Run(agent, self.pairing.call_seq.get(result_seq), result_seq)
        for seq, agent in sorted(self._agent_of.items()):
            run = runs.get(agent)
            if run is not None and seq not in (run.call_seq, run.result_seq):
                run.members.append(seq)
        self.runs = runs
        self._paired_at = {  # an erased call shows no result: its result keeps its own row
            result: call
            for call, result in self.pairing.result_seq.items()
            if call not in self._erased
        }
        self._run_at = {}
        self._run_of_seq = {}
        for run in runs.values():
            self._paired_at.pop(run.result_seq, None)  # the finishing result is the card
            for seq in run.members:
                self._run_at[seq] = run.result_seq
                self._run_of_seq[seq] = run.agent_id
        for run in runs.values():  # a run's own call and result over membership of another
            self._run_of_seq[run.result_seq] = run.agent_id
            if run.call_seq is not None:
                self._run_at[run.call_seq] = run.result_seq
                self._run_of_seq[run.call_seq] = run.agent_id

    # -- reading -------------------------------------------------------------------------

    def shown_at(self, seq: int, *, run: str | None = None) -> int | None:
        """The seq of the row that shows event ``seq``, ``None`` when it has its own row.

        In the main flow (``run=None``) a chain is followed to a visible row (a paired result
        inside a run shows on the run's card). Inside run ``run``'s card, its own events show.
        A later part of a message read whole shows on its first part's row.
        """
        inside = self.runs[run].result_seq if run is not None and run in self.runs else None
        target: int | None = None
        current = seq
        for _ in range(8):  # runs nest rarely; a bound keeps a malformed log from looping
            step = self._run_at.get(current)
            if step is None or step == inside:
                step = self._paired_at.get(current)
            if step is None:
                step = self.parts.part_of(current)
            if step is None:
                break
            target = current = step
            if run is not None:
                break
        return target

    def related(self, seq: int) -> set[int]:
        """Seqs whose row may change when event ``seq`` joins the log: the events sharing its
        call id, every event of the run it belongs to or finishes, and the parts and calls of
        the API message it is part of."""
        call_id = self._call_id_of.get(seq)
        out = set(self._by_call_id.get(call_id, ())) if call_id is not None else set()
        out |= self.parts.related(seq)
        agent = self._run_of_seq.get(seq)
        if agent is not None:
            out |= self.runs[agent].seqs()
        out.discard(seq)
        return out

    def summary(self) -> dict[str, Any]:
        """Counts for the sessions list: events, tool calls, runs, runtime rows (a reader may
        hide them: :func:`~agenttrail.views.transcript._rows.is_runtime`), anomalies by kind,
        the seqs of the first :data:`ANOMALY_SEQS` anomalies, and the last event's time."""
        kinds = Counter(a.kind for a in self.pairing.anomalies.values())
        return {
            "events": self.head,
            "tool_calls": self._types.get("tool_call", 0),
            "runs": len(self.runs),
            "runtime_rows": self._runtime,
            "last_event_at": self.last_event_at,
            "anomalies": sum(kinds.values()),
            "anomaly_kinds": dict(sorted(kinds.items())),
            "anomaly_seqs": sorted(self.pairing.anomalies)[:ANOMALY_SEQS],
        }

    def page(
        self, store: LogReader, *, after_seq: int = 0, limit: int = 200, full: bool = False
    ) -> TranscriptPage:
        """Rows for the events after ``after_seq`` (at most ``limit``, none past ``head``).

        Args:
            store: the log the index was built from.
            after_seq: rows start after this seq.
            limit: most rows returned.
            full: send whole texts instead of clipping them (for one row loaded on demand).
        """
        span = max(0, min(limit, self.head - after_seq))
        events = list(store.read(self.session_id, after_seq=after_seq, limit=span)) if span else []
        seqs = [e.seq for e in events]
        earlier: set[int] = set()
        for seq in seqs:
            earlier |= {s for s in self.related(seq) if s <= after_seq}
        built = self._rows(store, {e.seq: e for e in events}, [*seqs, *sorted(earlier)], full)
        last = seqs[-1] if seqs else after_seq
        return TranscriptPage(
            rows=built[: len(seqs)],
            updates=built[len(seqs) :],
            head_seq=self.head,
            next_after_seq=last if last < self.head and seqs else None,
        )

    def run_rows(self, store: LogReader, agent_id: str, *, full: bool = False) -> list[Row]:
        """The rows inside run ``agent_id``'s card: its own events, seen from inside the run,
        in reading order (by ``place``, then seq).

        Raises:
            KeyError: there is no finished run with that id.
        """
        run = self.runs[agent_id]
        members = sorted(run.members, key=lambda seq: (self.parts.place(seq), seq))
        return self._rows(store, {}, members, full, run=agent_id)

    def _rows(
        self,
        store: LogReader,
        known: dict[int, Event],
        seqs: list[int],
        full: bool,
        *,
        run: str | None = None,
    ) -> list[Row]:
        wanted = set(seqs)
        for seq in seqs:
            if self.shown_at(seq, run=run) is None:
                partner = self.pairing.result_seq.get(seq)
                if partner is not None:
                    wanted.add(partner)
                card = self._card(seq, run)
                if card is not None and card.call_seq is not None:
                    wanted.add(card.call_seq)
                whole = self.parts.read_as(seq)
                if whole is not None:
                    wanted.add(whole)
        found = dict(known)
        for seq in sorted(wanted - found.keys()):
            event = next(iter(store.read(self.session_id, after_seq=seq - 1, limit=1)), None)
            if event is not None and event.seq == seq:
                found[seq] = event
        return [self._row(found, seq, full, run) for seq in seqs if seq in found]

    def _card(self, seq: int, run: str | None) -> Run | None:
        agent = self._finishes.get(seq)
        card = self.runs.get(agent) if agent is not None else None
        if card is None or card.result_seq != seq or card.agent_id == run:
            return None
        return card

    def _row(self, found: dict[int, Event], seq: int, full: bool, run: str | None) -> Row:
        event = found[seq]
        shown_at = self.shown_at(seq, run=run)
        whole = self.parts.read_as(seq) if shown_at is None else None
        if whole is not None and whole in found:  # the message's place shows it whole
            event = replace(event, data=found[whole].data)
        anomaly = self.pairing.anomalies.get(seq)
        row = event_fields(
            event,
            anomaly=anomaly,
            agent_id=self._agent_of.get(seq),
            place=self.parts.place(seq),
            full=full,
        )
        if shown_at is not None:
            row.update(view="hidden", shown_at=shown_at)
            return row
        card = self._card(seq, run)
        if card is not None:
            row.update(run_card(card, event, found.get(card.call_seq or 0), full))
            return row
        if event.type == "tool_call":
            partner = self.pairing.result_seq.get(seq)
            result = found.get(partner) if partner else None
            erased = self._erased.get(partner) if partner else None
            row.update(tool_row(event, result, anomaly, full, erased=erased))
            return row
        if event.erased:  # who erased it and why (its erasure record's note)
            note = safe(self._erased.get(seq, "payload erased"))
            row.update(view="note", kind="erased", text=note, text_chars=len(note))
            return row
        row.update(kind_row(event, full))
        return row
