"""The OTLP/HTTP receiver (``POST /v1/traces``) on a real uvicorn on loopback, fed by the real
OpenTelemetry SDK and its OTLP exporters, and by the real OpenAI instrumentations driving the
real ``openai`` client against the loopback replay server (tests/ingest/_upstream.py)."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
from opentelemetry.exporter.otlp.json.http.trace_exporter import (  # type: ignore[import-untyped]
    OTLPSpanExporter as JsonSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from agenttrail.formats.otlp.export import request_from_log
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import Event
from agenttrail.server import create_app, mint_token
from tests.conftest import serving
from tests.formats._recordings import CASSETTES, REALDATA, TOOL_ERROR, import_events
from tests.ingest._upstream import KEY, TOOL_LOOP, Upstream, recorded, upstream

SECRET = b"test-secret-not-for-production-0123456789abcdef"
LIMIT = 256 * 1024
"""The served app's body limit (bytes): small, so that the 413 tests send little."""

pytestmark = pytest.mark.filterwarnings(
    "ignore:The model .* is deprecated:DeprecationWarning",
    "ignore::DeprecationWarning:opentelemetry.*",
)


class Receiver:
    """A served app: its URL, its store, a token."""

    def __init__(self, url: str, store: LogStore) -> None:
        self.url = url
        self.store = store
        self.token = mint_token(SECRET, rights=["append", "read"])

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def post(self, body: bytes, content_type: str, **headers: str) -> httpx.Response:
        wanted = {**self.headers, "Content-Type": content_type, **headers}
        return httpx.post(f"{self.url}/v1/traces", content=body, headers=wanted, timeout=30)

    def session_events(self) -> list[Event]:
        [session] = self.store.sessions()
        return list(self.store.read(session.id))


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    store = open_store(tmp_path / "otlp.db")
    app = create_app(store, secret=SECRET, max_body_bytes=LIMIT)
    try:
        with serving(app) as port:
            yield Receiver(f"http://127.0.0.1:{port}", store)
    finally:
        store.close()


@pytest.fixture(scope="module")
def up_server() -> Iterator[Upstream]:
    yield from upstream()


def provider_to(exporter: SpanExporter) -> TracerProvider:
    """A tracer provider exporting in batches (the SDK's usual set-up; shutdown sends the
    last batch): a trace's spans reach the receiver together."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def conversation(found: list[Event]) -> list[tuple[Any, ...]]:
    """The message and tool events, as compared: what was said, asked and answered."""
    out: list[tuple[Any, ...]] = []
    for event in found:
        p = event.payload
        if p["type"] == "message":
            out.append(("message", p["role"], p["content"]))
        elif p["type"] == "tool_call":
            out.append(("tool_call", p["id"], p["name"], p["input"]))
        elif p["type"] == "tool_result":
            out.append(("tool_result", p.get("toolCallId"), p.get("output")))
    return out


STREAMED = CASSETTES / "test_chat_completion_multiple_tools_streaming_with_content.yaml"
"""The same tool loop, streamed: each call's arguments arrive in fragments."""


def replay(up: Upstream, provider: TracerProvider, recording: Path) -> None:
    """The Chat Completions calls of a recording through the real client (streams read to
    their end), under one ``invoke_agent`` span (one trace, so one session)."""
    items = recorded(recording)
    up.replies.clear()
    up.script(*(item.reply for item in items))
    client = openai.OpenAI(base_url=f"{up.url}/v1", api_key=KEY, max_retries=0)
    tracer = provider.get_tracer("agent")
    with client, tracer.start_as_current_span("invoke_agent weather") as span:
        span.set_attribute("gen_ai.operation.name", "invoke_agent")
        span.set_attribute("gen_ai.agent.name", "weather")
        for item in items:
            answer = client.chat.completions.create(**item.body)
            if item.body.get("stream"):
                list(answer)


def instrumented(instrumentor: Any, exporter: SpanExporter, up: Upstream, recording: Path) -> None:
    """``recording`` replayed through the real client with ``instrumentor`` on, its spans
    sent by ``exporter`` (the last batch on shutdown)."""
    provider = provider_to(exporter)
    instrumentor.instrument(tracer_provider=provider)
    try:
        replay(up, provider, recording)
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


@pytest.mark.parametrize("recording", [TOOL_LOOP, STREAMED], ids=lambda p: p.stem)
def test_openai_v2_spans_make_the_session_import_makes(
    receiver: Receiver,
    up_server: Upstream,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    recording: Path,
) -> None:
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    # The instrumentation's opt-in to the current conventions, messages on the span.
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    exporter = OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces", headers=receiver.headers)
    instrumented(OpenAIInstrumentor(), exporter, up_server, recording)
    got = receiver.session_events()
    with open_store(tmp_path / "import.db") as other:
        imported = import_events(other, recording)
    assert conversation(got) == conversation(imported)
    [session] = receiver.store.sessions()
    assert session.agent == "weather"
    # model, usage and finish reason as the recorded responses give them (the importer reads
    # them from the response bodies; the receiver from the instrumentation's attributes)
    assert answers(got) == answers(imported)
    if recording == TOOL_LOOP:  # the two responses' usage, read off the cassette
        assert [a[1:3] for a in answers(got)] == [(75, 51), (99, 25)]


def answers(found: list[Event]) -> list[tuple[Any, ...]]:
    """Each assistant message's model, input and output tokens, and finish reason."""
    return [
        (
            e.payload["meta"]["model"],
            e.payload["meta"]["usage"]["input"],
            e.payload["meta"]["usage"]["output"],
            e.payload.get("finishReason"),
        )
        for e in found
        if e.type == "message" and e.payload["role"] == "assistant"
    ]


@pytest.mark.parametrize("recording", [TOOL_LOOP, STREAMED], ids=lambda p: p.stem)
def test_openinference_spans_make_the_session_import_makes(
    receiver: Receiver, up_server: Upstream, tmp_path: Path, recording: Path
) -> None:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    exporter = JsonSpanExporter(endpoint=f"{receiver.url}/v1/traces", headers=receiver.headers)
    instrumented(OpenAIInstrumentor(), exporter, up_server, recording)
    with open_store(tmp_path / "import.db") as other:
        imported = import_events(other, recording)
    assert conversation(receiver.session_events()) == conversation(imported)
    assert answers(receiver.session_events()) == answers(imported)


def agent_run(provider: TracerProvider) -> None:
    """An agent's spans by the current conventions, written with the SDK: a chat span, a
    tool span, a retrieval, a memory search, and a span of no convention."""
    tracer = provider.get_tracer("agent")
    question = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
    call = {
        "type": "tool_call",
        "id": "call_1",
        "name": "get_weather",
        "arguments": {"location": "Paris"},
    }
    with tracer.start_as_current_span("invoke_agent planner") as agent:
        agent.set_attributes(
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "conv-1"}
        )
        with tracer.start_as_current_span("chat gpt-4o") as chat:
            chat.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.system_instructions": json.dumps(
                        [{"type": "text", "content": "Be brief."}]
                    ),
                    "gen_ai.input.messages": json.dumps(question),
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [call], "finish_reason": "tool_call"}]
                    ),
                    "gen_ai.usage.input_tokens": 20,
                    "gen_ai.usage.output_tokens": 5,
                }
            )
        with tracer.start_as_current_span("execute_tool get_weather") as tool:
            tool.set_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.id": "call_1",
                    "gen_ai.tool.call.arguments": '{"location": "Paris"}',
                    "gen_ai.tool.call.result": "rainy, 57°F",
                }
            )
        with tracer.start_as_current_span("retrieval docs") as retrieval:
            retrieval.set_attributes(
                {
                    "gen_ai.operation.name": "retrieval",
                    "gen_ai.data_source.id": "docs",
                    "gen_ai.retrieval.documents": json.dumps(
                        [{"id": "a", "score": 0.9}, {"id": "b", "score": 0.4}]
                    ),
                }
            )
        with tracer.start_as_current_span("search_memory") as memory:
            memory.set_attributes(
                {
                    "gen_ai.operation.name": "search_memory",
                    "gen_ai.memory.store.id": "prefs",
                    "gen_ai.memory.records": json.dumps([{"id": "m1", "score": 0.7}]),
                }
            )
        with tracer.start_as_current_span("GET /weather") as http:
            http.set_attributes({"http.request.method": "GET", "vendor.unknown": [1, 2]})


def test_an_empty_request_is_answered_200_and_writes_nothing(receiver: Receiver) -> None:
    # OTLP/HTTP: a request of no span is valid and succeeds (what `import` refuses as holding
    # nothing to import is, to a receiver, an exporter with nothing to send)
    answer = receiver.post(b'{"resourceSpans": []}', "application/json")
    assert answer.status_code == 200
    assert receiver.store.sessions() == []


def test_every_kind_of_span_maps_to_its_event(receiver: Receiver) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces", headers=receiver.headers)
    provider = provider_to(exporter)
    agent_run(provider)
    provider.shutdown()
    got = receiver.session_events()
    kinds = [(e.type, e.payload.get("role")) for e in got]
    assert kinds == [
        ("message", "system"),
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", None),
        ("tool_result", None),
        ("rag", None),
        ("recall", None),
        ("otel_span", None),
    ]
    by_type = {e.type: e.payload for e in got}
    assert by_type["tool_result"]["toolCallId"] == "call_1"
    assert by_type["tool_result"]["output"] == "rainy, 57°F"
    assert (by_type["rag"]["store"], by_type["rag"]["chunks"], by_type["rag"]["top_score"]) == (
        "docs",
        2,
        0.9,
    )
    assert by_type["recall"]["results"] == [{"id": "m1", "source": "prefs", "score": 0.7}]
    # the span of no convention is kept whole, unknown attributes and all
    assert by_type["otel_span"]["attributes"] == {
        "http.request.method": "GET",
        "vendor.unknown": [1, 2],
    }
    [session] = receiver.store.sessions()
    assert session.metadata.get("sourceSessionId", session.id) == "conv-1"


def one_span_request(**span: Any) -> ExportTraceServiceRequest:
    fields = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "chat gpt-4o",
        "startTimeUnixNano": "1700000000000000000",
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
    }
    fields.update(span)
    from agenttrail.formats.otlp import request_from_json

    return request_from_json({"resourceSpans": [{"scopeSpans": [{"spans": [fields]}]}]})


def test_the_same_request_twice_writes_once_and_gzip_is_read(receiver: Receiver) -> None:
    body = one_span_request().SerializeToString()
    first = receiver.post(body, "application/x-protobuf")
    again = receiver.post(
        gzip.compress(body), "application/x-protobuf", **{"Content-Encoding": "gzip"}
    )
    assert first.status_code == again.status_code == 200
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(again.content)
    assert answer.partial_success.rejected_spans == 0
    assert len(receiver.session_events()) == 1


def test_spans_without_ids_are_rejected_and_the_others_written(receiver: Receiver) -> None:
    request = one_span_request()
    for _ in range(12):
        bad = request.resource_spans[0].scope_spans[0].spans.add()
        bad.name = "no ids"
    response = receiver.post(request.SerializeToString(), "application/x-protobuf")
    assert response.status_code == 200
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(response.content)
    assert answer.partial_success.rejected_spans == 12
    message = answer.partial_success.error_message
    assert message.startswith("resourceSpans[0].scopeSpans[0].spans[1] ('no ids'): traceId is")
    assert message.endswith("; and 2 more")
    assert len(receiver.session_events()) == 1


@pytest.mark.parametrize(
    ("body", "content_type", "headers", "status", "detail"),
    [
        (
            b"\xff\xff\xff",
            "application/x-protobuf",
            {},
            400,
            "not an OTLP ExportTraceServiceRequest",
        ),
        (b"{", "application/json", {}, 400, "body is not JSON"),
        (b'{"resourceSpans": 3}', "application/json", {}, 400, "resourceSpans"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 1}]}]}]}',
            "application/json",
            {},
            400,
            "resourceSpans[0].scopeSpans[0].spans[0].traceId: expected a hex string, not int",
        ),
        (b"x", "text/plain", {}, 415, "'text/plain' is not OTLP"),
        (b"x", "application/x-protobuf", {"Content-Encoding": "br"}, 415, "'br'"),
        (b"not gzip", "application/x-protobuf", {"Content-Encoding": "gzip"}, 400, "not gzip"),
        (
            gzip.compress(b"\0" * (LIMIT + 1)),
            "application/x-protobuf",
            {"Content-Encoding": "gzip"},
            413,
            "above the limit",
        ),
        (b"\0" * (LIMIT + 1), "application/x-protobuf", {}, 413, "above the limit"),
    ],
    ids=["protobuf", "json", "json-shape", "id", "type", "encoding", "gzip", "gzip-bomb", "size"],
)
def test_bad_input_is_a_problem_naming_it_and_writes_nothing(
    receiver: Receiver,
    body: bytes,
    content_type: str,
    headers: dict[str, str],
    status: int,
    detail: str,
) -> None:
    response = receiver.post(body, content_type, **headers)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert detail in response.json()["detail"]
    assert receiver.store.sessions() == []


def test_no_token_is_401(receiver: Receiver) -> None:
    body = one_span_request().SerializeToString()
    response = httpx.post(
        f"{receiver.url}/v1/traces",
        content=body,
        headers={"Content-Type": "application/x-protobuf"},
    )
    assert response.status_code == 401
    assert "bearer token" in response.json()["detail"]
    assert receiver.store.sessions() == []


def test_an_otlp_json_file_imports_as_the_receiver_writes(
    receiver: Receiver, tmp_path: Path
) -> None:
    path = tmp_path / "traces.jsonl"
    provider = provider_to(FileSpanExporter(path))
    agent_run(provider)
    provider.shutdown()
    with open_store(tmp_path / "import.db") as store:
        [report] = import_paths(store, [path])
        imported = list(store.read(report.session_id))
        [again] = import_paths(store, [path])
        assert again.written == 0
    exporter = OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces", headers=receiver.headers)
    provider = provider_to(exporter)
    agent_run(provider)
    provider.shutdown()
    assert [(e.type, e.payload.get("role")) for e in imported] == [
        (e.type, e.payload.get("role")) for e in receiver.session_events()
    ]
    assert conversation(imported) == conversation(receiver.session_events())


def test_a_token_scoped_to_another_session_writes_nothing(receiver: Receiver) -> None:
    receiver.token = mint_token(SECRET, rights=["append"], session="another")
    response = receiver.post(one_span_request().SerializeToString(), "application/x-protobuf")
    assert response.status_code == 403
    assert "scoped to session 'another'" in response.json()["detail"]
    assert receiver.store.sessions() == []


@pytest.mark.parametrize(
    "recording",
    [TOOL_LOOP, TOOL_ERROR, REALDATA / "claude-code-simonw" / "sample_session.jsonl"],
    ids=lambda p: p.stem,
)
def test_a_session_exported_as_otlp_comes_back_through_the_receiver(
    receiver: Receiver, tmp_path: Path, recording: Path
) -> None:
    # export -> our receiver -> the same session: same id, and what was said, asked and
    # answered, in the same order (the spans carry the history; the receiver stores it once).
    with open_store(tmp_path / "source.db") as source:
        original = import_events(source, recording)
        session = source.get_session(original[0].session_id)
        request = request_from_log(source, [session])
    answer = receiver.post(request.SerializeToString(), "application/x-protobuf")
    assert answer.status_code == 200, answer.text
    received = receiver.session_events()
    assert received[0].session_id == session.id
    assert conversation(received) == conversation(original)


def test_a_session_pushed_back_to_the_log_it_is_in_is_refused(receiver: Receiver) -> None:
    # `agenttrail push` to the server whose log holds the session: the receiver added every
    # span's event beside the originals (its usage counted twice, then three times), where
    # `agenttrail import` of the same export is refused (docs/otel.md).
    original = import_events(receiver.store, TOOL_LOOP)
    session = receiver.store.get_session(original[0].session_id)
    request = request_from_log(receiver.store, [session])
    answer = receiver.post(request.SerializeToString(), "application/x-protobuf")
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == (
        f"session {session.id} already holds {len(original)} events no otlp import wrote, so "
        "these spans' events would be added beside them (twice, if the spans are their "
        "export: agenttrail push to the log the session is in); send them to another log"
    )
    assert list(receiver.store.read(session.id)) == original


def test_a_span_over_the_payload_limit_is_a_413_naming_its_event(tmp_path: Path) -> None:
    # it was a 422 naming "event 2" alone (of which session? which span?), where the docs
    # promise a 413 for a payload over the limit, with the limit
    limit = 4096
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": "y" * 10_000}]}]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": "conv-big",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
        ),
        "gen_ai.output.messages": json.dumps(answer),
    }
    request = one_span_request(
        attributes=[{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()]
    )
    with open_store(tmp_path / "small.db", max_payload_bytes=limit) as store:
        app = create_app(store, secret=SECRET, max_body_bytes=LIMIT)
        with serving(app) as port:
            receiver = Receiver(f"http://127.0.0.1:{port}", store)
            response = receiver.post(request.SerializeToString(), "application/x-protobuf")
        assert response.status_code == 413, response.text
        problem = response.json()
        assert problem["limit"] == limit
        said = re.fullmatch(
            r"otlp: event 2 of session conv-big \(assistant message at "
            r"2023-11-14T22:13:20\.000000Z\): payload is ([\d,]+) bytes of CBOR, above the limit "
            r"of 4,096 bytes \(max_payload_bytes / AGENTTRAIL_MAX_PAYLOAD_BYTES\)",
            problem["detail"],
        )
        assert said is not None, problem["detail"]
        assert int(said[1].replace(",", "")) > 10_000  # the answer's text alone
        assert store.sessions() == []
