"""The transcript as rows for the web viewer: one row per event, shaped from the whole session.

The log spec's transcript (docs/specs.md): "The transcript UI pairs each tool_call with its
tool_result into one row and interleaves finished run cards by completion time." A row is a
JSON-ready mapping for one seq; whether and how it shows depends on other events (a call's
result may sit thousands of seqs later), so rows are computed from a :class:`TranscriptIndex`
that holds the few facts of every event that rows depend on, built once and extended as the
log grows (the log is append-only, so an index of seqs 1..N stays true).

Every row has ``seq``, ``created_at``, ``actor``, ``type``, ``hash``, ``meta`` (model,
provider, location, usage split into input, output, cache read and cache write tokens,
duration in ms; ``None`` when the event has none), ``anomaly`` (from
:func:`agenttrail.views.pairing.pair_refs`), ``agent_id`` (a subagent's id on its events) and a
``view``:

    message   a user, agent, system or trigger message (``voice`` is the actor)
    tool      a tool call and its result in one row, at the call's seq: name, arguments,
              status from :func:`agenttrail.model.tool_status`, duration, the result
    result    a tool result that pairs with no call (orphan, duplicate, missing id)
    run       a finished run card (below), at the seq of the result that finished the run
    context   ``rag``, ``recall`` and ``shell`` events
    error     an ``error`` event
    note      runtime annotations and ``session_end``: quiet asides
    event     any other shape, as JSON
    hidden    shown on another row: ``shown_at`` names it (a paired result on its call's row;
              a run's call and events inside its card)

**Runs.** A run is a subagent's piece of work that a tool call started and whose result ended
it (Claude Code's ``Task``/``Agent`` tool: the result's ``toolUseResult.agentId``, or an
``agentId`` in a mapping ``output``, names the run). The run's own events carry that
``agentId`` (Claude Code sidechain lines). A finished run is one card placed where its result
landed, so cards interleave with the conversation in completion order; the card holds the
call's prompt, the result's status, duration, tokens and tool uses, and its events (rows from
:meth:`TranscriptIndex.run_rows`). Until the result arrives, the call is an ordinary pending
tool row and the run's events show in place, each marked with its ``agent_id``.

Text from the log goes through :func:`agenttrail.views.terminal.safe` (control and bidi characters
and lone surrogates become visible escapes) and is clipped to the ``*_CHARS`` limits unless
``full`` is asked for; ``*_chars`` fields give the whole length so a reader can load the rest.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agenttrail.evidence.audit import audit
from agenttrail.log.store import LogStore
from agenttrail.model import Event, content_text, other_blocks, text_of, tool_status
from agenttrail.views.pairing import ANOMALY_TEXT, SeqPairing, ToolRef, pair_refs, tool_ref
from agenttrail.views.terminal import safe

__all__ = [
    "ARGS_CHARS",
    "NOTE_CHARS",
    "RESULT_CHARS",
    "TEXT_CHARS",
    "IndexCache",
    "Run",
    "TranscriptIndex",
    "TranscriptPage",
    "display_text",
    "run_id_of",
]

TEXT_CHARS = 4000
"""Characters of a message sent in a row before the reader asks for the rest: a long reply
stays readable and a 2 MiB paste does not stall the page."""

ARGS_CHARS = 2000
"""Characters of a tool call's arguments (pretty JSON) sent in a row."""

RESULT_CHARS = 2000
"""Characters of a tool result sent in a row; larger results are loaded on demand."""

NOTE_CHARS = 240
"""Characters of a runtime note or an unknown event's JSON: asides stay one or two lines."""

ANOMALY_SEQS = 200
"""Seqs of anomalies listed in a summary (the count covers all): enough to step through."""

INDEX_CACHE_SIZE = 16
"""Sessions whose index :class:`IndexCache` keeps: an index costs about 100 bytes per event."""

Row = dict[str, Any]


def run_id_of(result: dict[str, Any]) -> str | None:
    """The run a ``tool_result`` payload finishes: the ``agentId`` in its ``toolUseResult``
    (Claude Code's Task/Agent tool) or in a mapping ``output``; ``None`` for other results."""
    for holder in (result.get("toolUseResult"), result.get("output")):
        if isinstance(holder, dict):
            agent = holder.get("agentId")
            if isinstance(agent, str) and agent:
                return agent
    return None


def _agent_id(payload: dict[str, Any]) -> str | None:
    agent = payload.get("agentId")
    return agent if isinstance(agent, str) and agent else None


@dataclass
class Run:
    """A finished subagent run: the call that started it, the result that ended it, its events."""

    agent_id: str
    """The subagent's id (``agentId``)."""
    call_seq: int | None
    """The seq of the call that started the run; ``None`` when its result pairs with none."""
    result_seq: int
    """The seq of the result that finished the run; the card sits here."""
    members: list[int] = field(default_factory=list)
    """Seqs of the run's own events (those carrying its ``agentId``), in seq order."""

    def seqs(self) -> set[int]:
        """Every seq the card stands for: call, result and members."""
        out = {self.result_seq, *self.members}
        if self.call_seq is not None:
            out.add(self.call_seq)
        return out


@dataclass(frozen=True)
class TranscriptPage:
    """Rows for a range of seqs, and rows before it that events in the range changed."""

    rows: list[Row]
    """One row per event with ``after_seq`` < seq, in seq order."""
    updates: list[Row]
    """Rows of earlier events whose row depends on an event in ``rows`` (a call whose result
    arrived, a run's events once its card exists); a reader replaces what it holds."""
    head_seq: int
    """The last seq the index had seen when the page was made."""
    next_after_seq: int | None
    """The ``after_seq`` of the next page, ``None`` at the head."""

    def body(self) -> dict[str, Any]:
        """The page as a JSON-ready mapping."""
        return {
            "rows": self.rows,
            "updates": self.updates,
            "head_seq": self.head_seq,
            "next_after_seq": self.next_after_seq,
        }


class TranscriptIndex:
    """What a session's rows depend on beyond their own event, for seqs 1..``head``.

    Holds, per event, only its seq, type, call id and ``agentId``; pairing is recomputed from
    those refs (:func:`agenttrail.views.pairing.pair_refs`) whenever the index grows. Not
    thread-safe: :class:`IndexCache` serialises the use of each index.

    Args:
        session_id: the session.
        created_at: the session row's ``created_at``: a session removed and created again
            under the same id is a different log.
    """

    def __init__(self, session_id: str, created_at: str) -> None:
        self.session_id = session_id
        self.created_at = created_at
        self.head = 0
        self.pairing = SeqPairing()
        self.runs: dict[str, Run] = {}
        self._refs: list[ToolRef] = []
        self._by_call_id: dict[str, list[int]] = defaultdict(list)
        self._call_id_of: dict[int, str] = {}
        self._agent_of: dict[int, str] = {}
        self._finishes: dict[int, str] = {}
        self._types: Counter[str] = Counter()
        self._paired_at: dict[int, int] = {}
        self._run_at: dict[int, int] = {}
        self._run_of_seq: dict[int, str] = {}

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
            self._types[event.type or "(untyped)"] += 1
            ref = tool_ref(event)
            if ref is not None:
                self._refs.append(ref)
                if ref.call_id is not None:
                    self._by_call_id[ref.call_id].append(event.seq)
                    self._call_id_of[event.seq] = ref.call_id
                if ref.kind == "tool_result":
                    finished = run_id_of(payload)
                    if finished is not None:
                        self._finishes[event.seq] = finished
            agent = _agent_id(payload)
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
        self._paired_at = {result: call for call, result in self.pairing.result_seq.items()}
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
        """
        inside = self.runs[run].result_seq if run is not None and run in self.runs else None
        target: int | None = None
        current = seq
        for _ in range(8):  # runs nest rarely; a bound keeps a malformed log from looping
            step = self._run_at.get(current)
            if step is None or step == inside:
                step = self._paired_at.get(current)
            if step is None:
                break
            target = current = step
            if run is not None:
                break
        return target

    def related(self, seq: int) -> set[int]:
        """Seqs whose row may change when event ``seq`` joins the log: the events sharing its
        call id, and every event of the run it belongs to or finishes."""
        call_id = self._call_id_of.get(seq)
        out = set(self._by_call_id.get(call_id, ())) if call_id is not None else set()
        agent = self._run_of_seq.get(seq)
        if agent is not None:
            out |= self.runs[agent].seqs()
        out.discard(seq)
        return out

    def summary(self) -> dict[str, Any]:
        """Counts for the sessions list: events, tool calls, runs, anomalies by kind, and the
        seqs of the first :data:`ANOMALY_SEQS` anomalies."""
        kinds = Counter(a.kind for a in self.pairing.anomalies.values())
        return {
            "events": self.head,
            "tool_calls": self._types.get("tool_call", 0),
            "runs": len(self.runs),
            "anomalies": sum(kinds.values()),
            "anomaly_kinds": dict(sorted(kinds.items())),
            "anomaly_seqs": sorted(self.pairing.anomalies)[:ANOMALY_SEQS],
        }

    def page(
        self, store: LogStore, *, after_seq: int = 0, limit: int = 200, full: bool = False
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

    def run_rows(self, store: LogStore, agent_id: str, *, full: bool = False) -> list[Row]:
        """The rows inside run ``agent_id``'s card: its own events, seen from inside the run.

        Raises:
            KeyError: there is no finished run with that id.
        """
        run = self.runs[agent_id]
        return self._rows(store, {}, run.members, full, run=agent_id)

    def _rows(
        self,
        store: LogStore,
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
        payload = event.payload
        anomaly = self.pairing.anomalies.get(seq)
        row: Row = {
            "seq": seq,
            "created_at": event.created_at,
            "actor": event.actor,
            "type": safe(event.type) if event.type is not None else None,
            "hash": event.hash.hex(),
            "meta": _meta(payload.get("meta")),
            "anomaly": None
            if anomaly is None
            else {
                "kind": anomaly.kind,
                "text": ANOMALY_TEXT[anomaly.kind],
                "call_id": safe(anomaly.call_id) if anomaly.call_id else None,
            },
            "agent_id": safe(self._agent_of[seq]) if seq in self._agent_of else None,
            "full": full,
        }
        shown_at = self.shown_at(seq, run=run)
        if shown_at is not None:
            row.update(view="hidden", shown_at=shown_at)
            return row
        card = self._card(seq, run)
        if card is not None:
            row.update(_run_card(card, event, found.get(card.call_seq or 0), full))
            return row
        if event.type == "tool_call":
            partner = self.pairing.result_seq.get(seq)
            row.update(_tool_row(event, found.get(partner) if partner else None, anomaly, full))
            return row
        writer = _WRITERS.get(event.type or "", _generic)
        row.update(writer(payload, full))
        return row


class IndexCache:
    """Indexes of recently read sessions, kept up to date with the log; thread-safe.

    Args:
        size: sessions kept; the least recently used index is dropped beyond it.
    """

    def __init__(self, size: int = INDEX_CACHE_SIZE) -> None:
        self._size = size
        self._indexes: OrderedDict[str, TranscriptIndex] = OrderedDict()
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def use(self, store: LogStore, session_id: str, fn: Callable[[TranscriptIndex], Any]) -> Any:
        """Call ``fn`` with the session's index brought up to the log's head.

        Raises:
            SessionNotFound: no such session.
        """
        with self._guard:
            lock = self._locks.setdefault(session_id, threading.Lock())
        with lock:
            session = store.get_session(session_id)
            with self._guard:
                index = self._indexes.get(session_id)
            if index is None or index.created_at != session.created_at:
                index = TranscriptIndex(session_id, session.created_at)
            if session.head_seq > index.head:
                index.extend(store.read(session_id, after_seq=index.head))
            with self._guard:
                self._indexes[session_id] = index
                self._indexes.move_to_end(session_id)
                while len(self._indexes) > self._size:
                    self._indexes.popitem(last=False)
            return fn(index)

    def page(
        self, store: LogStore, session_id: str, *, after_seq: int, limit: int, full: bool = False
    ) -> TranscriptPage:
        """:meth:`TranscriptIndex.page` of the session, index brought up to date first."""
        page: TranscriptPage = self.use(
            store,
            session_id,
            lambda index: index.page(store, after_seq=after_seq, limit=limit, full=full),
        )
        return page

    def run_rows(
        self, store: LogStore, session_id: str, agent_id: str, *, full: bool = False
    ) -> list[Row]:
        """:meth:`TranscriptIndex.run_rows` of the session.

        Raises:
            KeyError: the session has no finished run ``agent_id``.
        """
        rows: list[Row] = self.use(
            store, session_id, lambda index: index.run_rows(store, agent_id, full=full)
        )
        return rows

    def overview(self, store: LogStore, session_id: str) -> dict[str, Any]:
        """Counts of :meth:`TranscriptIndex.summary` and the chain status, checked now.

        The chain and the trace rows are checked on every call
        (:func:`agenttrail.evidence.audit.audit`): a badge must not vouch for a log from memory.
        """
        summary: dict[str, Any] = self.use(store, session_id, lambda index: index.summary())
        (verdict,) = audit(store, [session_id])
        summary["chain"] = verdict.record(escape=safe)
        return summary


# -- row writers: one per kind of event ----------------------


def _clip(text: str, limit: int, full: bool) -> tuple[str, int]:
    text = safe(text)
    return (text if full or len(text) <= limit else text[:limit]), len(text)


def display_text(value: Any) -> str:
    """Readable text of a payload value: its prose when it is all text (a string, or blocks
    that all carry text: :func:`agenttrail.model.text_of`), else indented JSON, so that a
    block without text is shown rather than left out."""
    if value is None:
        return ""
    text = text_of(value)
    if text is not None and not other_blocks(value):
        return text
    return json.dumps(value, ensure_ascii=False, indent=2, default=repr)


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _optional_text(value: Any) -> str | None:
    return safe(value) if isinstance(value, str) and value else None


def _meta(value: Any) -> dict[str, Any] | None:
    """The ⓘ fields of an event's meta; ``None`` when it says nothing."""
    if not isinstance(value, dict):
        return None
    usage = value.get("usage")
    counts = (
        {k: _number(usage.get(k)) for k in ("input", "output", "cache_read", "cache_write")}
        if isinstance(usage, dict)
        else None
    )
    duration = value.get("duration_ms", value.get("durationMs"))
    out = {
        "model": _optional_text(value.get("model")),
        "provider": _optional_text(value.get("provider")),
        "location": _optional_text(value.get("location")),
        "usage": counts if counts and any(v is not None for v in counts.values()) else None,
        "duration_ms": _number(duration),
    }
    return out if any(v is not None for v in out.values()) else None


def _message(payload: dict[str, Any], full: bool) -> Row:
    text, chars = _clip(content_text(payload.get("content")).strip(), TEXT_CHARS, full)
    blocks = payload.get("blocks")
    blocks = [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []
    kinds = sorted({str(b.get("type")) for b in blocks} - {"text", "thinking"})
    thinking, thinking_chars = _clip(
        "\n\n".join(b["thinking"] for b in blocks if isinstance(b.get("thinking"), str)),
        TEXT_CHARS,
        full,
    )
    return {
        "view": "message",
        "role": _optional_text(payload.get("role")),
        "character": _optional_text(payload.get("character")),
        "text": text,
        "text_chars": chars,
        "thinking": thinking,
        "thinking_chars": thinking_chars,
        "blocks": [safe(k) for k in kinds],
    }


def _arguments(call: dict[str, Any], full: bool) -> tuple[str, int]:
    value = call.get("input", call.get("arguments"))
    return _clip(display_text(value), ARGS_CHARS, full)


def _result_fields(result: dict[str, Any], full: bool) -> Row:
    status = tool_status(result)
    body = display_text(result.get("output"))
    error = result.get("error")
    if error and not body:
        body = error if isinstance(error, str) else display_text(error)
    text, chars = _clip(body, RESULT_CHARS, full)
    return {
        "status": "ok" if status.ok else "error",
        "status_detail": safe(status.detail),
        "result_text": text,
        "result_chars": chars,
    }


def _tool_row(call: Event, result: Event | None, anomaly: Any, full: bool) -> Row:
    payload = call.payload
    arguments, arguments_chars = _arguments(payload, full)
    row: Row = {
        "view": "tool",
        "call_id": _optional_text(payload.get("id")),
        "name": safe(str(payload.get("name") or "?")),
        "character": _optional_text(payload.get("character")),
        "arguments": arguments,
        "arguments_chars": arguments_chars,
        "result_seq": None,
        "status": "pending" if anomaly is None or anomaly.kind == "no_result" else "unpaired",
        "status_detail": "",
        "result_text": "",
        "result_chars": 0,
        "result": None,
        "duration_ms": _duration(payload, None),
    }
    if result is not None:
        row.update(_result_fields(result.payload, full))
        row["result_seq"] = result.seq
        row["duration_ms"] = _duration(payload, result.payload)
        row["result"] = {
            "seq": result.seq,
            "created_at": result.created_at,
            "actor": result.actor,
            "hash": result.hash.hex(),
            "meta": _meta(result.payload.get("meta")),
        }
    return row


def _duration(call: dict[str, Any], result: dict[str, Any] | None) -> int | float | None:
    for payload in (result, call):
        meta = payload.get("meta") if payload is not None else None
        if isinstance(meta, dict):
            duration = _number(meta.get("duration_ms", meta.get("durationMs")))
            if duration is not None:
                return duration
    return None


def _orphan_result(payload: dict[str, Any], full: bool) -> Row:
    return {
        "view": "result",
        "call_id": _optional_text(payload.get("toolCallId")),
        "name": _optional_text(payload.get("name")),
        **_result_fields(payload, full),
    }


def _run_card(run: Run, result: Event, call: Event | None, full: bool) -> Row:
    facts = result.payload.get("toolUseResult")
    facts = facts if isinstance(facts, dict) else {}
    call_input = call.payload.get("input") if call is not None else None
    call_input = call_input if isinstance(call_input, dict) else {}
    prompt, prompt_chars = _clip(
        display_text(call_input.get("prompt") or facts.get("prompt") or ""), TEXT_CHARS, full
    )
    fields = _result_fields(result.payload, full)
    duration = _number(facts.get("totalDurationMs"))
    if duration is None:
        duration = _duration(call.payload if call is not None else {}, result.payload)
    return {
        "view": "run",
        "agent_id": safe(run.agent_id),
        "call_seq": run.call_seq,
        "name": safe(str(call.payload.get("name") or "?")) if call is not None else None,
        "description": _optional_text(call_input.get("description")),
        "subagent_type": _optional_text(call_input.get("subagent_type")),
        "prompt": prompt,
        "prompt_chars": prompt_chars,
        "run_status": _optional_text(facts.get("status")),
        "duration_ms": duration,
        "tokens": _number(facts.get("totalTokens")),
        "tool_uses": _number(facts.get("totalToolUseCount")),
        "members": len(run.members),
        "started_at": call.created_at if call is not None else None,
        "call_meta": _meta(call.payload.get("meta")) if call is not None else None,
        **fields,
    }


def _error(payload: dict[str, Any], full: bool) -> Row:
    text, chars = _clip(str(payload.get("message", "")), TEXT_CHARS, full)
    return {"view": "error", "text": text, "text_chars": chars}


def _rag(payload: dict[str, Any], full: bool) -> Row:
    title = (
        f"{payload.get('chunks')} chunks from {payload.get('store')}, "
        f"top score {payload.get('top_score')}"
    )
    return {"view": "context", "kind": "rag", "title": safe(title), "text": "", "text_chars": 0}


def _recall(payload: dict[str, Any], full: bool) -> Row:
    results = payload.get("results")
    items = [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []
    lines = "\n".join(f"{r.get('id')} ({r.get('source')}) — score {r.get('score')}" for r in items)
    text, chars = _clip(lines, TEXT_CHARS, full)
    title = f"{len(items)} memor{'y' if len(items) == 1 else 'ies'} recalled"
    return {"view": "context", "kind": "recall", "title": title, "text": text, "text_chars": chars}


def _shell(payload: dict[str, Any], full: bool) -> Row:
    text, chars = _clip(content_text(payload.get("output")), RESULT_CHARS, full)
    exit_code = payload.get("exit_code")
    return {
        "view": "context",
        "kind": "shell",
        "title": safe(f"$ {payload.get('command')} — exit {exit_code}"),
        "status": "ok" if exit_code in (0, None) else "error",
        "text": text,
        "text_chars": chars,
    }


_NOTE_SKIP = frozenset({"uuid", "parentUuid", "sessionId", "messageId", "timestamp", "cwd"})
"""Fields of a note's data that identify rather than say anything (ids, times, folders)."""


def _note_line(data: Any) -> str:
    """A runtime note's data as one line: its ``content`` text, else the scalar fields of it
    (or of the ``data`` mapping it wraps) joined by `` · ``, else compact JSON."""
    if isinstance(data, dict):
        if isinstance(data.get("content"), str):
            return str(data["content"])
        wrapped = data.get("data")
        inner: dict[str, Any] = wrapped if isinstance(wrapped, dict) else data
        scalars = [
            str(v)
            for k, v in inner.items()
            if k not in _NOTE_SKIP and isinstance(v, str | int | float) and not isinstance(v, bool)
        ]
        if scalars:
            return " · ".join(scalars)
    return json.dumps(data, ensure_ascii=False, default=repr)


def _annotation(payload: dict[str, Any], full: bool) -> Row:
    body = payload.get("text")
    if isinstance(body, str):
        text, chars = _clip(body, NOTE_CHARS, full)
    else:  # the line sums the data up; the whole data is what a reader loads on demand
        data = json.dumps(payload.get("data"), ensure_ascii=False, default=repr, indent=2)
        text = safe(data) if full else _clip(_note_line(payload.get("data")), NOTE_CHARS, False)[0]
        chars = len(safe(data))
    return {
        "view": "note",
        "kind": safe(str(payload.get("kind") or "note")),
        "text": text,
        "text_chars": chars,
    }


def _session_end(payload: dict[str, Any], full: bool) -> Row:
    reason = payload.get("reason") or "closed"
    text = safe(f"session {reason}")
    return {"view": "note", "kind": "end", "text": text, "text_chars": len(text)}


def _generic(payload: dict[str, Any], full: bool) -> Row:
    body = {k: v for k, v in payload.items() if k != "type"}
    text, chars = _clip(json.dumps(body, ensure_ascii=False, default=repr), NOTE_CHARS * 4, full)
    kind = payload.get("type")
    label = safe(kind) if isinstance(kind, str) else "(untyped)"
    return {"view": "event", "label": label, "text": text, "text_chars": chars}


_WRITERS: dict[str, Callable[[dict[str, Any], bool], Row]] = {
    "message": _message,
    "tool_result": _orphan_result,
    "error": _error,
    "rag": _rag,
    "recall": _recall,
    "shell": _shell,
    "annotation": _annotation,
    "session_end": _session_end,
}
