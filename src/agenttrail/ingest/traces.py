"""Writing trace rows: the way evidence gets into the log's trace table.

What a row holds and how it is built and checked is :mod:`agenttrail.evidence.traces` (pure:
it reads events and rows, never writes); this module hands the built rows to the store and
logs each one (docs/evidence.md, Trace rows). The recorder writes a row as a result is
recorded; the importer runs :func:`capture` over each session it imports.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from agenttrail.evidence.envelopes import DEFAULT_SPEC, EnvelopeSpec
from agenttrail.evidence.traces import trace_row, turn_starts
from agenttrail.log.store import LogStore
from agenttrail.model import NewTrace, TraceRow
from agenttrail.views.pairing import pair_tool_calls

__all__ = ["capture", "write"]

# The logging channel docs/evidence.md names for trace rows and their alerts: a logging
# configuration that routes record-hash alerts keeps working wherever the writer lives.
logger = logging.getLogger("agenttrail.evidence.traces")


def capture(
    store: LogStore, session_id: str, *, specs: Mapping[str, EnvelopeSpec] | None = None
) -> list[TraceRow]:
    """Write the trace rows a session's log calls for and does not have yet.

    Every tool result paired with its call (by id) whose output is an envelope of the call's
    tool spec (``specs[tool]``, else the default) gets a row. Safe to run again.

    Args:
        store: the log to read the session from and write its rows to.
        session_id: the session.
        specs: envelope spec per tool name; tools not named use the default spec.

    Returns:
        The rows written now.
    """
    items = list(store.read(session_id))
    turns = turn_starts(items)
    pairing = pair_tool_calls(items)
    by_seq = {event.seq: event for event in items}
    rows = []
    for result_seq, call in sorted(pairing.call_of.items()):
        result = by_seq[result_seq]
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
    return write(store, rows)


def write(store: LogStore, rows: Sequence[NewTrace]) -> list[TraceRow]:
    """Store trace rows and log each: its id and record hash, and an alert (a warning) for a
    ``mismatch`` or an ``invalid`` envelope. Never inputs or outputs.

    Args:
        store: the log.
        rows: the rows to write (from :func:`agenttrail.evidence.traces.trace_row`).

    Returns:
        The rows as stored, with their ids.
    """
    written = store.add_traces(rows)
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
