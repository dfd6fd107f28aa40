"""OTLP spans into sessions of events, by the OpenTelemetry GenAI semantic conventions.

The conventions read: open-telemetry/semantic-conventions-genai, docs/gen-ai/gen-ai-spans.md,
gen-ai-agent-spans.md and gen-ai-events.md at commit 002c8a6 (status Development; general
conventions v1.41.1), and the shapes before them (``gen_ai.system``, per-message events,
``gen_ai.prompt.N.*``; OpenInference's ``llm.*`` and ``openinference.span.kind``). What maps
to what: docs/otel.md, Receiver.

Sessions: ``gen_ai.conversation.id``, else ``session.id`` (on the span, else on another span
of its trace, else on its resource), else the trace id. Each event has an idempotency key, so
that a span sent twice writes nothing and a history that every inference span repeats is
stored once: a message's key is the tip of the conversation up to it (the digest of every
message before it and itself, :func:`agenttrail.formats._common.prefix_tips`, as live capture
recognises a conversation), a tool call's and a tool result's key is the call's id, and any
other event's is its span's id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from agenttrail.codec import timestamp_from_nanos
from agenttrail.formats._common import ImportedSession, PrefixTips
from agenttrail.formats.otlp._decode import attributes, hex_id
from agenttrail.formats.otlp._messages import (
    History,
    Message,
    input_messages,
    output_messages,
    parsed_arguments,
)
from agenttrail.model import UNDATED, UNDATED_NOTE, NewEvent, NewSession, events

__all__ = ["SPAN_TYPE", "Mapped", "sessions_from_request"]

SPAN_TYPE = "otel_span"
"""The payload type of a span kept verbatim: one no convention maps."""

_SCOPE = "otlp"
"""What the conversation tips of OTLP sessions are seeded with (never a capture's provider)."""

_INFERENCE = {"chat", "text_completion", "generate_content"}
"""``gen_ai.operation.name`` values of inference spans (gen-ai-spans.md, Inference)."""

_OPENINFERENCE_KINDS = {
    "LLM": "chat",
    "TOOL": "execute_tool",
    "RETRIEVER": "retrieval",
    "AGENT": "invoke_agent",
}
"""``openinference.span.kind`` values that mean a GenAI operation."""


@dataclass(frozen=True)
class Mapped:
    """What one export request maps to."""

    sessions: list[ImportedSession]
    """One per session, events in the order they happened (:func:`_in_time_order`)."""
    rejected: int = 0
    """Spans refused (a missing or malformed trace or span id)."""
    errors: list[str] = field(default_factory=list)
    """Why each was refused, naming the span by its place in the request."""


@dataclass
class _Span:
    span: Span
    attrs: dict[str, Any]
    resource: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    trace: str
    id: str


def sessions_from_request(request: ExportTraceServiceRequest) -> Mapped:
    """Map an ``ExportTraceServiceRequest`` to sessions (module docstring: the rules).

    Returns:
        The sessions (their events keyed, ``id`` the conversation, session or trace id, and
        ``metadata.source`` ``"otlp"``), and the spans refused, with why.
    """
    spans, errors = _valid_spans(request)
    by_trace: dict[str, str] = {}
    for s in spans:
        conversation = _conversation(s.attrs)
        if conversation is not None:
            by_trace.setdefault(s.trace, conversation)
    # Traces whose model calls are spans of their own: their agent spans' messages (the
    # user's request, the final answer) are the same messages again, in another history.
    inferred = {s.trace for s in spans if _operation(s) in _INFERENCE}
    grouped: dict[str, list[_Span]] = {}
    for s in spans:
        session_id = (
            _conversation(s.attrs) or by_trace.get(s.trace) or _conversation(s.resource) or s.trace
        )
        grouped.setdefault(session_id, []).append(s)
    sessions = []
    for session_id, members in grouped.items():
        members.sort(key=lambda s: (s.span.start_time_unix_nano, s.span.end_time_unix_nano))
        builder = _Session(inferred)
        for s in members:
            builder.add(s)
        agent = next((a for s in members if (a := _str(s.attrs.get("gen_ai.agent.name")))), None)
        user = next((u for s in members for k in _USER_KEYS if (u := _str(s.attrs.get(k)))), None)
        metadata: dict[str, Any] = {"source": "otlp"}
        service = _str(members[0].resource.get("service.name"))
        if service:
            metadata["service"] = service
        if any(s.attrs.get("agenttrail.undated") == UNDATED_NOTE for s in members):
            metadata[UNDATED] = UNDATED_NOTE  # agenttrail's export of a session of no time
        new = NewSession(session_id, agent=agent, user=user, metadata=metadata)
        sessions.append(ImportedSession(new, _in_time_order(builder.events)))
    return Mapped(sessions, len(errors), errors)


_USER_KEYS = ("user.id", "langfuse.user.id")
"""Span attributes naming the session's user: OpenInference's (semantic_conventions.md,
User) and Langfuse's; the GenAI conventions have none."""


def _in_time_order(found: list[NewEvent]) -> list[NewEvent]:
    """``found`` (in the order their spans started) in the order they happened, when each has
    a time: a tool's result when its span ended, so parallel calls' results keep the order
    they came in; events of one instant keep their order (a stable sort; the times are
    fixed-width UTC text, :func:`agenttrail.codec.timestamp_from_nanos`)."""
    if not all(e.created_at for e in found):
        return found
    return sorted(found, key=lambda e: e.created_at or "")


def _valid_spans(request: ExportTraceServiceRequest) -> tuple[list[_Span], list[str]]:
    spans: list[_Span] = []
    errors: list[str] = []
    for i, resource_spans in enumerate(request.resource_spans):
        resource = attributes(resource_spans.resource.attributes)
        for j, scope_spans in enumerate(resource_spans.scope_spans):
            for k, span in enumerate(scope_spans.spans):
                where = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                problem = _id_problem(span)
                if problem is not None:
                    errors.append(f"{where} ({span.name!r}): {problem}")
                    continue
                spans.append(
                    _Span(
                        span,
                        attributes(span.attributes),
                        resource,
                        [(e.name, attributes(e.attributes)) for e in span.events],
                        hex_id(span.trace_id),
                        hex_id(span.span_id),
                    )
                )
    return spans, errors


def _id_problem(span: Span) -> str | None:
    """Why a span's ids are unusable (OTLP: a 16-byte trace id and an 8-byte span id, neither
    all zeros; opentelemetry-proto trace.proto), or ``None``."""
    for name, value, size in (("traceId", span.trace_id, 16), ("spanId", span.span_id, 8)):
        if not value:
            return f"{name} is missing"
        if len(value) != size:  # in OTLP JSON, 2 hex digits a byte
            return f"{name} must be {size} bytes, {2 * size} hex digits (got {len(value)} bytes)"
        if not any(value):
            return f"{name} is all zero: not a valid id in OTLP"
    return None


def _conversation(attrs: dict[str, Any]) -> str | None:
    return _str(attrs.get("gen_ai.conversation.id")) or _str(attrs.get("session.id"))


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _time(nanos: int) -> str | None:
    return timestamp_from_nanos(nanos) if nanos else None


def _operation(s: _Span) -> str | None:
    operation = _str(s.attrs.get("gen_ai.operation.name"))
    if operation is None:
        operation = _OPENINFERENCE_KINDS.get(str(s.attrs.get("openinference.span.kind")))
    if operation is None and any(
        k.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for k in s.attrs
    ):
        operation = "chat"  # the flattened attributes older instrumentations write
    return operation


class _Session:
    """The events of one session, span by span."""

    def __init__(self, inferred: set[str]) -> None:
        self.inferred = inferred
        """Traces with inference spans (in this request)."""
        self.events: list[NewEvent] = []
        self.keys: set[str] = set()
        self.history: set[str] = set()
        """The keys of the messages read so far (a tool message's results have their own)."""
        self.inputs = History()
        """The inference spans' input messages, read once per conversation."""
        self.tips = PrefixTips(_SCOPE)
        """The tips of their histories, hashed once per conversation."""

    def append(self, payload: dict[str, Any], key: str, time: str | None) -> None:
        # The store would skip a key already written too; skipping it here spares encoding
        # the history that every inference span of a request repeats.
        if key not in self.keys:
            self.keys.add(key)
            self.events.append(NewEvent(payload, time, key))

    def add(self, s: _Span) -> None:
        operation = _operation(s)
        time = _time(s.span.start_time_unix_nano)
        if operation == "invoke_agent":
            # The agent's name is the session's (gen-ai-agent-spans.md); its messages are kept
            # only when no inference span of its trace says them too.
            if s.trace not in self.inferred:
                inputs = input_messages(s.attrs, s.events)
                outputs = output_messages(s.attrs, s.events)
                self.conversation(s, inputs, outputs, time, inference=False)
            self.failure(s, time)
        elif operation in _INFERENCE:
            inputs = input_messages(s.attrs, s.events, self.inputs)
            outputs = output_messages(s.attrs, s.events)
            if inputs or outputs:
                self.conversation(s, inputs, outputs, time, inference=True)
            else:
                self.verbatim(s, time)
            self.failure(s, time)
        elif operation == "execute_tool":
            self.tool(s, time)
        elif operation == "retrieval":
            self.retrieval(s, time)
        elif operation == "search_memory":
            self.memory(s, time)
        else:
            self.verbatim(s, time)

    def conversation(
        self,
        s: _Span,
        inputs: list[Message],
        outputs: list[Message],
        time: str | None,
        *,
        inference: bool,
    ) -> None:
        """The messages of an inference (or agent) span not yet stored, and its answer."""
        history = inputs + outputs[:1]
        tips = self.tips([m.print for m in history])
        for message, tip in zip(inputs, tips, strict=False):
            key = f"otlp:m:{tip}"
            if key not in self.history:  # the history an earlier span of the request sent
                self.history.add(key)
                self.message(message, key, time)
        end = _time(s.span.end_time_unix_nano) or time
        meta = _meta(s) if inference else None
        for c, message in enumerate(outputs):
            key = f"otlp:m:{tips[-1]}" if c == 0 else f"otlp:m:{tips[-1]}:{c}"
            self.history.add(key)
            self.message(message, key, end, meta=meta, choice=c if len(outputs) > 1 else None)

    def message(
        self,
        message: Message,
        key: str,
        time: str | None,
        *,
        meta: Any = None,
        choice: int | None = None,
    ) -> None:
        if message.role == "tool" or message.results:
            for n, (call_id, output) in enumerate(message.results):
                result_key = f"otlp:r:{call_id}" if call_id else f"{key}:r{n}"
                self.append(events.tool_result(call_id, output=output), result_key, time)
            return
        blocks = list(message.blocks) or None
        payload = events.message(
            message.role,
            message.text,
            meta=meta,
            finishReason=message.finish_reason,
            choice=choice,
            blocks=blocks,
            order=events.block_order(message.order) if blocks else None,
        )
        self.append(payload, key, time)
        for j, call in enumerate(message.calls):
            call_key = f"otlp:c:{call.id}" if call.id else f"{key}:c{j}"
            payload = events.tool_call(call.id, call.name, call.input, arguments=call.arguments)
            self.append(payload, call_key, time)

    def failure(self, s: _Span, time: str | None) -> None:
        """An ``error`` event for a span that ended in an error (Recording Errors)."""
        kind = _str(s.attrs.get("error.type"))
        if s.span.status.code != Status.STATUS_CODE_ERROR and kind is None:
            return
        text = s.span.status.message or kind or "the operation failed"
        payload = events.error(text, code=kind, source="otlp")
        self.append(payload, f"otlp:e:{s.trace}:{s.id}", _time(s.span.end_time_unix_nano))

    def tool(self, s: _Span, time: str | None) -> None:
        """An ``execute_tool`` span (gen-ai-spans.md, Execute tool span): the call, then its
        result or error."""
        a = s.attrs
        call_id = (
            _str(a.get("gen_ai.tool.call.id"))
            or _str(a.get("tool_call.id"))
            or (_str(a.get("tool.id")))
        )
        name = _str(a.get("gen_ai.tool.name")) or _str(a.get("tool.name")) or s.span.name
        raw = a.get("gen_ai.tool.call.arguments", a.get("tool.parameters", a.get("input.value")))
        parsed, text = parsed_arguments(raw)
        output = a.get("gen_ai.tool.call.result", a.get("output.value"))
        ident = call_id or f"span:{s.trace}:{s.id}"
        self.append(events.tool_call(ident, name, parsed, arguments=text), f"otlp:c:{ident}", time)
        if "agenttrail.seq" in a and "agenttrail.result_seq" not in a:
            return  # agenttrail's export of a call the log holds no result of
        kind = _str(a.get("error.type"))
        failed = s.span.status.code == Status.STATUS_CODE_ERROR or kind is not None
        error = (s.span.status.message or kind or "the tool failed") if failed else None
        result = events.tool_result(ident, name, output=output, error=error, errorType=kind)
        self.append(result, f"otlp:r:{ident}", _time(s.span.end_time_unix_nano))

    def retrieval(self, s: _Span, time: str | None) -> None:
        """A ``retrieval`` span (or OpenInference ``RETRIEVER``) as a ``rag`` event."""
        documents = _records(s.attrs, "gen_ai.retrieval.documents", "retrieval.documents.")
        store = _str(s.attrs.get("gen_ai.data_source.id")) or s.span.name
        scores = [d["score"] for d in documents if isinstance(d.get("score"), int | float)]
        payload = events.rag(store, len(documents), max(scores) if scores else None)
        self.append(payload, f"otlp:s:{s.trace}:{s.id}", time)

    def memory(self, s: _Span, time: str | None) -> None:
        """A ``search_memory`` span (gen-ai-spans.md, Memory) as a ``recall`` event."""
        records = _records(s.attrs, "gen_ai.memory.records", "")
        store = _str(s.attrs.get("gen_ai.memory.store.id"))
        results = [{"id": r.get("id"), "source": store, "score": r.get("score")} for r in records]
        self.append(events.recall(results), f"otlp:s:{s.trace}:{s.id}", time)

    def verbatim(self, s: _Span, time: str | None) -> None:
        """A span no convention maps, kept whole as an event of its own shape."""
        span = s.span
        payload = {
            "type": SPAN_TYPE,
            "name": span.name,
            "traceId": s.trace,
            "spanId": s.id,
            "parentSpanId": hex_id(span.parent_span_id) or None,
            "kind": Span.SpanKind.Name(span.kind),
            "startTimeUnixNano": span.start_time_unix_nano,
            "endTimeUnixNano": span.end_time_unix_nano,
            "attributes": s.attrs,
            "events": [{"name": name, "attributes": a} for name, a in s.events],
            "status": {
                "code": Status.StatusCode.Name(span.status.code),
                "message": span.status.message,
            },
            "resource": s.resource,
        }
        self.append(payload, f"otlp:s:{s.trace}:{s.id}", time)


def _records(attrs: dict[str, Any], name: str, flattened: str) -> list[dict[str, Any]]:
    """Retrieved documents or memory records: the structured attribute (or its JSON text),
    else OpenInference's ``retrieval.documents.N.document.*``."""
    value = attrs.get(name)
    if isinstance(value, str):
        value, _ = parsed_arguments(value)
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    found: dict[int, dict[str, Any]] = {}
    if flattened:
        for key, item in attrs.items():
            if key.startswith(flattened):
                index, _, rest = key[len(flattened) :].partition(".")
                if index.isdigit():
                    found.setdefault(int(index), {})[rest.removeprefix("document.")] = item
    return [found[i] for i in sorted(found)]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _meta(s: _Span) -> dict[str, Any]:
    """Model, provider, usage and duration of an inference span (gen-ai-spans.md, Inference;
    ``gen_ai.system`` before ``gen_ai.provider.name``; OpenInference ``llm.*``)."""
    a = s.attrs
    model = next(
        (
            m
            for k in ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
            if (m := _str(a.get(k)))
        ),
        None,
    )
    provider = next(
        (
            p
            for k in ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
            if (p := _str(a.get(k)))
        ),
        None,
    )
    given = _int(a.get("gen_ai.usage.input_tokens", a.get("llm.token_count.prompt")))
    output = _int(a.get("gen_ai.usage.output_tokens", a.get("llm.token_count.completion")))
    cache_read = _int(
        a.get(
            "gen_ai.usage.cache_read.input_tokens",
            a.get("llm.token_count.prompt_details.cache_read"),
        )
    )
    cache_write = _int(a.get("gen_ai.usage.cache_creation.input_tokens"))
    usage = None
    if given is not None or output is not None:
        # The conventions count cached tokens inside input_tokens; agenttrail's kinds are
        # disjoint (model.events.usage).
        plain = None if given is None else given - (cache_read or 0) - (cache_write or 0)
        usage = events.usage(plain, output, cache_read, cache_write)
    span = s.span
    duration = (
        (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6
        if span.end_time_unix_nano
        else None
    )
    if "agenttrail.seq" in a:  # agenttrail's export: its length is a duration only when said
        recorded = a.get("agenttrail.duration_ms")
        number = isinstance(recorded, int | float) and not isinstance(recorded, bool)
        duration = recorded if number else None
    return events.meta(
        model=model, provider=provider, usage=usage, duration_ms=duration, location="remote"
    )
