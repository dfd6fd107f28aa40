"""Writing trace rows: the way evidence gets into the log's trace table.

What a row holds and how it is built and checked is :mod:`agenttrail.evidence.traces` (pure:
it reads events and rows, never writes); this module hands the built rows to the store and
logs each one (docs/evidence.md, Trace rows). The recorder and the importer write a result's
row in the transaction that appends the result (``LogStore.append_traced``), the importer with
:func:`rows_for` over the session as that transaction sees it; :func:`capture` writes the rows a
stored session lacks.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from agenttrail.evidence.envelopes import DEFAULT_SPEC, EnvelopeSpec, check_envelope
from agenttrail.evidence.traces import trace_row, turn_starts
from agenttrail.log.redact import redacting_logger
from agenttrail.log.store import LogStore
from agenttrail.model import Event, NewEvent, NewTrace, TraceRow
from agenttrail.views.pairing import pair_tool_calls

__all__ = ["capture", "holds_envelopes", "log_written", "rows_for", "write"]

# The logging channel docs/evidence.md names for trace rows and their alerts: a logging
# configuration that routes record-hash alerts keeps working wherever the writer lives.
logger = redacting_logger("agenttrail.evidence.traces")


def capture(
    store: LogStore, session_id: str, *, specs: Mapping[str, EnvelopeSpec] | None = None
) -> list[TraceRow]:
    """Write the trace rows a session's log calls for and does not have yet (:func:`rows_for`
    over the whole session). Safe to run again.

    Args:
        store: the log to read the session from and write its rows to.
        session_id: the session.
        specs: envelope spec per tool name; tools not named use the default spec.

    Returns:
        The rows written now.
    """
    return write(store, rows_for(session_id, list(store.read(session_id)), specs=specs))


def rows_for(
    session_id: str,
    items: Sequence[Event],
    *,
    specs: Mapping[str, EnvelopeSpec] | None = None,
    results: Collection[int] | None = None,
) -> list[NewTrace]:
    """The trace rows a session's events call for: one for every tool result paired with its
    call (by id, over the whole session) whose output is an envelope of the call's tool spec
    (``specs[tool]``, else the default).

    Args:
        session_id: the session.
        items: all its events, in seq order.
        specs: envelope spec per tool name.
        results: only the rows of these result seqs (default: every result).
    """
    turns = turn_starts(items)
    pairing = pair_tool_calls(items)
    by_seq = {event.seq: event for event in items}
    rows = []
    for result_seq, call in sorted(pairing.call_of.items()):
        if results is not None and result_seq not in results:
            continue
        result = by_seq[result_seq]
        if result.erased or call.erased:  # paired through an erasure record: nothing to check
            continue
        name = str(call.payload.get("name", ""))
        row = trace_row(
            session_id,
            call_seq=call.seq,
            call=call.payload,
            result_seq=result_seq,
            result=result.payload,
            turn_seq=turns.get(call.seq),
            created_at=result.created_at,
            spec=(specs or {}).get(name, DEFAULT_SPEC),
        )
        if row is not None:
            rows.append(row)
    return rows


def holds_envelopes(events: Iterable[NewEvent]) -> bool:
    """Whether any tool result among ``events`` has an output that is an envelope of the
    default spec: a whole session without one calls for no trace row, so the importer need
    not read it back to pair its calls (:func:`rows_for` builds rows only for envelopes).
    Of events that hold their bytes, only the tool results are decoded
    (:meth:`NewEvent.has_type`)."""
    return any(
        event.has_type("tool_result")
        and check_envelope(event.payload.get("output"), DEFAULT_SPEC) is not None
        for event in events
    )


def write(store: LogStore, rows: Sequence[NewTrace]) -> list[TraceRow]:
    """Store trace rows and log each (:func:`log_written`).

    Args:
        store: the log.
        rows: the rows to write (from :func:`agenttrail.evidence.traces.trace_row`).

    Returns:
        The rows as stored, with their ids.
    """
    return log_written(store.add_traces(rows))


def log_written(written: list[TraceRow]) -> list[TraceRow]:
    """Log each stored trace row: its id and record hash, and an alert (a warning) for a
    ``mismatch`` or an ``invalid`` envelope. Never inputs or outputs. Returns ``written``."""
    for row in written:
        where = f"trace {row.id} (session {row.session_id} seq {row.result_seq}, {row.tool})"
        if row.status in ("mismatch", "invalid"):
            # An alert: the envelope's stated record does not hold. Ids and hashes only.
            logger.warning(
                "%s: record %s: stated %s, computed %s",
                where,
                row.status,
                row.stated_hash,
                row.record_hash,
            )
        else:
            logger.info("%s: record %s %s", where, row.record_hash, row.status)
    return written
