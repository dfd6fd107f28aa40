"""Anthropic Messages API import (``agenttrail.formats.anthropic``): real SDK recordings, SSE
assembly, pairing by id, sniffing, bad input.

Real files are read in place (``tests/formats/_recordings.py`` cites their SOURCES.md rows);
small inputs of our own are built inline in ``tmp_path``. The ``store`` fixture
(``tests/conftest.py``) is a real log on each backend, closed after each test.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import FormatError
from agenttrail.formats import anthropic, detect, read_file
from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore
from agenttrail.model import Event, tool_status
from agenttrail.views.pairing import pair_tool_calls
from tests.conftest import REALDATA
from tests.formats._recordings import (
    ANTHROPIC_SDK,
    BAD_HISTORY,
    PROGRAMMATIC,
    SSE,
    TOOL_ERROR,
    import_events,
)


def _counts(events: list[Event]) -> dict[str, Any]:
    payloads = [e.payload for e in events]
    anomalies = Counter(a.kind for a in pair_tool_calls(events).anomalies.values())
    return {
        "messages": Counter(p["role"] for p in payloads if p["type"] == "message"),
        "client_calls": sum(p["type"] == "tool_call" and not p.get("server") for p in payloads),
        "server_calls": sum(p["type"] == "tool_call" and p.get("server") is True for p in payloads),
        "results": sum(p["type"] == "tool_result" for p in payloads),
        "error_results": sum(p.get("is_error") is True for p in payloads),
        "errors": sum(p["type"] == "error" for p in payloads),
        "anomalies": dict(anomalies),
    }


# Counts established by reading each file, not by running the importer:
#   jq -c '[.[].response.status_code]' F                          → HTTP statuses
#   jq -c '[.[].response.body.content // [] | .[] | {type, id}]' F → tool_use / server_tool_use
#   jq -c '[.[].request.body.messages[] | select(.content|type=="array") | .content[]
#          | select(.type=="tool_result") | {tool_use_id, is_error}] | unique' F
#   jq -c '[.[].request.body.messages[] | select(.role=="user" and (.content|type=="string"))
#          | .content] | unique' F                                 → distinct user prompts
# Assistant messages = 2xx responses; user messages = distinct string prompts (the tool_result
# user messages hold nothing else, so they become tool_result events only). For the SSE file,
# by eye: one message_start, a text block and one tool_use block, one message_stop.
REAL_COUNTS = {
    # statuses [200, 200]; response 1: tool_use toolu_01A9…; response 2: text only;
    # request 2 sends toolu_01A9…'s result with is_error true → every call paired.
    TOOL_ERROR.name: {
        "messages": {"user": 1, "assistant": 2},
        "client_calls": 1,
        "server_calls": 0,
        "results": 1,
        "error_results": 1,
        "errors": 0,
        "anomalies": {},
    },
    # statuses [200, 200]; response 1: text, server_tool_use srvtoolu_017…, tool_use
    # toolu_011… (caller → srvtoolu_017…); response 2: tool_use toolu_01RX…; request 2 sends
    # the result of toolu_011… only → srvtoolu_017… and toolu_01RX… have no result.
    PROGRAMMATIC.name: {
        "messages": {"user": 1, "assistant": 2},
        "client_calls": 2,
        "server_calls": 1,
        "results": 1,
        "error_results": 0,
        "errors": 0,
        "anomalies": {"no_result": 2},
    },
    # statuses [200, 400]; response 1: tool_use toolu_01GH…; request 2 drops the assistant
    # message but sends toolu_01GH…'s result, which still pairs by id; the 400 is one error.
    BAD_HISTORY.name: {
        "messages": {"user": 1, "assistant": 1},
        "client_calls": 1,
        "server_calls": 0,
        "results": 1,
        "error_results": 0,
        "errors": 1,
        "anomalies": {},
    },
    # one streamed message: text + tool_use toolu_01NR…, no result in the file.
    SSE.name: {
        "messages": {"assistant": 1},
        "client_calls": 1,
        "server_calls": 0,
        "results": 0,
        "error_results": 0,
        "errors": 0,
        "anomalies": {"no_result": 1},
    },
}


def test_every_real_file_is_covered() -> None:
    assert sorted(p.name for p in ANTHROPIC_SDK.iterdir()) == sorted(REAL_COUNTS)


@pytest.mark.parametrize("name", sorted(REAL_COUNTS))
def test_real_file_imports_with_counts(store: LogStore, name: str) -> None:
    path = ANTHROPIC_SDK / name
    assert detect(path, path.read_bytes()) is anthropic
    events = import_events(store, path)
    assert _counts(events) == REAL_COUNTS[name]
    again = import_paths(store, [path])
    assert [r.written for r in again] == [0]
    assert again[0].skipped == len(events)


def test_tool_error_result_is_an_error() -> None:
    [imported] = read_file(TOOL_ERROR)
    [result] = [e.payload for e in imported.events if e.payload["type"] == "tool_result"]
    assert result["toolCallId"] == "toolu_01A9HHF5Ezy3oBrKmSgfASm9"
    assert result["output"] == "RuntimeError('Unexpected error, try again')"
    status = tool_status(result)
    assert not status.ok
    assert status.detail == "RuntimeError('Unexpected error, try again')"
    assert imported.session.title == "What is the weather in SF?"
    assert imported.session.agent == "Anthropic/Python 0.82.0"
    assert imported.warnings == []


def test_programmatic_tool_calling(store: LogStore) -> None:
    events = import_events(store, PROGRAMMATIC)
    payloads = [e.payload for e in events]
    assert [(p["type"], p.get("role")) for p in payloads] == [
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", None),
        ("tool_call", None),
        ("tool_result", None),
        ("message", "assistant"),
        ("tool_call", None),
    ]
    server, client, _, second, later = (
        payloads[2],
        payloads[3],
        payloads[4],
        payloads[5],
        payloads[6],
    )
    assert server["server"] is True
    assert server["name"] == "code_execution"
    assert client["caller"] == {
        "type": "code_execution_20260120",
        "tool_id": "srvtoolu_017SzB73BSitzNFo1Xb3bq7S",
    }
    assert later["caller"]["tool_id"] == server["id"]
    assert "server" not in client
    # The second response reports input_tokens 0 / output_tokens 0 and no cache counts.
    assert second["meta"]["usage"] == {
        "input": 0,
        "output": 0,
        "cache_read": None,
        "cache_write": None,
    }
    assert second["content"] == ""
    assert second["container"]["id"] == "container_011CYVPF4iP8oD6Vsz1NhVih"
    assert payloads[1]["meta"]["model"] == "claude-opus-4-5-20251101"
    assert payloads[1]["messageId"] == "msg_01LAwUK3MeXUxoNW5ZgnPpGy"
    pairing = pair_tool_calls(events)
    server_seq = events[2].seq
    assert pairing.anomalies[server_seq].kind == "no_result"
    assert pairing.result_of[events[3].seq].seq == events[4].seq


def test_request_that_does_not_extend_history(store: LogStore) -> None:
    [imported] = read_file(BAD_HISTORY)
    assert len(imported.warnings) == 1
    assert imported.warnings[0].startswith(f"{BAD_HISTORY}: exchange 2: ")  # the whole path
    # the second request's message 2 is not the first's (jq '.[1].request.body.messages'); it
    # was worded "its messages 2-2 are appended as sent" (a new-user check)
    assert imported.warnings[0].endswith(
        ": exchange 2: the request does not extend the conversation so far (its message 2 is "
        "not the conversation's message 2); it is appended as sent"
    )
    events = import_events(store, BAD_HISTORY)
    error = events[-1].payload
    assert error["type"] == "error"
    assert error["code"] == 400
    assert error["errorType"] == "invalid_request_error"
    assert "unexpected `tool_use_id`" in error["message"]
    assert events[-1].actor == "system"
    pairing = pair_tool_calls(events)
    [(call_seq, result)] = pairing.result_of.items()
    assert events[call_seq - 1].payload["id"] == result.payload["toolCallId"]


def test_sse_stream_is_assembled() -> None:
    [imported] = anthropic.read(SSE, SSE.read_bytes())
    message, call = (e.payload for e in imported.events)
    assert message["content"] == "I'll check the current weather in Paris for you."
    assert message["stopReason"] == "tool_use"
    assert message["meta"]["usage"] == {
        "input": 377,
        "output": 65,
        "cache_read": 0,
        "cache_write": 0,
    }
    assert message["meta"]["model"] == "claude-sonnet-4-20250514"
    assert call["input"] == {"location": "Paris"}
    assert call["arguments"] == '{"location": "Paris"}'
    assert call["id"] == "toolu_01NRLabsLyVHZPKxbKvkfSMn"
    assert imported.warnings == []


def test_truncated_sse_is_assembled_with_a_warning(tmp_path: Path) -> None:
    # Decision: a stream without message_stop is assembled from what arrived, and warned
    # about; a last event whose JSON is cut off is dropped, and warned about.
    text = SSE.read_text()
    cut = text[: text.index('"partial_json":"ar"')]
    path = tmp_path / "cut.txt"
    path.write_text(cut)
    [imported] = anthropic.read(path, path.read_bytes())
    assert len(imported.warnings) == 3
    assert "line 32: the last event is cut off" in imported.warnings[0]
    assert "line 2: the message started here has no message_stop" in imported.warnings[1]
    assert "not JSON (block 1)" in imported.warnings[2]
    message, call = (e.payload for e in imported.events)
    assert message["content"] == "I'll check the current weather in Paris for you."
    assert "stopReason" not in message
    assert message["meta"]["usage"]["output"] == 1  # message_delta never arrived
    assert call["input"] == '{"location": "P'  # not JSON: kept as the raw text
    assert call["arguments"] == '{"location": "P'


def _exchange(messages: list[Any], content: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "request": {
            "method": "POST",
            "url": "https://api.anthropic.com/v1/messages",
            "headers": {},
            "body": {"model": "claude-x", "max_tokens": 10, "messages": messages, **extra},
        },
        "response": {
            "status_code": 200,
            "headers": {"Date": "Wed, 25 Feb 2026 20:02:36 GMT"},
            "body": {
                # one id per response, as the API gives (one id twice is one response
                # recorded twice: tests/formats/test_recorded_twice.py)
                "id": f"msg_{zlib.crc32(json.dumps(messages).encode()):08x}",
                "type": "message",
                "role": "assistant",
                "model": "claude-x-1",
                "content": content,
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 5, "output_tokens": 2},
            },
        },
    }


def test_parallel_calls_pair_by_id_and_orphans_are_marked(store: LogStore, tmp_path: Path) -> None:
    calls = [
        {"type": "tool_use", "id": f"toolu_{n}", "name": "get", "input": {"n": n}} for n in range(3)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"r{n}"} for n in (2, 0, 1)
    ]
    results.append({"type": "tool_result", "tool_use_id": "toolu_nobody", "content": "?"})
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "text", "text": "calling"}, *calls]},
        {"role": "user", "content": [*results, {"type": "text", "text": "and then?"}]},
    ]
    path = tmp_path / "parallel.json"
    path.write_text(json.dumps(messages))
    events = import_events(store, path)
    kinds = [(e.payload["type"], e.payload.get("role")) for e in events]
    assert kinds == [
        ("message", "user"),
        ("message", "assistant"),
        *[("tool_call", None)] * 3,
        *[("tool_result", None)] * 4,
        ("message", "user"),
    ]
    assert events[-1].payload["content"] == "and then?"
    assert "actor" not in events[-1].payload  # text beside tool results: actor derived
    pairing = pair_tool_calls(events)
    assert len(pairing.result_of) == 3
    for call_seq, result in pairing.result_of.items():
        n = events[call_seq - 1].payload["input"]["n"]
        assert result.payload["output"] == f"r{n}"
    [anomaly] = pairing.anomalies.values()
    assert (anomaly.kind, anomaly.call_id) == ("orphan_result", "toolu_nobody")
    assert import_paths(store, [path])[0].written == 0


def test_system_prompt_once_and_again_when_changed(tmp_path: Path) -> None:
    first = [{"role": "user", "content": "hi"}]
    reply = [{"type": "text", "text": "hello"}]
    second = [*first, {"role": "assistant", "content": reply}, {"role": "user", "content": "more"}]
    third = [*second, {"role": "assistant", "content": reply}, {"role": "user", "content": "end"}]
    blocks = [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    doc = [
        _exchange(first, reply, system="Be kind."),
        _exchange(second, reply, system="Be kind."),
        _exchange(third, reply, system=blocks),
    ]
    path = tmp_path / "system.json"
    path.write_text(json.dumps(doc))
    [imported] = anthropic.read(path, path.read_bytes())
    assert imported.warnings == []
    shown = [(e.payload["role"], e.payload["content"]) for e in imported.events]
    assert shown == [
        ("system", "Be kind."),
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "more"),
        ("assistant", "hello"),
        ("system", "Be brief."),
        ("user", "end"),
        ("assistant", "hello"),
    ]
    system = imported.events[5].payload
    assert system["actor"] == "system"
    assert system["blocks"] == blocks  # cache_control kept verbatim
    # The response's Date header dates the response and the request's messages.
    assert {e.created_at for e in imported.events} == {"2026-02-25T20:02:36.000000Z"}
    assert imported.session.started == "2026-02-25T20:02:36.000000Z"
    assert [len({e.key for e in imported.events})] == [len(imported.events)]


def test_server_tool_result_block(store: LogStore, tmp_path: Path) -> None:
    content = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "code_execution", "input": {}},
        {
            "type": "code_execution_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": {"type": "code_execution_tool_result_error", "error_code": "unavailable"},
        },
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "text", "text": "done"},
    ]
    path = tmp_path / "server.json"
    path.write_text(json.dumps(_exchange([{"role": "user", "content": "run"}], content)))
    events = import_events(store, path)
    message, call, result = (e.payload for e in events[1:])
    assert message["content"] == "done"
    assert message["blocks"] == content[2:]  # thinking kept verbatim
    assert call["server"] is True
    assert result["toolCallId"] == "srvtoolu_1"
    assert result["resultType"] == "code_execution_tool_result"
    assert not tool_status(result).ok
    assert pair_tool_calls(events).anomalies == {}


def test_bare_request_and_response_bodies(tmp_path: Path) -> None:
    request = {
        "model": "claude-x",
        "system": "sys",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
    }
    response = _exchange([], [{"type": "text", "text": "hi"}])["response"]["body"]
    req_path, resp_path = tmp_path / "req.json", tmp_path / "resp.json"
    req_path.write_text(json.dumps(request))
    resp_path.write_text(json.dumps(response))
    assert anthropic.sniff(req_path, req_path.read_bytes())
    assert anthropic.sniff(resp_path, resp_path.read_bytes())
    [req] = anthropic.read(req_path, req_path.read_bytes())
    assert [(e.payload["role"], e.payload["content"]) for e in req.events] == [
        ("system", "sys"),
        ("user", "hello"),
    ]
    assert req.events[1].payload["actor"] == "user"
    [resp] = anthropic.read(resp_path, resp_path.read_bytes())
    [message] = resp.events
    assert message.payload["meta"]["usage"] == {
        "input": 5,
        "output": 2,
        "cache_read": None,
        "cache_write": None,
    }


@pytest.mark.parametrize(
    "data",
    [
        # OpenAI Chat Completions: string content and tool_calls.
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1"}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "x"},
        ],
        {"model": "gpt-4o", "messages": [{"role": "system", "content": "s"}]},
        [{"role": "user", "content": "plain strings only"}],
    ],
)
def test_sniff_leaves_openai_alone(tmp_path: Path, data: Any) -> None:
    path = tmp_path / "openai.json"
    path.write_text(json.dumps(data))
    assert not anthropic.sniff(path, path.read_bytes())


def test_sniff_leaves_jsonl_alone(store: LogStore) -> None:
    # SOURCES.md: "claude-code-spotter/short.jsonl | marot/spotter | ... | MIT | 10491" and
    # "claude-code-simonw/sample_session.jsonl | simonw/claude-code-transcripts | ... | 1813"
    for path in (
        REALDATA / "claude-code-spotter" / "short.jsonl",
        REALDATA / "claude-code-simonw" / "sample_session.jsonl",
    ):
        assert not anthropic.sniff(path, path.read_bytes())
    events = import_events(store, PROGRAMMATIC)
    export = "\n".join(jsonl_from_events(events)).encode()
    assert not anthropic.sniff(Path("export.jsonl"), export)
    assert not anthropic.sniff(Path("one.jsonl"), export.split(b"\n", 1)[0])


def test_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    data = TOOL_ERROR.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert anthropic.sniff(path, path.read_bytes())  # claimed, so the fault can be named
    with pytest.raises(FormatError) as caught:
        read_file(path)
    assert caught.value.path == str(path)
    assert caught.value.line is not None
    assert "invalid JSON" in str(caught.value)


def test_malformed_sse_data_mid_stream(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(SSE.read_text().replace('"text":"I"}}', '"text":"I"}', 1))
    with pytest.raises(FormatError) as caught:
        anthropic.read(path, path.read_bytes())
    assert caught.value.line == 11
    assert str(path) in str(caught.value)


def test_block_without_type(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"text": "no type here"}]},
    ]
    path = tmp_path / "untyped.json"
    path.write_text(json.dumps([_exchange(messages, [])]))
    with pytest.raises(FormatError) as caught:
        read_file(path)
    assert caught.value.field == "[0].request.body.messages[1].content[0].type"
    assert str(path) in str(caught.value)
    assert "type" in str(caught.value)


def test_wrong_typed_usage(tmp_path: Path) -> None:
    doc = _exchange([{"role": "user", "content": "hi"}], [])
    doc["response"]["body"]["usage"]["input_tokens"] = "5"
    path = tmp_path / "usage.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatError) as caught:
        read_file(path)
    assert caught.value.field == "response.body.usage.input_tokens"


def test_streamed_response_body_in_an_exchange(tmp_path: Path) -> None:
    doc = _exchange([{"role": "user", "content": "weather in Paris?"}], [])
    doc["response"]["body"] = SSE.read_text()
    count = _exchange([{"role": "user", "content": "weather in Paris?"}], [])
    count["request"]["url"] = "https://api.anthropic.com/v1/messages/count_tokens"
    count["response"]["body"] = {"input_tokens": 12}
    path = tmp_path / "streamed.json"
    path.write_text(json.dumps([doc, count]))
    [imported] = read_file(path)
    user, message, call = (e.payload for e in imported.events)
    assert user["content"] == "weather in Paris?"
    assert message["meta"]["usage"]["output"] == 65
    assert call["input"] == {"location": "Paris"}
    assert imported.warnings == [
        f"{path}: exchange 2: /v1/messages/count_tokens is not a Messages API call; skipped"
    ]
