"""Assembling OpenAI streams (``agenttrail.formats.openai._stream``): Chat Completions tool
call fragments keyed by ``index``, and a new call ``id`` at an index already in use; Responses
API streams that end before ``response.completed``.

The real stream is the OpenTelemetry cassette
``test_chat_completion_multiple_tools_streaming_with_content.yaml``
(``tests/formats/_recordings.py`` cites its SOURCES.md row), read in place; small streams of
our own are written to ``tmp_path``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agenttrail.formats import read_file
from agenttrail.log.store import LogStore
from agenttrail.model import Event
from tests.formats._recordings import CASSETTES, import_events

STREAMED_TOOLS = CASSETTES / "test_chat_completion_multiple_tools_streaming_with_content.yaml"

CALLS = [
    ("call_a", "read_file", '{"path": "src/a.py"}'),
    ("call_b", "grep", '{"pattern": "TODO"}'),
    ("call_c", "ls", '{"path": "."}'),
]


def _stream(fragments: list[dict[str, Any]]) -> str:
    """SSE text of a chat.completion.chunk stream whose deltas carry ``fragments`` (one tool
    call fragment each), then a finish_reason."""
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1731368634}
    head["model"] = "gpt-4o-mini"
    deltas = [{"role": "assistant", "content": None}]
    deltas += [{"tool_calls": [f]} for f in fragments]
    chunks = [head | {"choices": [{"index": 0, "delta": d}]} for d in deltas]
    chunks.append(head | {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def _start(index: int, call_id: str, name: str) -> dict[str, Any]:
    function = {"name": name, "arguments": ""}
    return {"index": index, "id": call_id, "type": "function", "function": function}


def _piece(index: int, text: str) -> dict[str, Any]:
    return {"index": index, "function": {"arguments": text}}


def _read(tmp_path: Path, fragments: list[dict[str, Any]]) -> tuple[list[Any], list[str]]:
    request = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "go"}]}
    response = {"status_code": 200, "headers": {}, "body": _stream(fragments)}
    path = tmp_path / "stream.json"
    path.write_text(json.dumps([{"request": request, "response": response}]))
    [imported] = read_file(path)
    calls = [e.payload for e in imported.events if e.payload["type"] == "tool_call"]
    return calls, imported.warnings


def test_calls_streamed_at_one_index_stay_apart(tmp_path: Path) -> None:
    # Some OpenAI-compatible servers stream every call at index 0, each with its own id.
    # Before: one call with the last id and the three argument strings concatenated.
    fragments = []
    for call_id, name, arguments in CALLS:
        fragments += [_start(0, call_id, name), _piece(0, arguments[:5]), _piece(0, arguments[5:])]
    calls, warnings = _read(tmp_path, fragments)
    assert [(c["id"], c["name"], c["arguments"]) for c in calls] == CALLS
    assert [c["input"] for c in calls] == [json.loads(a) for _, _, a in CALLS]
    assert warnings == []


def test_a_repeated_id_continues_its_call(tmp_path: Path) -> None:
    # Servers that repeat the id on every fragment of a call do not start a new one.
    call_id, name, arguments = CALLS[0]
    repeat = _piece(0, arguments[5:]) | {"id": call_id}
    calls, _ = _read(tmp_path, [_start(0, call_id, name), _piece(0, arguments[:5]), repeat])
    assert [(c["id"], c["arguments"]) for c in calls] == [(call_id, arguments)]


def test_a_new_call_before_the_last_has_whole_arguments_is_an_anomaly_on_both(
    tmp_path: Path,
) -> None:
    # call_a has sent '{"pat' when call_b starts at its index: the stream contradicts itself.
    # Both calls are kept with the fragments that arrived for each, and both are named.
    fragments = [
        _start(0, "call_a", "read_file"),
        _piece(0, '{"pat'),
        _start(0, "call_b", "grep"),
        _piece(0, '{"pattern": "TODO"}'),
    ]
    calls, warnings = _read(tmp_path, fragments)
    assert [(c["id"], c["input"]) for c in calls] == [
        ("call_a", '{"pat'),  # not JSON: kept as the text that arrived
        ("call_b", {"pattern": "TODO"}),
    ]
    [warning] = warnings
    assert "'call_b'" in warning and "'call_a'" in warning and "not JSON" in warning


def test_calls_at_several_indexes_are_ordered_by_index(tmp_path: Path) -> None:
    fragments = [
        _start(1, "call_b", "grep"),
        _start(0, "call_a", "read_file"),
        _piece(1, '{"pattern": "TODO"}'),
        _piece(0, '{"path": "src/a.py"}'),
    ]
    calls, warnings = _read(tmp_path, fragments)
    assert [c["id"] for c in calls] == ["call_a", "call_b"]
    assert warnings == []


def _calls(events: list[Event]) -> list[tuple[str, Any, str]]:
    return [
        (e.payload["id"], e.payload["input"], e.payload["arguments"])
        for e in events
        if e.type == "tool_call"
    ]


def test_real_stream_with_every_call_at_index_zero(store: LogStore, tmp_path: Path) -> None:
    # The real stream sends its second call at index 1; at index 0 (as an OpenAI-compatible
    # server would) it must give the same two calls.
    text = STREAMED_TOOLS.read_text()
    moved = text.replace('"tool_calls":[{"index":1,', '"tool_calls":[{"index":0,')
    assert moved != text
    path = tmp_path / STREAMED_TOOLS.name
    path.write_text(moved)
    expected = _calls(import_events(store, STREAMED_TOOLS))
    assert len(expected) == 2
    assert _calls(import_events(store, path)) == expected


def _responses_events(*events: dict[str, Any]) -> str:
    """SSE text of Responses API stream events, each named by its type and numbered in order."""
    return "".join(
        f"event: {e['type']}\ndata: {json.dumps(e | {'sequence_number': n})}\n\n"
        for n, e in enumerate(events)
    )


def test_a_responses_stream_cut_keeps_the_arguments_that_arrived(tmp_path: Path) -> None:
    # Before: only items that reached response.output_item.done were kept, so a call cut in
    # its arguments was lost. Now it is kept as a Chat Completions call cut there is.
    started = {"id": "resp_F", "object": "response", "created_at": 1700000000}
    started |= {"status": "in_progress", "model": "gpt-4.1", "output": []}
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather"}
    call |= {"arguments": "", "status": "in_progress"}
    delta = {"type": "response.function_call_arguments.delta", "item_id": "fc_1"}
    delta |= {"output_index": 0}
    body = _responses_events(
        {"type": "response.created", "response": started},
        {"type": "response.output_item.added", "output_index": 0, "item": call},
        delta | {"delta": '{"ci'},
        delta | {"delta": 'ty": "Par'},
    )
    request = {"model": "gpt-4.1", "input": "Weather in Paris?", "stream": True}
    path = tmp_path / "cut.json"
    path.write_text(
        json.dumps([{"request": request, "response": {"status_code": 200, "body": body}}])
    )
    [imported] = read_file(path)
    assert [e.payload for e in imported.events] == [
        {"type": "message", "role": "user", "content": "Weather in Paris?"},
        {
            "type": "message",
            "role": "assistant",
            "content": "",
            "meta": {
                "model": "gpt-4.1",
                "provider": "openai",
                "usage": None,
                "duration_ms": None,
                "location": "remote",
            },
            "responseId": "resp_F",
            "status": "in_progress",
        },
        {
            "type": "tool_call",
            "id": "call_1",
            "name": "get_weather",
            "input": '{"city": "Par',  # not JSON: kept as the text that arrived
            "arguments": '{"city": "Par',
            "itemId": "fc_1",
            "responseId": "resp_F",
        },
    ]
    [warning] = imported.warnings
    assert warning.endswith(
        "the stream ends before response.completed; kept its 1 output items as far as they arrived"
    )
