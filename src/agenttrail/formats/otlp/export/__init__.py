"""Sessions as OpenTelemetry traces (OTLP): GenAI spans a turn at a time, for any OTLP backend.

One ``ExportTraceServiceRequest`` (opentelemetry-proto's own classes) holds one
``ResourceSpans`` per session, and in it, turn by turn (docs/otel.md, Export):

    invoke_agent [{agent}]   INTERNAL  one per turn (a user message and what follows it), the
                                       root of the turn's trace
      chat {model}           CLIENT    one per model call (assistant message)
      execute_tool {name}    INTERNAL  one per tool call, ended by its result

Attributes follow the OpenTelemetry semantic conventions for generative AI, v1.41.0
(``docs/gen-ai/gen-ai-spans.md``: Inference, Execute tool span; ``gen-ai-agent-spans.md``:
Invoke agent internal span; messages per ``gen-ai-input-messages.json``,
``gen-ai-output-messages.json``, ``gen-ai-system-instructions.json``): ``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.conversation.id`` (the session id),
``gen_ai.request.model`` / ``gen_ai.response.model`` (the model the log names, which is the
one that answered), ``gen_ai.response.id``, ``gen_ai.response.finish_reasons`` (the
provider's own), ``gen_ai.usage.input_tokens`` (every prompt token, cached ones included, as
the conventions ask: the log's disjoint ``input + cache_read + cache_write``),
``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
``gen_ai.usage.cache_creation.input_tokens``, ``gen_ai.input.messages`` (the history the call
had), ``gen_ai.output.messages``, ``gen_ai.system_instructions``; ``gen_ai.tool.name``,
``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result`` and
``error.type`` = ``tool_error`` on a failed call. The structured ones are JSON strings, as
the conventions ask where an SDK has no structured span attributes.

Beside them, for backends that read other names: OpenInference's (Arize Phoenix before 15.10:
``openinference.span.kind`` ``AGENT`` / ``LLM`` / ``TOOL``, ``llm.input_messages.N.message.*``,
``llm.output_messages.N.message.*``, ``llm.token_count.prompt`` / ``completion`` / ``total``,
``llm.model_name``, ``llm.provider``, ``input.value`` / ``output.value`` with their mime types,
``tool.name``, ``tool.parameters``, ``session.id``, ``user.id``;
https://github.com/Arize-ai/openinference/blob/main/spec/semantic_conventions.md) and
Langfuse's ``langfuse.session.id`` / ``langfuse.user.id``
(https://langfuse.com/integrations/native/opentelemetry). Every span carries
``agenttrail.seq`` and ``agenttrail.hash`` (hex), the event it was made from, so a span can be
checked against the log; a tool span also carries its result's ``agenttrail.result_seq`` and
``agenttrail.result_hash``.

Ids are derived, never random (:func:`trace_id`, :func:`span_id`): the same session gives the
same trace and span ids every time, so pushing it again sends the same spans. Span times are
the events' ``created_at``: a turn spans its events; a model call ends at its message and
starts ``meta.duration_ms`` before, else at the event before it; a tool call runs from its call
to its result.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

from agenttrail.codec import json_line
from agenttrail.formats.otlp.export._spans import (
    TOOL_ERROR,
    attributes,
    session_spans,
    span_id,
    trace_id,
)
from agenttrail.model import Event, LogReader, Session

__all__ = [
    "SEMCONV_VERSION",
    "TOOL_ERROR",
    "otlp_json",
    "request_from_events",
    "request_from_log",
    "span_id",
    "trace_id",
]

SEMCONV_VERSION = "1.41.0"
"""The OpenTelemetry semantic conventions release the spans follow (the last release with the
GenAI conventions in open-telemetry/semantic-conventions; the ``schema_url`` of each
session's spans)."""

SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

_ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})
"""The bytes fields OTLP/JSON writes as hex, not base64 (the OTLP specification, JSON Protobuf
Encoding: "traceId and spanId … MUST be represented as case-insensitive hex-encoded strings")."""


def _resource_spans(session: Session, events: Iterable[Event]) -> ResourceSpans:
    from agenttrail import __version__

    resource = Resource(attributes=attributes({"service.name": session.agent or "agenttrail"}))
    scope = ScopeSpans(
        scope=InstrumentationScope(name="agenttrail", version=__version__),
        spans=session_spans(session, events),
        schema_url=SCHEMA_URL,
    )
    return ResourceSpans(resource=resource, scope_spans=[scope], schema_url=SCHEMA_URL)


def request_from_events(session: Session, events: Iterable[Event]) -> ExportTraceServiceRequest:
    """One session's spans as an OTLP export request (rules in the module docstring).

    Args:
        session: the session row.
        events: its events in seq order.
    """
    return ExportTraceServiceRequest(resource_spans=[_resource_spans(session, events)])


def request_from_log(reader: LogReader, sessions: Iterable[Session]) -> ExportTraceServiceRequest:
    """The spans of several sessions read from ``reader``, one ``ResourceSpans`` each, in the
    order given."""
    return ExportTraceServiceRequest(
        resource_spans=[_resource_spans(s, reader.read(s.id)) for s in sessions]
    )


def _hex_ids(value: Any) -> Any:
    """``value`` (protobuf's JSON mapping of a request) with every id field in hex."""
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex() if k in _ID_FIELDS else _hex_ids(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def otlp_json(request: ExportTraceServiceRequest) -> str:
    """The OTLP/JSON form of an export request (what an OTLP/HTTP receiver takes with
    ``Content-Type: application/json``), one line.

    protobuf's ``json_format`` writes it; the OTLP specification's two departures from the
    protobuf JSON mapping are then applied: trace and span ids as hex, enums as integers.
    """
    mapped = json_format.MessageToDict(request, use_integers_for_enums=True)
    return json_line(_hex_ids(mapped))
