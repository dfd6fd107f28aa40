"""The OTLP format: OTLP JSON files of GenAI spans in the shapes instrumentations send, current
and older (open-telemetry/semantic-conventions-genai docs/gen-ai/; semantic conventions
v1.36.0's per-message events; OpenLLMetry's gen_ai.prompt.N.*; OpenInference's llm.*).

The files are written here, span by span, from the shapes those documents give; what each
should become is read off the same documents (docs/otel.md, What maps to what)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail.errors import FormatError
from agenttrail.formats import detect, otlp, read_file
from agenttrail.formats._common import PrefixTips, prefix_tips
from agenttrail.formats.otlp import _messages
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import open_store
from agenttrail.views.search import search
from agenttrail.views.transcript import IndexCache
from tests.conftest import run_cli

TRACE = "5b8efff798038103d269b633813fc60c"


def attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def span(n: int, name: str, attrs: dict[str, Any], events: Any = (), **extra: Any) -> Any:
    return {
        "traceId": TRACE,
        "spanId": f"{n:016x}",
        "name": name,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + n * 1_000_000),
        "endTimeUnixNano": str(1_700_000_000_000_000_000 + n * 1_000_000 + 500_000),
        "attributes": [attr(k, v) for k, v in attrs.items()],
        "events": [
            {"name": e, "attributes": [attr(k, v) for k, v in a.items()]} for e, a in events
        ],
        **extra,
    }


def request(*spans: Any) -> dict[str, Any]:
    resource = {"attributes": [attr("service.name", "agent")]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": list(spans)}]}]}


def said(path: Path) -> list[tuple[Any, ...]]:
    [session] = read_file(path)
    out: list[tuple[Any, ...]] = []
    for event in session.events:
        p = event.payload
        if p["type"] == "message":
            out.append((p["role"], p["content"]))
        elif p["type"] == "tool_call":
            out.append(("call", p["id"], p["name"], p["input"]))
        elif p["type"] == "tool_result":
            out.append(("result", p["toolCallId"], p["output"]))
        else:
            out.append((p["type"],))
    return out


WEATHER = [
    ("system", "Be brief."),
    ("user", "Weather in Paris?"),
    ("assistant", ""),
    ("call", "call_1", "get_weather", {"location": "Paris"}),
    ("result", "call_1", "rainy"),
    ("assistant", "Rainy."),
]
"""One tool loop: what every shape below describes."""


def test_per_message_events_of_v1_36(tmp_path: Path) -> None:
    calls = json.dumps(
        [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
            }
        ]
    )
    first = span(
        1,
        "chat gpt-4o",
        {"gen_ai.system": "openai", "gen_ai.operation.name": "chat"},
        [
            ("gen_ai.system.message", {"content": "Be brief."}),
            ("gen_ai.user.message", {"content": "Weather in Paris?"}),
            (
                "gen_ai.choice",
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": json.dumps({"tool_calls": json.loads(calls)}),
                },
            ),
        ],
    )
    second = span(
        2,
        "chat gpt-4o",
        {"gen_ai.system": "openai", "gen_ai.operation.name": "chat"},
        [
            ("gen_ai.system.message", {"content": "Be brief."}),
            ("gen_ai.user.message", {"content": "Weather in Paris?"}),
            ("gen_ai.assistant.message", {"tool_calls": calls}),
            ("gen_ai.tool.message", {"id": "call_1", "content": "rainy"}),
            (
                "gen_ai.choice",
                {"index": 0, "finish_reason": "stop", "message": json.dumps({"content": "Rainy."})},
            ),
        ],
    )
    path = tmp_path / "v136.json"
    path.write_text(json.dumps(request(first, second)))
    assert detect(path, path.read_bytes()) is otlp
    assert said(path) == WEATHER


def test_flattened_prompt_and_completion_attributes(tmp_path: Path) -> None:
    first = span(
        1,
        "openai.chat",
        {
            "gen_ai.system": "openai",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Be brief.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "Weather in Paris?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "gen_ai.completion.0.tool_calls.0.id": "call_1",
            "gen_ai.completion.0.tool_calls.0.name": "get_weather",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"location": "Paris"}',
        },
    )
    second = span(
        2,
        "openai.chat",
        {
            "gen_ai.system": "openai",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Be brief.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "Weather in Paris?",
            "gen_ai.prompt.2.role": "assistant",
            "gen_ai.prompt.2.tool_calls.0.id": "call_1",
            "gen_ai.prompt.2.tool_calls.0.name": "get_weather",
            "gen_ai.prompt.2.tool_calls.0.arguments": '{"location": "Paris"}',
            "gen_ai.prompt.3.role": "tool",
            "gen_ai.prompt.3.content": "rainy",
            "gen_ai.prompt.3.tool_call_id": "call_1",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "Rainy.",
        },
    )
    path = tmp_path / "flat.json"
    path.write_text(json.dumps(request(first, second)))
    assert said(path) == WEATHER


def test_operation_details_event_and_the_file_exporter_lines(tmp_path: Path) -> None:
    history = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
    call = {
        "type": "tool_call",
        "id": "call_1",
        "name": "get_weather",
        "arguments": {"location": "Paris"},
    }
    asked = {"role": "assistant", "parts": [call]}
    answer = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_1", "result": "rainy"}],
    }
    system = json.dumps([{"type": "text", "content": "Be brief."}])

    def details(n: int, inputs: Any, outputs: Any) -> Any:
        return span(
            n,
            "chat gpt-4o",
            {"gen_ai.operation.name": "chat"},
            [
                (
                    "gen_ai.client.inference.operation.details",
                    {
                        "gen_ai.system_instructions": system,
                        "gen_ai.input.messages": json.dumps(inputs),
                        "gen_ai.output.messages": json.dumps(outputs),
                    },
                ),
            ],
        )

    text = {"role": "assistant", "parts": [{"type": "text", "content": "Rainy."}]}
    lines = [
        request(details(1, history, [asked])),
        request(details(2, [*history, asked, answer], [text])),
    ]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert said(path) == WEATHER


PNG = b"\x89PNG\r\n\x1a\n"  # a PNG file's signature (RFC 2083, 12.11)
PNG_SHA256 = hashlib.sha256(PNG).hexdigest()
PICTURE = {
    "type": "blob",
    "modality": "image",
    "mime_type": "image/png",
    "content": base64.b64encode(PNG).decode(),
}
ASKED = {"type": "text", "content": "What is in this picture?"}
THINKING = [
    {"type": "reasoning", "content": "A cat, it seems: look it up."},
    {"type": "reasoning", "content": "Now its breed."},
    {"type": "reasoning", "content": "Both agree."},
]
CALLS = [
    {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"q": "cat"}},
    {"type": "tool_call", "id": "c2", "name": "breed", "arguments": {"of": "cat"}},
]
ANSWER = {"type": "text", "content": "A Maine Coon."}


def _pictured(path: Path) -> Path:
    """Two model calls of the conventions (gen-ai-input-messages.json, v1.41.0): a user's
    text and image, reasoning between two tool calls, then reasoning and the answer."""
    user = {"role": "user", "parts": [ASKED, PICTURE]}
    first = {"role": "assistant", "parts": [THINKING[0], CALLS[0], THINKING[1], CALLS[1]]}
    results = [
        {"type": "tool_call_response", "id": "c1", "result": "a cat"},
        {"type": "tool_call_response", "id": "c2", "result": "Maine Coon"},
    ]
    last = {"role": "assistant", "parts": [THINKING[2], ANSWER], "finish_reason": "stop"}
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    spans = [
        span(
            1,
            "chat gpt-4o",
            {
                **chat,
                "gen_ai.input.messages": json.dumps([user]),
                "gen_ai.output.messages": json.dumps([{**first, "finish_reason": "tool_call"}]),
            },
        ),
        span(
            2,
            "chat gpt-4o",
            {
                **chat,
                "gen_ai.input.messages": json.dumps(
                    [user, first, {"role": "tool", "parts": results}]
                ),
                "gen_ai.output.messages": json.dumps([last]),
            },
        ),
    ]
    path.write_text(json.dumps(request(*spans)))
    return path


def test_reasoning_and_images_are_kept_in_their_order(tmp_path: Path) -> None:
    # A part that is neither text nor a tool part was dropped: reasoning, an image. The
    # message now keeps its parts as blocks, text as the log's text blocks, and where its
    # blocks and tool calls interleave, their order (docs/log-format.md, Block order).
    [session] = read_file(_pictured(tmp_path / "pictured.json"))
    messages = [e.payload for e in session.events if e.payload["type"] == "message"]
    user, first, last = messages
    assert (user["content"], user["blocks"]) == (
        ASKED["content"],
        [{"type": "text", "text": ASKED["content"]}, PICTURE],
    )
    assert "order" not in user  # its blocks, then no tool part: the order without the field
    assert (first["content"], first["blocks"], first["order"]) == (
        "",
        THINKING[:2],
        [{"block": 0}, {"toolCall": "c1"}, {"block": 1}, {"toolCall": "c2"}],
    )
    assert (last["content"], last["blocks"]) == (
        ANSWER["content"],
        [THINKING[2], {"type": "text", "text": ANSWER["content"]}],
    )
    assert "order" not in last
    assert [(e.payload["type"], e.payload.get("id")) for e in session.events][2:4] == [
        ("tool_call", "c1"),
        ("tool_call", "c2"),
    ]


def test_the_viewer_and_search_read_the_reasoning_as_thinking(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "log.db"), create=True) as store:
        (report,) = import_paths(store, [_pictured(tmp_path / "pictured.json")])
        page = IndexCache().page(store, report.session_id, after_seq=0, limit=100)
        rows = {r["seq"]: r for r in page.rows}
        assert [run["thinking"] for run in rows[2]["runs"]] == [
            THINKING[0]["content"],
            THINKING[1]["content"],
        ]
        assert (rows[7]["text"], rows[7]["thinking"], rows[7]["blocks"]) == (
            ANSWER["content"],
            THINKING[2]["content"],
            [],
        )
        # the image is an attachment, named by its bytes (docs/log-format.md, Attachments)
        assert rows[1]["blocks"] == []
        [(kind, media, size, digest)] = [
            (a["kind"], a["media_type"], a["size"], a["sha256"]) for a in rows[1]["attachments"]
        ]
        assert (kind, media, size, digest) == ("image", "image/png", len(PNG), PNG_SHA256)
        (found,) = search(store, "both agree", store.sessions())
        assert [hit.seq for hit in found.hits] == [7]


def test_an_image_part_is_replayed_as_the_providers_image(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    imported = run_cli("import", str(_pictured(tmp_path / "pictured.json")), "--db", str(db))
    (session,) = imported.stdout.split()
    replayed = run_cli("replay", session, "--format", "anthropic", "--db", str(db))
    assert replayed.returncode == 0, replayed.stderr
    first = json.loads(replayed.stdout)["messages"][0]
    source = {"type": "base64", "media_type": "image/png", "data": PICTURE["content"]}
    assert first["content"][1] == {"type": "image", "source": source}  # Anthropic's image
    # reasoning has no Anthropic block without its signature: said, not dropped silently
    assert "2 content block(s) (reasoning) not sent" in replayed.stderr


@pytest.mark.parametrize("key", ["user.id", "langfuse.user.id"])
def test_the_sessions_user_is_the_spans_user_id(tmp_path: Path, key: str) -> None:
    # OpenInference's user.id (semantic_conventions.md, User), Langfuse's own; agenttrail's
    # export writes both, and the user was lost on the way back (a new-user check)
    said_ = [{"role": "user", "parts": [ASKED]}]
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(said_)}
    path = tmp_path / "user.json"
    path.write_text(json.dumps(request(span(1, "chat", {**attrs, key: "ana"}))))
    [session] = read_file(path)
    assert session.session.user == "ana"


def test_a_message_of_text_alone_keeps_no_blocks(tmp_path: Path) -> None:
    path = tmp_path / "text.json"
    said_ = [{"role": "user", "parts": [ASKED]}]
    answered = [{"role": "assistant", "parts": [ANSWER, CALLS[0]]}]
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(said_)}
    attrs["gen_ai.output.messages"] = json.dumps(answered)
    path.write_text(json.dumps(request(span(1, "chat", attrs))))
    [session] = read_file(path)
    assert not any("blocks" in e.payload or "order" in e.payload for e in session.events)


def _otlp_messages(text: str) -> list[tuple[list[Any], list[Any]]]:
    """``(input messages, output messages)`` of each chat span of an OTLP/JSON export."""
    found = []
    for resource in json.loads(text)["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for s in scope["spans"]:
                a = {kv["key"]: kv["value"].get("stringValue") for kv in s["attributes"]}
                if a.get("gen_ai.operation.name") == "chat":
                    found.append(
                        (
                            json.loads(a["gen_ai.input.messages"]),
                            json.loads(a["gen_ai.output.messages"]),
                        )
                    )
    return found


def test_reasoning_and_images_come_back_in_the_otlp_export(tmp_path: Path) -> None:
    # Imported, then exported as OTLP: each model call's parts as the source sent them.
    db = tmp_path / "log.db"
    imported = run_cli("import", str(_pictured(tmp_path / "pictured.json")), "--db", str(db))
    assert imported.returncode == 0, imported.stderr
    (session,) = imported.stdout.split()
    exported = run_cli("export", session, "--format", "otlp", "--db", str(db))
    assert exported.returncode == 0, exported.stderr
    (inputs, outputs), (_, last) = _otlp_messages(exported.stdout)
    # an image the log holds whole is named, not copied (docs/otel.md, Export)
    named = {"modality": "image", "mime_type": "image/png", "size": len(PNG), "sha256": PNG_SHA256}
    assert inputs[-1]["parts"] == [ASKED, {"type": "attachment", **named}]
    assert outputs[0]["parts"] == [THINKING[0], CALLS[0], THINKING[1], CALLS[1]]
    assert last[0]["parts"] == [THINKING[2], ANSWER]


def test_openinference_retriever_and_a_span_of_no_convention(tmp_path: Path) -> None:
    retriever = span(
        1,
        "retrieve",
        {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.id": "a",
            "retrieval.documents.0.document.score": "x",
            "retrieval.documents.1.document.id": "b",
        },
    )
    other = span(2, "GET /", {"http.method": "GET"})
    path = tmp_path / "oi.json"
    path.write_text(json.dumps(request(retriever, other)))
    [session] = read_file(path)
    rag, kept = (e.payload for e in session.events)
    assert (rag["type"], rag["chunks"], rag["top_score"]) == ("rag", 2, None)
    assert kept["type"] == "otel_span" and kept["attributes"] == {"http.method": "GET"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x", "traceId": "'
            + TRACE
            + '"}]}]}]}',
            "spanId is missing",
        ),
        # an id of the wrong length, or all zero, said as what it is (it read "must be 16
        # bytes, not all zero (got 16)" for sixteen zero bytes)
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x", "traceId": "'
            + "0" * 32
            + '", "spanId": "0102030405060708"}]}]}]}',
            r"spans\[0\] \('x'\): traceId is all zero: not a valid id in OTLP$",
        ),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x", "traceId": "'
            + TRACE
            + '", "spanId": "01020304"}]}]}]}',
            r"\('x'\): spanId must be 8 bytes, 16 hex digits \(got 4 bytes\)$",
        ),
        ('{"resourceSpans": [{"scopeSpans": 7}]}', "scopeSpans"),
        # an id that is not hex text, named by its path (protobuf's own words were "object of
        # type 'int' has no len()")
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "0102030405060708"}, '
            '{"traceId": 12345}]}]}]}',
            r"bad.json:1: not an OTLP ExportTraceServiceRequest in JSON: "
            r"resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[1\]\.traceId: expected a hex string, "
            r"not int$",
        ),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"links": [{"spanId": 7}]}]}]}]}',
            r"spans\[0\]\.links\[0\]\.spanId: expected a hex string, not int$",
        ),
        # protobuf's reason at the field's whole path, the element at fault by its index: not
        # "Failed to parse resourceSpans field: Failed to parse scopeSpans field: …", nor
        # Python's "int() argument must be a string, a bytes-like object or a real number"
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": {}}]}]}]}',
            r"JSON: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.startTimeUnixNano: "
            r"expected an integer, not dict$",
        ),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "a"}, '
            '{"name": "b", "startTimeUnixNano": "abc"}]}]}]}',
            r"JSON: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[1\]\.startTimeUnixNano: "
            r"expected an integer, not 'abc'$",
        ),
        (  # an attribute's value, deep in a list: protobuf said "at AnyValue.boolValue"
            '{"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": {"arrayValue":'
            ' {"values": [{"boolValue": true}, {"boolValue": "yes"}]}}}]}}]}',
            r"JSON: resourceSpans\[0\]\.resource\.attributes\[0\]\.value\.arrayValue\.values"
            r"\[1\]\.boolValue: Expected true or false without quotes$",
        ),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": {"k": 1}}]}]}]}',
            r"JSON: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.attributes: "
            r"expected a list \(\[…\]\)$",
        ),
        # a list where one message goes: protobuf said "unhashable type: 'dict'" (and the
        # first look for the element at fault raised AttributeError: add)
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"status": [{"code": 1}]}]}]}]}',
            r"JSON: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.status: "
            r"expected an object, not list$",
        ),
        # a file forced to be read as OTLP that is other JSON: refused, not read as no spans
        ('{"a": 1}', r"bad.json:1: not an OTLP trace export: no resourceSpans"),
        ('{"resourceSpans": []}\n{"b": 2}\n', r"bad.json:2: not an OTLP trace export"),
        # valid OTLP of no span: said, not imported as nothing
        ('{"resourceSpans": []}', r"bad.json: an OTLP trace export with no span: nothing"),
        ('{"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}', "with no span"),
    ],
)
def test_a_bad_file_names_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(FormatError, match=message):
        read_file(path, "otlp")


def test_importing_a_file_of_no_span_is_exit_2_and_creates_no_log(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    path, db = tmp_path / "empty.json", tmp_path / "log.db"
    path.write_text('{"resourceSpans": []}')
    result = run_cli("import", str(path), "--db", str(db))
    assert (result.returncode, result.stderr.strip()) == (
        2,
        f"error: {path}: an OTLP trace export with no span: nothing to import",
    )
    assert not db.exists()


def test_an_agent_span_says_its_messages_only_when_no_model_span_does(tmp_path: Path) -> None:
    asked = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
    answered = [{"role": "assistant", "parts": [{"type": "text", "content": "Rainy."}]}]
    agent = span(
        1,
        "invoke_agent weather",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather",
            "gen_ai.input.messages": json.dumps(asked),
            "gen_ai.output.messages": json.dumps(answered),
        },
    )
    alone = tmp_path / "agent.json"
    alone.write_text(json.dumps(request(agent)))
    assert said(alone) == [("user", "Weather in Paris?"), ("assistant", "Rainy.")]
    chat = span(
        2,
        "chat gpt-4o",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
            "gen_ai.input.messages": json.dumps(asked),
            "gen_ai.output.messages": json.dumps(answered),
        },
    )
    both = tmp_path / "both.json"
    both.write_text(json.dumps(request(agent, chat)))
    assert said(both) == [("system", "Be brief."), *said(alone)]
    [session] = read_file(both)
    assert session.session.agent == "weather"


def _sample() -> dict[str, Any]:
    calls = json.dumps([{"type": "tool_call", "id": "c1", "name": "f", "arguments": {"a": 1}}])
    return request(
        span(1, "chat", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": calls}),
        span(
            2,
            "execute_tool f",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.call.id": "c1",
                "gen_ai.conversation.id": "s",
            },
        ),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.tuples(st.integers(0, 10_000), st.binary(max_size=3)), max_size=3))
def test_a_damaged_request_is_read_or_refused_in_one_line(cuts: list[tuple[int, bytes]]) -> None:
    """Bytes replaced or cut in a request, as protobuf and as an OTLP JSON file: sessions, or
    the error the receiver and the importer name (never another exception)."""
    text = json.dumps(_sample()).encode()
    binary = otlp.request_from_json(_sample()).SerializeToString()
    for data in (text, binary):
        damaged = bytearray(data)
        for at, replacement in cuts:
            at %= len(damaged) + 1
            damaged[at : at + len(replacement)] = replacement
        if data is binary:
            with contextlib.suppress(ValueError):
                otlp.sessions_from_request(otlp.request_from_protobuf(bytes(damaged)))
        else:
            with tempfile.TemporaryDirectory() as tmp, contextlib.suppress(FormatError):
                path = Path(tmp) / "damaged.json"
                path.write_bytes(bytes(damaged))
                read_file(path, "otlp")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2)
    ),
    max_leaves=4,
)


def _places(value: Any) -> list[tuple[Any, Any]]:
    """Every ``(container, key or index)`` of ``value``'s JSON, to put another value at."""
    inside = value.items() if isinstance(value, dict) else enumerate(value)
    places = []
    for key, item in inside:
        places.append((value, key))
        if isinstance(item, dict | list):
            places += _places(item)
    return places


@given(st.integers(0, 10_000), _JSON)
def test_a_value_of_another_type_anywhere_is_named_in_one_line(at: int, other: Any) -> None:
    """Any value of the request replaced by JSON of another shape: read, or refused with
    ``ValueError`` naming where (never another exception, as the search for the element at
    fault once raised for a list given where one message goes)."""
    document = _sample()
    places = _places(document)
    container, key = places[at % len(places)]
    container[key] = other
    with contextlib.suppress(ValueError):
        otlp.request_from_json(document)


_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool", "system"]),
        "parts": st.lists(
            st.one_of(
                st.fixed_dictionaries({"type": st.just("text"), "content": st.text(max_size=8)}),
                st.fixed_dictionaries(
                    {"type": st.just("tool_call"), "id": st.text(max_size=3), "name": st.just("f")}
                ),
                st.fixed_dictionaries(
                    {"type": st.just("tool_call_response"), "id": st.text(max_size=3)}
                ),
            ),
            max_size=2,
        ),
    }
)


@st.composite
def _histories(draw: st.DrawFn) -> list[str]:
    """The ``gen_ai.input.messages`` texts of successive inference spans: mostly a history
    sent again with messages added (as json.dumps writes it, or compact, or indented), and
    among them texts that are not: another history, an empty one, JSON that is no list, text
    that is no JSON, a history cut short."""
    messages = draw(st.lists(_MESSAGE, max_size=8))
    texts = []
    for k in draw(st.lists(st.integers(0, len(messages)), min_size=1, max_size=6)):
        style = draw(st.sampled_from([{}, {"separators": (",", ":")}, {"indent": 1}]))
        text = json.dumps(messages[:k], **style) + draw(st.sampled_from(["", " ", "\n"]))
        texts.append(
            draw(st.sampled_from([text, text, text, "[]", '{"a": 1}', "not json", text[:-2]]))
        )
    return texts


@given(_histories())
@settings(max_examples=300, deadline=None)
def test_a_history_sent_again_reads_as_the_same_messages(texts: list[str]) -> None:
    # Each inference span repeats the history before it: its text is read once per
    # conversation (History), and must read as the messages the whole text holds.
    history = _messages.History()
    for text in texts:
        attrs = {"gen_ai.input.messages": text}
        assert _messages.input_messages(attrs, [], history) == _messages.input_messages(attrs, [])


@given(st.lists(st.lists(st.text(max_size=3), max_size=6), max_size=6))
def test_the_tips_of_successive_histories_are_those_of_each_whole(
    histories: list[list[str]],
) -> None:
    tips = PrefixTips("otlp")
    for prints in histories:
        assert tips(list(prints)) == prefix_tips("otlp", list(prints))
