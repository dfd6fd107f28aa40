"""``agenttrail export --format otlp`` on real recordings, read back with opentelemetry-proto's
own classes and checked against the OpenTelemetry GenAI semantic conventions (v1.41.0) and
against the recordings themselves.

The oracles are independent of the export: attribute names and well-known values come from
the ``opentelemetry-semantic-conventions`` package; the message lists, token counts and tool
calls each model call had are read here from the third-party files (their request and
response bodies), not from agenttrail; every span's hash is compared with the stored event's.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.semconv._incubating.attributes import error_attributes as error_attrs
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

from agenttrail.log.store import open_store
from agenttrail.model import NewEvent, NewSession, events
from tests.conftest import REALDATA, run_cli

OPENAI = REALDATA / "otel-openai-v2-cassettes" / "test_chat_completion_tool_calls_with_content.yaml"
ANTHROPIC = REALDATA / "anthropic-sdk-python" / "10e53c1d-51be-4c64-b5bf-99adb3fa4719.json"
CLAUDE_CODE = REALDATA / "claude-code-simonw" / "sample_session.jsonl"
TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"

GEN_AI_NAMES = {
    value
    for module in (gen_ai, error_attrs)
    for name, value in vars(module).items()
    if name.isupper() and isinstance(value, str)
}
"""Every attribute name the conventions package defines (gen_ai.*, error.type)."""

PROVIDERS = {v.value for v in gen_ai.GenAiProviderNameValues}
ROLES = {"system", "user", "assistant", "tool"}  # gen-ai-input-messages.json, Role


def _import(path: Path, db: Path) -> str:
    result = run_cli("import", str(path), "--db", str(db))
    assert result.returncode == 0, result.stderr
    (session,) = result.stdout.split()
    return session


def _export(session: str, db: Path) -> str:
    result = run_cli("export", session, "--format", "otlp", "--db", str(db))
    assert result.returncode == 0, result.stderr
    return result.stdout


def decode(text: str) -> ExportTraceServiceRequest:
    """OTLP/JSON read with the official classes: hex ids (the OTLP spec) back to the protobuf
    JSON mapping's base64, then protobuf's own parser."""

    def unhex(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: base64.b64encode(bytes.fromhex(v)).decode()
                if k in ("traceId", "spanId", "parentSpanId")
                else unhex(v)
                for k, v in value.items()
            }
        return [unhex(v) for v in value] if isinstance(value, list) else value

    return json_format.ParseDict(unhex(json.loads(text)), ExportTraceServiceRequest())


def attrs(span: Span) -> dict[str, Any]:
    """A span's attributes as Python values."""
    found: dict[str, Any] = {}
    for kv in span.attributes:
        kind = kv.value.WhichOneof("value")
        if kind == "array_value":
            found[kv.key] = [v.string_value for v in kv.value.array_value.values]
        else:
            found[kv.key] = getattr(kv.value, kind)
    return found


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    return [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def _check_messages(messages: list[dict[str, Any]], *, output: bool) -> None:
    """The shape of gen-ai-input-messages.json / gen-ai-output-messages.json (v1.41.0)."""
    for message in messages:
        assert message["role"] in ROLES
        assert isinstance(message["parts"], list)
        if output:
            assert isinstance(message["finish_reason"], str)
        for part in message["parts"]:
            assert isinstance(part["type"], str)
            if part["type"] in ("text", "reasoning"):
                assert isinstance(part["content"], str)
            if part["type"] == "tool_call":
                assert isinstance(part["name"], str) and part["name"]
            if part["type"] == "tool_call_response":
                assert "response" in part


def check_conventions(request: ExportTraceServiceRequest, db: Path, session: str) -> list[Span]:
    """What every export must be: the structure, names, kinds and required attributes of the
    conventions, and every span tied to its event in the log by seq and hash."""
    spans = spans_of(request)
    with open_store(db) as store:
        hashes = {e.seq: e.hash.hex() for e in store.read(session)}
    roots = {s.span_id: s for s in spans if not s.parent_span_id}
    assert len({s.span_id for s in spans}) == len(spans)
    assert len({s.trace_id for s in roots.values()}) == len(roots)
    for span in spans:
        a = attrs(span)
        operation = a["gen_ai.operation.name"]
        assert {k for k in a if k.startswith("gen_ai.")} <= GEN_AI_NAMES
        assert a["agenttrail.hash"] == hashes[a["agenttrail.seq"]]
        if "agenttrail.result_seq" in a:
            assert a["agenttrail.result_hash"] == hashes[a["agenttrail.result_seq"]]
        assert a["gen_ai.conversation.id"] == a["session.id"] == session
        assert a["langfuse.session.id"] == session
        assert span.start_time_unix_nano <= span.end_time_unix_nano
        if operation == "invoke_agent":  # gen-ai-agent-spans.md, Invoke agent internal span
            assert span.span_id in roots
            assert span.kind == Span.SPAN_KIND_INTERNAL
            assert span.name in ("invoke_agent", f"invoke_agent {a.get('gen_ai.agent.name')}")
            assert a["openinference.span.kind"] == "AGENT"
            # tokens are the model calls': a backend summing every span counts each once
            assert not [k for k in a if "usage" in k or "token_count" in k]
            continue
        root = roots[span.parent_span_id]  # every other span is a child of its turn's root
        assert root.trace_id == span.trace_id
        assert root.start_time_unix_nano <= span.start_time_unix_nano
        assert span.end_time_unix_nano <= root.end_time_unix_nano
        if operation == "chat":  # gen-ai-spans.md, Inference
            assert span.kind == Span.SPAN_KIND_CLIENT
            assert a["gen_ai.provider.name"] in PROVIDERS
            model = a.get("gen_ai.request.model")
            assert span.name == (f"chat {model}" if model else "chat")
            assert a["openinference.span.kind"] == "LLM"
            _check_messages(json.loads(a["gen_ai.input.messages"]), output=False)
            _check_messages(json.loads(a["gen_ai.output.messages"]), output=True)
        else:  # gen-ai-spans.md, Execute tool span
            assert operation == gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value
            assert span.kind == Span.SPAN_KIND_INTERNAL
            assert span.name == f"execute_tool {a['gen_ai.tool.name']}"
            assert a["gen_ai.tool.call.id"]
            assert a["openinference.span.kind"] == "TOOL"
    return spans


def _of(spans: list[Span], operation: str) -> list[dict[str, Any]]:
    return [a for s in spans if (a := attrs(s))["gen_ai.operation.name"] == operation]


def _oi_roles(a: dict[str, Any], prefix: str = "llm.input_messages") -> list[str]:
    roles = []
    while f"{prefix}.{len(roles)}.message.role" in a:
        roles.append(a[f"{prefix}.{len(roles)}.message.role"])
    return roles


def test_an_openai_tool_call_recording(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    session = _import(OPENAI, db)
    text = _export(session, db)
    assert _export(session, db) == text  # same ids, same bytes
    spans = check_conventions(decode(text), db, session)
    # The cassette: two exchanges; the first answers with two get_current_weather calls, the
    # second request sends both results back and gets the answer.
    exchanges = yaml.safe_load(OPENAI.read_text())["interactions"]
    sent = [json.loads(x["request"]["body"])["messages"] for x in exchanges]
    answers = [json.loads(x["response"]["body"]["string"]) for x in exchanges]
    chats = _of(spans, "chat")
    assert len(_of(spans, "invoke_agent")) == 1
    assert len(chats) == len(exchanges) == 2
    for chat, messages, answer in zip(chats, sent, answers, strict=True):
        assert _oi_roles(chat) == [m["role"] for m in messages]
        assert chat["gen_ai.usage.input_tokens"] == answer["usage"]["prompt_tokens"]
        assert chat["gen_ai.usage.output_tokens"] == answer["usage"]["completion_tokens"]
        assert chat["llm.token_count.total"] == answer["usage"]["total_tokens"]
        assert chat["gen_ai.response.model"] == answer["model"]
        assert chat["gen_ai.response.id"] == answer["id"]
        assert chat["gen_ai.response.finish_reasons"] == [answer["choices"][0]["finish_reason"]]
        assert chat["gen_ai.provider.name"] == "openai"
    calls = answers[0]["choices"][0]["message"]["tool_calls"]
    tools = _of(spans, "execute_tool")
    assert [t["gen_ai.tool.call.id"] for t in tools] == [c["id"] for c in calls]
    assert [json.loads(t["gen_ai.tool.call.arguments"]) for t in tools] == [
        json.loads(c["function"]["arguments"]) for c in calls
    ]
    results = {m["tool_call_id"]: m["content"] for m in sent[1] if m["role"] == "tool"}
    assert {t["gen_ai.tool.call.id"]: t["gen_ai.tool.call.result"] for t in tools} == results
    # the system prompt is part of Chat Completions' history: in the input messages
    second = json.loads(chats[1]["gen_ai.input.messages"])
    assert second[0] == {
        "role": "system",
        "parts": [{"type": "text", "content": sent[1][0]["content"]}],
    }
    assert "gen_ai.system_instructions" not in chats[1]


def test_an_anthropic_recording_with_a_failed_tool(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    session = _import(ANTHROPIC, db)
    spans = check_conventions(decode(_export(session, db)), db, session)
    exchanges = json.loads(ANTHROPIC.read_text())
    chats = _of(spans, "chat")
    assert len(chats) == len(exchanges) == 2
    for chat, exchange in zip(chats, exchanges, strict=True):
        usage = exchange["response"]["body"]["usage"]
        prompt = (
            usage["input_tokens"]
            + (usage.get("cache_read_input_tokens") or 0)
            + (usage.get("cache_creation_input_tokens") or 0)
        )
        assert chat["gen_ai.usage.input_tokens"] == chat["llm.token_count.prompt"] == prompt
        assert chat["gen_ai.usage.output_tokens"] == usage["output_tokens"]
        assert chat["gen_ai.provider.name"] == "anthropic"
        assert chat["gen_ai.response.finish_reasons"] == [
            exchange["response"]["body"]["stop_reason"]
        ]
        # a user message of tool_result blocks only is the conventions' `tool` message
        expected = []
        for m in exchange["request"]["body"]["messages"]:
            blocks = m["content"] if isinstance(m["content"], list) else []
            results = [b for b in blocks if b.get("type") == "tool_result"]
            expected += (
                ["tool"] * len(results) if results and len(results) == len(blocks) else [m["role"]]
            )
        assert _oi_roles(chat) == expected
    # the tool result with is_error: true (read from the second request)
    (failed,) = [
        b
        for m in exchanges[1]["request"]["body"]["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert failed["is_error"] is True
    (tool,) = _of(spans, "execute_tool")
    assert tool["gen_ai.tool.call.id"] == failed["tool_use_id"]
    assert tool["error.type"] == "tool_error"
    (span,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert span.status.code == span.status.STATUS_CODE_ERROR


def test_a_claude_code_session_is_one_trace_per_turn(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    session = _import(CLAUDE_CODE, db)
    text = _export(session, db)
    spans = check_conventions(decode(text), db, session)
    # Counted from the transcript's lines: user lines whose content is text open a turn,
    # each assistant line is one model call, each tool_use block one tool call.
    lines = [json.loads(line) for line in CLAUDE_CODE.read_text().splitlines()]
    users = [x for x in lines if x["type"] == "user" and isinstance(x["message"]["content"], str)]
    assistants = [x for x in lines if x["type"] == "assistant"]
    uses = [b for x in assistants for b in x["message"]["content"] if b["type"] == "tool_use"]
    turns = _of(spans, "invoke_agent")
    assert [t["input.value"] for t in turns] == [u["message"]["content"] for u in users]
    assert len(_of(spans, "chat")) == len(assistants)
    assert [t["gen_ai.tool.name"] for t in _of(spans, "execute_tool")] == [u["name"] for u in uses]
    assert Counter(s.trace_id for s in spans).keys() == {
        s.trace_id for s in spans if not s.parent_span_id
    }
    assert len({s.trace_id for s in spans}) == len(users)
    # span times are the events' created_at: the first turn starts at the first user line
    first = min(s.start_time_unix_nano for s in spans)
    assert first == 1766570400 * 10**9  # 2025-12-24T10:00:00.000Z, the first user line
    # the same session exported from a fresh import gives the same ids (not the same
    # agenttrail.hash values: chain v2 draws a new salt per event at each import)
    again = tmp_path / "again.db"
    assert _import(CLAUDE_CODE, again) == session
    ids = [(s.trace_id, s.span_id, s.parent_span_id) for s in spans]
    request = decode(_export(session, again))
    respans = [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
    assert [(s.trace_id, s.span_id, s.parent_span_id) for s in respans] == ids


def test_an_unknown_export_format_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    session = _import(CLAUDE_CODE, db)
    result = run_cli("export", session, "--format", "otel", "--db", str(db))
    assert result.returncode == 2
    wanted = "error: unknown export format 'otel' (use jsonl, otlp, md, html)"
    assert result.stderr.strip() == wanted


def test_export_writes_a_file(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    session = _import(OPENAI, db)
    out = tmp_path / "trace.json"
    result = run_cli("export", session, "--format", "otlp", "-o", str(out), "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert out.read_text() == _export(session, db)


def test_a_session_that_makes_no_span_is_exported_with_a_warning(tmp_path: Path) -> None:
    # Tool results with no call make no span (docs/otel.md, Export): the request holds none,
    # which import refuses. The export said nothing of it and exited 0.
    db = tmp_path / "log.db"
    with open_store(db) as store:
        store.create_session(NewSession(id="orphans"))
        store.append("orphans", events.tool_result("call_1", output="42"))
    result = run_cli("export", "orphans", "--format", "otlp", "--db", str(db))
    assert result.returncode == 0
    request = json_format.Parse(result.stdout, ExportTraceServiceRequest())
    assert not [s for r in request.resource_spans for scope in r.scope_spans for s in scope.spans]
    assert result.stderr == (
        "warning: session orphans: none of its events makes a span (docs/otel.md, Export): "
        "the request holds no span, and agenttrail import refuses it\n"
    )
    assert run_cli("export", _import(OPENAI, db), "--format", "otlp", "--db", str(db)).stderr == ""


def test_a_session_is_not_imported_again_from_its_own_otlp_export(tmp_path: Path) -> None:
    """The export names its session (``session.id``): imported into the same log it would
    add every event a second time, beside the transcript's, so it is refused and the log
    left as it was; into another log it imports as usual, and once."""
    db = tmp_path / "log.db"
    session = _import(CLAUDE_CODE, db)
    out = tmp_path / "trace.json"
    out.write_text(_export(session, db))
    with open_store(db) as store:
        before = store.head(session)
    assert before is not None
    result = run_cli("import", str(out), "--db", str(db))
    assert (result.returncode, result.stderr) == (
        2,
        f"error: {out}: session {session} already holds {before[0]} events no otlp import "
        "wrote, so this file's events would be added beside them (twice, if the file is "
        "their export); import it into another database (--db)\n",
    )
    with open_store(db) as store:
        assert store.head(session) == before
    other = tmp_path / "other.db"
    first, again = (run_cli("import", str(out), "--db", str(other)) for _ in range(2))
    with open_store(other) as store:
        imported = store.head(session)
    assert imported is not None and imported[0] > 0
    written = imported[0]  # the other log's own count, not the command's report
    assert (first.returncode, first.stderr) == (0, f"{out}: {written} events written\n")
    assert (again.returncode, again.stderr) == (
        0,
        f"{out}: 0 events written, {written} already present\n",
    )


RECORDING = REALDATA / "anthropic-sdk-python" / "092be1de-d3f8-4c22-a4ea-a7ad54689836.json"
"""SOURCES.md: an Anthropic SDK recording with no dates: a server ``code_execution`` call and a
``get_weather`` call that the recording holds no result of, and no duration."""


def _round_trip(db: Path, session: str, tmp_path: Path) -> Path:
    """``session`` of ``db`` exported as OTLP and imported into a log of its own."""
    out = tmp_path / "trace.json"
    out.write_text(_export(session, db))
    other = tmp_path / "other.db"
    assert _import(out, other) == session
    return other


def test_a_round_trip_invents_no_result_no_duration_and_no_time(tmp_path: Path) -> None:
    # Read back, a call with no result came back answered (`— ok`), a model call with no
    # duration got the span's length (0 µs here, the gap to the event before elsewhere) and a
    # session of no time the export's times as its own. The export says what it did not
    # have (agenttrail.result_seq absent, agenttrail.duration_ms absent, agenttrail.undated).
    db = tmp_path / "log.db"
    session = _import(RECORDING, db)
    other = _round_trip(db, session, tmp_path)
    with open_store(db) as store, open_store(other) as copy:
        before, after = list(store.read(session)), list(copy.read(session))
        assert copy.get_session(session).dated is False
        assert copy.get_session(session).started is None
    shape = [(e.type, e.payload.get("id"), e.payload.get("toolCallId")) for e in before]
    assert [(e.type, e.payload.get("id"), e.payload.get("toolCallId")) for e in after] == shape
    unanswered = {e.payload["id"] for e in before if e.type == "tool_call"} - {
        e.payload.get("toolCallId") for e in before if e.type == "tool_result"
    }
    assert len(unanswered) == 2  # the server's code_execution and the client's second call
    assert not any(e.payload.get("toolCallId") in unanswered for e in after)
    assert [e.payload["meta"].get("duration_ms") for e in after if "meta" in e.payload] == [
        None,
        None,
    ]


def test_a_recorded_duration_comes_back_and_no_other(tmp_path: Path) -> None:
    # A model call's span starts its recorded duration before its message, else at the
    # event before it (for a trace viewer); only the recorded one is read back as one.
    db = tmp_path / "log.db"
    timed = events.meta(model="gpt-4o", provider="openai", duration_ms=1234.5)
    untimed = events.meta(model="gpt-4o", provider="openai")
    said = [("user", "hi"), ("assistant", "hello"), ("user", "and?"), ("assistant", "no more")]
    with open_store(str(db), create=True) as store:
        store.append_batch(
            "timed",
            [
                NewEvent(
                    events.message(role, text, meta={1: timed, 3: untimed}.get(n)),
                    f"2026-01-01T10:00:{3 * n:02d}.000000Z",
                )
                for n, (role, text) in enumerate(said)
            ],
            create=NewSession("timed", title="timed"),
        )
    other = _round_trip(db, "timed", tmp_path)
    with open_store(other) as copy:
        metas = [e.payload.get("meta") for e in copy.read("timed")]
    durations = [meta.get("duration_ms") for meta in metas if meta is not None]
    assert durations == [1234.5, None]  # not the three seconds since the event before


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC, CLAUDE_CODE], ids=lambda p: p.parent.name)
def test_the_semconv_schema_url_and_scope(path: Path, tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    session = _import(path, db)
    (resource,) = decode(_export(session, db)).resource_spans
    (scope,) = resource.scope_spans
    assert scope.scope.name == "agenttrail"
    assert resource.schema_url == scope.schema_url == "https://opentelemetry.io/schemas/1.41.0"


def test_a_claude_code_message_written_over_several_lines_is_one_model_call(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    session = _import(TOOL_HEAVY, db)
    spans = check_conventions(decode(_export(session, db)), db, session)
    # Read from the transcript: Claude Code writes one line per content block of a response,
    # every line repeating message.id, model and usage; a model call is one message.id.
    lines = [json.loads(line) for line in TOOL_HEAVY.read_text().splitlines()]
    by_id: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        if line.get("type") == "assistant":
            by_id.setdefault(line["message"]["id"], []).append(line["message"])
    uses = {
        b["id"]: b["name"]
        for parts in by_id.values()
        for m in parts
        for b in m["content"]
        if b["type"] == "tool_use"
    }
    chats = _of(spans, "chat")
    assert [c["gen_ai.response.id"] for c in chats] == list(by_id)
    for chat, parts in zip(chats, by_id.values(), strict=True):
        assert chat["gen_ai.request.model"] == parts[0]["model"]
        prompts = {
            u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
            for u in (m["usage"] for m in parts)
        }
        assert chat["gen_ai.usage.input_tokens"] in prompts
        assert chat["gen_ai.usage.output_tokens"] in {m["usage"]["output_tokens"] for m in parts}
        assert chat["gen_ai.usage.cache_read.input_tokens"] in {
            m["usage"]["cache_read_input_tokens"] for m in parts
        }
    tools = _of(spans, "execute_tool")
    assert {t["gen_ai.tool.call.id"]: t["gen_ai.tool.name"] for t in tools} == uses


def test_lone_surrogates_are_exported_as_their_escapes(tmp_path: Path) -> None:
    # protobuf strings are UTF-8: a lone surrogate (the log keeps them) in a message, a tool
    # name or a tool's error was a traceback, for the file and for `push` alike
    db = str(tmp_path / "log.db")
    with open_store(db, create=True) as store:
        said = [
            events.message("user", "hi \udc81"),
            events.tool_call("c1", "t\ud800", {"x": "\udfff"}),
            events.tool_result("c1", error="bad \udc83"),
        ]
        store.append_batch("s", [NewEvent(p) for p in said], create=NewSession("s"))
    done = run_cli("export", "s", "--format", "otlp", "--db", db)
    assert done.returncode == 0, done.stderr
    request = json_format.Parse(done.stdout, ExportTraceServiceRequest())
    spans = [s for r in request.resource_spans for sc in r.scope_spans for s in sc.spans]
    [tool] = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.name == "execute_tool t\\ud800"
    assert tool.status.message == "bad \\udc83"
    texts = [a.value.string_value for s in spans for a in s.attributes]
    assert any("hi \\udc81" in text for text in texts), texts
