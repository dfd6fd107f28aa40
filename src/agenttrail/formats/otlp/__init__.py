"""OpenTelemetry traces (OTLP): GenAI spans into sessions of events.

Two ways in share this mapping: ``agenttrail serve``'s OTLP/HTTP receiver (``POST
/v1/traces``, :mod:`agenttrail.ingest.otlp`) and ``agenttrail import`` of OTLP JSON files,
either one ``ExportTraceServiceRequest`` document or JSON Lines of them, as the OTLP JSON file
exporter writes (https://opentelemetry.io/docs/specs/otel/protocol/file-exporter/).

Requests are decoded with the official message classes (``opentelemetry-proto``) and protobuf's
``json_format``; spans are mapped by the OpenTelemetry GenAI semantic conventions
(open-telemetry/semantic-conventions-genai, docs/gen-ai/, commit 002c8a6) and the older shapes
still sent (:mod:`._messages`, :mod:`._spans`). What maps to what: docs/otel.md.
"""

from __future__ import annotations

from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agenttrail.errors import FormatError
from agenttrail.formats._common import (
    ImportedSession,
    decode_text,
    first_line,
    first_line_bytes,
    is_json,
    iter_jsonl,
    json_prefix,
    lead_bytes,
    load_json,
)
from agenttrail.formats.otlp._decode import request_from_json, request_from_protobuf
from agenttrail.formats.otlp._spans import SPAN_TYPE, Mapped, sessions_from_request

__all__ = [
    "NAME",
    "SPAN_TYPE",
    "Mapped",
    "read",
    "request_from_json",
    "request_from_protobuf",
    "sessions_from_request",
    "sniff",
]

NAME = "otlp"

_SNIFF_BYTES = 4096
"""How much of a file :func:`sniff` looks at: the opening of its first request."""


def sniff(path: Path, data: bytes) -> bool:
    """True for JSON whose first object (the whole document, or its first line) has
    ``resourceSpans``: an OTLP ``ExportTraceServiceRequest``."""
    if lead_bytes(data) != b"{":
        return False
    head = json_prefix(first_line_bytes(data), _SNIFF_BYTES)
    return isinstance(head, dict) and ("resourceSpans" in head or "resource_spans" in head)


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read an OTLP JSON file (one request, or one request per line) into sessions.

    Returns:
        One session per conversation (docs/otel.md, Receiver: sessions), events keyed so that
        importing the file again, or a file that repeats spans, writes nothing twice.

    Raises:
        FormatError: not JSON, a line that is not an ``ExportTraceServiceRequest`` (or
            has no ``resourceSpans``), a span without usable ids, or a file of no span;
            names the file, the line and the span.
    """
    combined = ExportTraceServiceRequest()
    if is_json(first_line(decode_text(path, data))) and data.strip().count(b"\n"):
        documents = list(iter_jsonl(path, data))  # the file exporter: a request per line
    else:
        documents = [(1, load_json(path, data))]
    for line, document in documents:
        if isinstance(document, dict) and not {"resourceSpans", "resource_spans"} & document.keys():
            # an empty request is valid OTLP, but a file of them holds no trace to import
            raise FormatError(
                "not an OTLP trace export: no resourceSpans", path=str(path), line=line
            )
        try:
            combined.MergeFrom(request_from_json(document))
        except ValueError as e:
            raise FormatError(str(e), path=str(path), line=line) from None
    mapped = sessions_from_request(combined)
    if mapped.errors:
        raise FormatError(f"span refused: {mapped.errors[0]}", path=str(path))
    if not mapped.sessions:  # valid OTLP, but importing it would say nothing and write nothing
        raise FormatError("an OTLP trace export with no span: nothing to import", path=str(path))
    return mapped.sessions
