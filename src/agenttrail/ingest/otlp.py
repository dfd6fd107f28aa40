"""The OTLP receiver's writing half: an OTLP trace export request into the log.

``agenttrail serve`` answers ``POST /v1/traces`` (:mod:`agenttrail.server.routes.otlp`) by
decoding the body (:mod:`agenttrail.formats.otlp`) and calling :func:`append_traces`. The
mapping is the importer's (``agenttrail import`` of OTLP JSON files), and so is the writing:
every payload is checked before the first write, then each session is one transaction whose
events carry idempotency keys, so a span sent twice (an exporter's retry) writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agenttrail.formats.otlp import sessions_from_request
from agenttrail.ingest.importer import ImportReport, write_together
from agenttrail.log.store import LogStore

__all__ = ["SOURCE", "Received", "append_traces"]

SOURCE = Path("otlp")
"""How spans received over OTLP are named in errors and warnings (they have no file)."""


@dataclass(frozen=True)
class Received:
    """What one export request wrote."""

    reports: list[ImportReport]
    """One per session written to: its id, events written and skipped (already stored)."""
    rejected: int = 0
    """Spans refused (missing or malformed ids); the rest were written."""
    errors: list[str] = field(default_factory=list)
    """Why each refused span was refused."""


def append_traces(
    store: LogStore,
    request: ExportTraceServiceRequest,
    *,
    check: Callable[[str], None] | None = None,
) -> Received:
    """Append the sessions an OTLP trace export request maps to.

    Args:
        store: the log.
        request: the decoded request.
        check: called with each session id before anything is written (the server's token
            scope); raising stops the request with nothing written.

    Raises:
        FormatError: a payload that cannot be stored (over the store's payload limit, or not
            encodable); nothing is written.
        StoreError: the database failed; nothing of the request's sessions without an
            envelope is written (they share one transaction).
    """
    mapped = sessions_from_request(request)
    if check is not None:
        for imported in mapped.sessions:
            assert imported.session.id is not None, "OTLP sessions always have an id"
            check(imported.session.id)
    reports = write_together(store, SOURCE, mapped.sessions)
    return Received(reports, mapped.rejected, mapped.errors)
