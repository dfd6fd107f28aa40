"""``POST /v1/traces``: the OTLP/HTTP trace receiver (https://opentelemetry.io/docs/specs/otlp/
#otlphttp).

A body is an ``ExportTraceServiceRequest`` in binary protobuf (``application/x-protobuf``) or
OTLP JSON (``application/json``), optionally gzip-compressed (``Content-Encoding: gzip``); the
answer is an ``ExportTraceServiceResponse`` in the same encoding, with ``partial_success``
counting the spans refused. The token needs the ``append`` right (for every session written,
when it is scoped to one). Bad input is an RFC 9457 problem and writes nothing: 400 for a body
that does not decode, 415 for another content type or encoding, 413 above the body limit (the
decompressed size counts too), 401 without a token (the guard, before the body is read).
The mapping of spans to events: docs/otel.md.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from fastapi import APIRouter, Request, Response
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from agenttrail.errors import BodyTooLarge, Forbidden, MalformedBody, UnsupportedMediaType
from agenttrail.formats._common import JSONValueError, loads
from agenttrail.formats.otlp import request_from_json, request_from_protobuf
from agenttrail.ingest.importer import fitting_id
from agenttrail.ingest.otlp import append_traces
from agenttrail.server._deps import Auth, HubDep, Store, run

__all__ = ["JSON", "PROTOBUF", "REJECTIONS_SHOWN", "router"]

router = APIRouter()

PROTOBUF = "application/x-protobuf"
"""The binary encoding's media type (OTLP/HTTP, Binary Protobuf Encoding)."""

JSON = "application/json"
"""The JSON encoding's media type (OTLP/HTTP, JSON Protobuf Encoding)."""

REJECTIONS_SHOWN = 10
"""Refused spans named in ``partial_success.error_message``; the rest are counted. A batch
of thousands of spans without ids would otherwise answer with a message of the same size."""


@router.post("/v1/traces", response_model=None)
async def receive_traces(request: Request, auth: Auth, store: Store, hub: HubDep) -> Response:
    """Receive spans from an OpenTelemetry exporter and append the sessions they map to."""
    auth.require("append")
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in (PROTOBUF, JSON):
        raise UnsupportedMediaType(
            f"Content-Type {media or '(none)'!r} is not OTLP: send {PROTOBUF} or {JSON}"
        )
    limit: int = request.app.state.max_body_bytes
    body = _decompressed(await request.body(), request.headers.get("content-encoding"), limit)
    traces = _decoded(body, media)

    def check(session_id: str) -> None:
        if not (auth.covers(session_id) or auth.covers(fitting_id(session_id))):
            raise Forbidden(f"this token is scoped to session {auth.session!r}")

    received = await run(append_traces, store, traces, check=check)
    for report in received.reports:
        await hub.sync(report.session_id)
    answer = ExportTraceServiceResponse()
    if received.rejected:
        answer.partial_success.rejected_spans = received.rejected
        shown = received.errors[:REJECTIONS_SHOWN]
        more = received.rejected - len(shown)
        answer.partial_success.error_message = "; ".join(
            shown + ([f"and {more} more"] if more > 0 else [])
        )
    if media == PROTOBUF:
        return Response(answer.SerializeToString(), media_type=PROTOBUF)
    text = json_format.MessageToJson(answer, indent=None)
    return Response(text, media_type=JSON)


def _decompressed(body: bytes, encoding: str | None, limit: int) -> bytes:
    """The body with its ``Content-Encoding`` undone, at most ``limit`` bytes of it.

    Raises:
        UnsupportedMediaType: an encoding other than gzip (or none).
        MalformedBody: not gzip.
        BodyTooLarge: more than ``limit`` bytes once decompressed.
    """
    coding = (encoding or "identity").strip().lower()
    if coding == "identity":
        return body
    if coding != "gzip":
        raise UnsupportedMediaType(
            f"Content-Encoding {coding!r} is not supported: send gzip or none"
        )
    inflater = zlib.decompressobj(wbits=31)  # 31: the gzip wrapper (RFC 1952)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as e:
        raise MalformedBody(f"body is not gzip ({e})") from None
    if len(data) > limit:
        raise BodyTooLarge(limit)
    if not inflater.eof:
        raise MalformedBody("gzip body ends before its end (truncated)")
    return data


def _decoded(body: bytes, media: str) -> ExportTraceServiceRequest:
    """The request in ``body``, of type ``media``.

    Raises:
        MalformedBody: the body is not an ``ExportTraceServiceRequest`` in that encoding;
            names what was wrong.
    """
    try:
        if media == PROTOBUF:
            return request_from_protobuf(body)
        document: Any = loads(body.decode("utf-8"))
        return request_from_json(document)
    except UnicodeDecodeError as e:
        raise MalformedBody(f"JSON body is not UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise MalformedBody(
            f"body is not JSON: {e.msg} (line {e.lineno}, column {e.colno})"
        ) from None
    except (JSONValueError, ValueError) as e:
        raise MalformedBody(str(e)) from None
