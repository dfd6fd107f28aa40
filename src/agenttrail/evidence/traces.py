"""Trace rows: the evidence kept beside the transcript.

The rules: docs/specs.md, Tool-call traces.

For every tool call whose result is a response envelope, a trace row keeps the call as issued
(tool, inputs), the envelope verbatim (its bytes), the time, and the join key to the
conversation: ``(session_id, call_seq, result_seq)`` and ``turn_seq``, the user message that
began the turn. Rows join both ways: a turn's rows (``store.traces(sid, turn_seq=…)``) and a
row's turn (``row.turn_seq``). They hold no user identity; that stays in the sessions table.

The envelope's record hash is checked once, when the row is built: ``verified``,
``mismatch`` (kept and raised as an alert, never dropped), ``computed`` (the envelope stated
none, ours is kept) or ``invalid`` (not I-JSON, refused).

This module only builds rows (:func:`trace_row`), checks stored rows against the log
(:func:`verify_traces`) and shows them (:func:`trace_record`): it reads, never writes. Rows
reach the store through :mod:`agenttrail.ingest.traces`, which also logs them (ids and record
hashes only, never inputs or outputs).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agenttrail.codec import json_line
from agenttrail.errors import InputError, StoreError
from agenttrail.evidence.envelopes import (
    DEFAULT_SPEC,
    EnvelopeSpec,
    check_envelope,
    envelope_bytes,
)
from agenttrail.model import Event, LogReader, NewTrace, TraceRow

__all__ = ["trace_record", "trace_row", "turn_starts", "verify_traces"]


def turn_starts(items: Iterable[Event]) -> dict[int, int | None]:
    """Seq of every event → seq of the user message that began its turn (``None`` before the
    first). A turn is a user prompt and everything up to the next (docs/architecture.md,
    Vocabulary)."""
    current: int | None = None
    out: dict[int, int | None] = {}
    for event in items:
        p = event.payload
        if event.type == "message" and p.get("role") == "user" and event.actor == "user":
            current = event.seq
        out[event.seq] = current
    return out


def trace_row(
    session_id: str,
    *,
    call_seq: int,
    call: Mapping[str, Any],
    result_seq: int,
    result: Mapping[str, Any],
    turn_seq: int | None,
    created_at: str,
    spec: EnvelopeSpec = DEFAULT_SPEC,
) -> NewTrace | None:
    """The trace row for one call and its result, or ``None`` when the result is no envelope."""
    output = result.get("output")
    check = check_envelope(output, spec)
    if check is None:
        return None
    return NewTrace(
        session_id=session_id,
        call_seq=call_seq,
        result_seq=result_seq,
        turn_seq=turn_seq,
        tool=str(call.get("name", "")),
        inputs=json_line(call.get("input")),
        envelope=envelope_bytes(output),
        created_at=created_at,
        record_hash=check.record_hash,
        stated_hash=check.stated_hash,
        status=check.status,
        detail=check.detail,
        spec=spec.to_json(),
    )


def verify_traces(store: LogReader, session_id: str) -> list[str]:
    """Check a session's trace rows against the log; returns one line per problem.

    Each row's envelope must be the bytes of the logged result it names (the chain protects
    those), its call must be the logged call, and its record hash must be what the envelope
    gives now under the row's spec. A row changed by hand into what no writer stores (inputs
    or spec that are not JSON, a NULL) is a problem of that row; trace rows the store cannot
    read at all are one problem of the session.
    """
    try:
        rows = store.traces(session_id)
    except StoreError as e:
        return [f"trace rows cannot be read: {e}"]
    if not rows:  # most sessions: their events are not read a second time
        return []
    items = {event.seq: event for event in store.read(session_id)}
    problems = []
    for row in rows:
        where = f"trace {row.id}"
        result, call = items.get(row.result_seq), items.get(row.call_seq)
        if result is None or result.type != "tool_result":
            problems.append(f"{where}: seq {row.result_seq} is not a logged tool result")
            continue
        if call is None or call.type != "tool_call":
            problems.append(f"{where}: seq {row.call_seq} is not a logged tool call")
            continue
        if envelope_bytes(result.payload.get("output")) != row.envelope:
            problems.append(
                f"{where}: envelope differs from the logged result (seq {row.result_seq})"
            )
            continue
        try:
            inputs = json.loads(row.inputs)
        except (TypeError, ValueError):  # not text, not JSON
            problems.append(f"{where}: inputs are not JSON")
            continue
        if inputs != call.payload.get("input"):
            problems.append(f"{where}: inputs differ from the logged call (seq {row.call_seq})")
            continue
        try:
            spec = EnvelopeSpec.from_json(row.spec)
        except (TypeError, ValueError, InputError):  # not text, not JSON, not a spec
            problems.append(f"{where}: spec is not an envelope spec")
            continue
        check = check_envelope(result.payload.get("output"), spec)
        if check is None or (check.record_hash, check.status) != (row.record_hash, row.status):
            problems.append(f"{where}: record hash or status does not match the envelope")
    return problems


def trace_record(row: TraceRow, *, envelope: bool) -> dict[str, Any]:
    """A trace row as a JSON-ready mapping (CLI and API); with ``envelope``, also the call's
    inputs and the envelope as text (bytes that are not UTF-8 shown as U+FFFD)."""
    record: dict[str, Any] = {
        "id": row.id,
        "session_id": row.session_id,
        "turn_seq": row.turn_seq,
        "call_seq": row.call_seq,
        "result_seq": row.result_seq,
        "tool": row.tool,
        "status": row.status,
        "record_hash": row.record_hash,
        "stated_hash": row.stated_hash,
        "detail": row.detail,
        "created_at": row.created_at,
    }
    if envelope:
        record["inputs"] = row.inputs
        record["envelope"] = row.envelope.decode("utf-8", "replace")
    return record
