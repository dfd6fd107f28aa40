"""OpenAI recordings (``agenttrail.formats.openai``): real cassettes, pairing, streams, bad input.

Real files are read in place from ``../shared/realdata``: the OpenAI cassettes
(``tests/formats/_recordings.py`` cites their SOURCES.md rows), and
``toolbench/10_ChatGPT_DFS_woFilter_w2.json``: SOURCES.md row "toolbench/
10_ChatGPT_DFS_woFilter_w2.json | OpenBMB/ToolBench | data_example/answer/G1_answer/
10_ChatGPT_DFS_woFilter_w2.json | d56fdd89faf8 | 86e25c56f825 | Apache-2.0 | 22570", a
ToolBench answer tree whose ``answer_generation.train_messages`` use the legacy
``function_call`` / role ``function`` format.

The ``store`` fixture (``tests/conftest.py``) is a real log on each backend, closed after each
test.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import FormatError
from agenttrail.formats import detect, jsonl, openai, read_file
from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore
from agenttrail.model import Event
from agenttrail.views.pairing import Pairing, pair_tool_calls
from tests.conftest import REALDATA
from tests.formats._recordings import CASSETTES, RESPONSES_OUTPUT, TOOLBENCH, import_events

TOOL_CALLS = CASSETTES / "test_chat_completion_tool_calls_with_content.yaml"
STREAMED_TOOLS = CASSETTES / "test_chat_completion_multiple_tools_streaming_with_content.yaml"
STREAM_NO_USAGE = CASSETTES / "test_chat_completion_streaming_not_complete.yaml"
RESPONSES_CALL = CASSETTES / "test_responses_create_captures_tool_call_content[content_mode0].yaml"


def summary(events: list[Event]) -> Counter[str]:
    """Counts per kind: ``message:<role>``, ``tool_call``, ``tool_result``, ``error``."""
    return Counter(
        f"message:{e.payload['role']}" if e.type == "message" else str(e.type) for e in events
    )


def anomalies(pairing: Pairing) -> Counter[str]:
    return Counter(a.kind for a in pairing.anomalies.values())


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def calls_of(events: list[Event]) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.type == "tool_call"]


# --- the real cassettes ----------------------------------------------------------------------

# Expected counts, established by reading each cassette (not by running the importer):
#   grep -n '"role"\|"tool_calls"\|"tool_call_id"\|"type": "function_call\|uri:\|code:' F
# then by eye, exchange by exchange, keeping only what each request adds to the previous one:
# - tool_calls_with_content: interaction 1 sends system + user, answers one assistant message
#   with two tool_calls (call_JpNb…, call_vaFQ…); interaction 2 resends those three and adds two
#   role "tool" messages (one per call id), answered by one assistant text. All pair.
# - multiple_tools_streaming: one interaction, system + user; the SSE chunks carry two tool
#   calls (index 0 and 1, each with an id); no follow-up, so both calls have no result.
# - streaming_not_complete: one user message, streamed text answer, no usage chunk.
# - responses_create_captures_tool_call_content: input is one string (user); output is one
#   function_call item; no follow-up.
# - responses_with_function_call_output: interaction 1 and 2 send the same string input
#   without previous_response_id (two fresh questions), each answered by a function_call
#   (call_ZWlK…, call_rlRW…); interaction 3 chains previous_response_id to the second response
#   and sends one function_call_output for call_rlRW…; output one assistant message.
REAL_COUNTS: dict[str, tuple[dict[str, int], dict[str, int]]] = {
    TOOL_CALLS.name: (
        {
            "message:system": 1,
            "message:user": 1,
            "message:assistant": 2,
            "tool_call": 2,
            "tool_result": 2,
        },
        {},
    ),
    STREAMED_TOOLS.name: (
        {"message:system": 1, "message:user": 1, "message:assistant": 1, "tool_call": 2},
        {"no_result": 2},
    ),
    STREAM_NO_USAGE.name: ({"message:user": 1, "message:assistant": 1}, {}),
    RESPONSES_CALL.name: (
        {"message:user": 1, "message:assistant": 1, "tool_call": 1},
        {"no_result": 1},
    ),
    RESPONSES_OUTPUT.name: (
        {"message:user": 2, "message:assistant": 3, "tool_call": 2, "tool_result": 1},
        {"no_result": 1},
    ),
}


def test_every_real_cassette_is_covered() -> None:
    assert sorted(p.name for p in CASSETTES.glob("*.yaml")) == sorted(REAL_COUNTS)


@pytest.mark.parametrize("name", sorted(REAL_COUNTS))
def test_real_cassette_imports_with_counts(store: LogStore, name: str) -> None:
    path = CASSETTES / name
    data = path.read_bytes()
    assert openai.sniff(path, data)
    assert detect(path, data) is openai
    [imported] = read_file(path)
    assert imported.warnings == []
    events = import_events(store, path)
    counts, expected_anomalies = REAL_COUNTS[name]
    assert summary(events) == Counter(counts)
    assert anomalies(pair_tool_calls(events)) == Counter(expected_anomalies)
    again = import_paths(store, [path])
    assert [(r.written, r.skipped) for r in again] == [(0, len(events))]


def test_chat_completion_with_two_parallel_calls(store: LogStore) -> None:
    events = import_events(store, TOOL_CALLS)
    assert [e.type for e in events] == [
        "message",
        "message",
        "message",
        "tool_call",
        "tool_call",
        "tool_result",
        "tool_result",
        "message",
    ]
    system, user, turn, *_ = events
    assert system.payload["role"] == "system" and system.actor == "system"
    assert user.payload["content"] == "What's the weather in Seattle and San Francisco today?"
    assert turn.payload["content"] == ""
    assert turn.payload["finishReason"] == "tool_calls"
    meta = dict(turn.payload["meta"])
    # the provider's usage object, kept beside the counts: the cassette's prompt_tokens 75
    assert meta.pop("usage_raw")["prompt_tokens"] == 75
    assert meta == {
        "model": "gpt-4o-mini-2024-07-18",
        "provider": "openai",
        "usage": {"input": 75, "output": 51, "cache_read": 0, "cache_write": None},
        "duration_ms": None,
        "location": "remote",
    }
    # request messages take their response's time: "created": 1731368634
    assert user.created_at == turn.created_at == "2024-11-11T23:43:54.000000Z"
    pairing = pair_tool_calls(events)
    assert {
        call.payload["id"]: pairing.result_of[call.seq].payload["output"]
        for call in events
        if call.type == "tool_call"
    } == {
        "call_JpNb8OiAkbIbHzDggfpdDHpi": "50 degrees and raining",
        "call_vaFQc3zK6hHTRZKXRI5Eo2cJ": "70 degrees and sunny",
    }
    assert events[-1].payload["meta"]["usage"]["input"] == 99
    session = store.get_session(events[0].session_id)
    assert session.title == "What's the weather in Seattle and San Francisco today?"
    assert session.agent == "OpenAI/Python 1.54.3"
    assert session.user is None
    assert session.started == "2024-11-11T23:43:54.000000Z"
    assert session.metadata == {
        "format": "openai",
        "source": TOOL_CALLS.name,
        "model": "gpt-4o-mini",
    }


def test_streamed_calls_are_assembled(store: LogStore) -> None:
    events = import_events(store, STREAMED_TOOLS)
    turn = events[2]
    assert turn.payload["finishReason"] == "tool_calls"
    assert turn.payload["messageId"] == "chatcmpl-ASYMbACebDoWcuraMEWQhU48q4dAp"
    # usage arrives in the last chunk, whose "choices" is empty
    assert turn.payload["meta"]["usage"] == {
        "input": 75,
        "output": 51,
        "cache_read": 0,
        "cache_write": None,
    }
    assert [(c["id"], c["name"], c["input"], c["arguments"]) for c in calls_of(events)] == [
        (
            "call_fHCjJqt9Pysde6vcJcvbXGBx",
            "get_current_weather",
            {"location": "Seattle, WA"},
            '{"location": "Seattle, WA"}',
        ),
        (
            "call_3J9foSw3CUb48lrqIXoTky6U",
            "get_current_weather",
            {"location": "San Francisco, CA"},
            '{"location": "San Francisco, CA"}',
        ),
    ]


def test_real_stream_matches_the_non_streamed_answer(store: LogStore) -> None:
    # The two recordings are the same question answered twice (streamed and not): the call
    # ids differ, the names and parsed arguments must not.
    streamed = calls_of(import_events(store, STREAMED_TOOLS))
    plain = calls_of(import_events(store, TOOL_CALLS))
    assert [(c["name"], c["input"]) for c in streamed] == [(c["name"], c["input"]) for c in plain]


def test_stream_without_usage_has_no_usage() -> None:
    [imported] = read_file(STREAM_NO_USAGE)
    turn = imported.events[-1].payload
    assert turn["content"] == "This is a test."
    assert turn["finishReason"] == "stop"
    assert turn["meta"]["usage"] is None  # never zeros
    assert turn["meta"]["model"] == "gpt-4-0613"


def test_responses_function_call(store: LogStore) -> None:
    events = import_events(store, RESPONSES_CALL)
    user, turn, call = events
    assert user.payload == {
        "type": "message",
        "role": "user",
        "content": "What's the weather in Seattle right now?",
    }
    assert turn.payload["content"] == "" and "blocks" not in turn.payload
    assert turn.payload["meta"]["usage"] == {
        "input": 72,
        "output": 8,
        "cache_read": 0,
        "cache_write": None,
    }
    assert call.payload["id"] == "call_90uO5LcGP5vTBTCrjyhYtWsA"
    assert call.payload["itemId"] == "fc_0bedf6e1ffba28050069e2f402203c8196b45065342d00ed17"
    assert call.payload["input"] == {"location": "Seattle, WA"}
    assert call.payload["arguments"] == '{"location":"Seattle, WA"}'


def test_responses_chain_with_the_first_call_recorded_twice(store: LogStore) -> None:
    events = import_events(store, RESPONSES_OUTPUT)
    assert [e.type for e in events] == [
        "message",
        "message",
        "tool_call",  # first recording: question, call_ZWlK…
        "message",
        "message",
        "tool_call",  # second recording: same question, call_rlRW…
        "tool_result",
        "message",  # previous_response_id → the second response
    ]
    pairing = pair_tool_calls(events)
    [lonely] = pairing.anomalies.values()
    assert (lonely.kind, lonely.call_id) == ("no_result", "call_ZWlKXhnZdoYMAJnVeZvxlcZX")
    result = events[6]
    assert pairing.call_of[result.seq].payload["id"] == "call_rlRW2e4SS3iHdBFRFMeI1Wb6"
    assert result.payload["output"] == "72°F and sunny"
    assert events[-1].payload["content"] == "The weather in Tokyo is currently 72°F and sunny."
    assert (
        events[-1].payload["messageId"] == "msg_0b85ae54f4c909720069432fd9941c81a38468ab8ca6646c7c"
    )


# --- ToolBench: the legacy function_call format --------------------------------------------


def test_toolbench_train_messages_pair_by_the_legacy_rule(store: LogStore, tmp_path: Path) -> None:
    # The ToolBench answer tree itself is not an OpenAI recording (sniff leaves it alone);
    # its answer_generation.train_messages is a list of three message lists, each the request
    # for the next step. By eye / jq: lengths 3, 5, 7, each a prefix of the next; roles
    # system, user, assistant, function, assistant, function, assistant; every assistant
    # message has a function_call (transitaires_for_transitaires, transitaire_for_transitaires,
    # Finish), each function message names the call before it, and nothing carries an id.
    tree = json.loads(TOOLBENCH.read_text(encoding="utf-8"))
    assert not openai.sniff(TOOLBENCH, TOOLBENCH.read_bytes())
    path = write_json(tmp_path / "train_messages.json", tree["answer_generation"]["train_messages"])
    [imported] = read_file(path)
    assert imported.warnings == []
    events = import_events(store, path)
    assert summary(events) == Counter(
        {
            "message:system": 1,
            "message:user": 1,
            "message:assistant": 3,
            "tool_call": 3,
            "tool_result": 2,
        }
    )
    # seqs: 3 message, 4 call, 5 result, 6 message, 7 call, 8 result, 9 message, 10 call
    assert [(c["name"], c["id"], c["pairedBy"]) for c in calls_of(events)] == [
        ("transitaires_for_transitaires", "legacy_call_4", "legacy_function_call"),
        ("transitaire_for_transitaires", "legacy_call_7", "legacy_function_call"),
        ("Finish", "legacy_call_10", "legacy_function_call"),
    ]
    results = [e.payload for e in events if e.type == "tool_result"]
    assert [r["toolCallId"] for r in results] == ["legacy_call_4", "legacy_call_7"]
    pairing = pair_tool_calls(events)
    assert {c: r.seq for c, r in pairing.result_of.items()} == {4: 5, 7: 8}
    assert anomalies(pairing) == Counter({"no_result": 1})  # Finish ends the run, unanswered
    # the observation is JSON inside a string; its inner \u00e9 escape stays as given
    assert "Agence Cal\\u00e9donienne" in results[1]["output"]


# --- pairing through this importer -----------------------------------------------------------


def assistant_calls(*calls: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ],
    }


def test_result_after_an_intervening_user_message_pairs(store: LogStore, tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "find the TODOs"},
        assistant_calls(("c1", "grep", '{"pattern": "TODO"}')),
        {"role": "user", "content": "also check tests"},
        {"role": "tool", "tool_call_id": "c1", "content": "src/a.py:3: TODO"},
    ]
    events = import_events(store, write_json(tmp_path / "a.json", messages))
    pairing = pair_tool_calls(events)
    [call] = [e for e in events if e.type == "tool_call"]
    assert pairing.result_of[call.seq].payload["output"] == "src/a.py:3: TODO"
    assert pairing.anomalies == {}


def test_two_calls_sharing_an_id_are_ambiguous(store: LogStore, tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "read both"},
        assistant_calls(
            ("read_file", "read_file", '{"path": "a"}'),
            ("read_file", "read_file", '{"path": "b"}'),
        ),
        {"role": "tool", "tool_call_id": "read_file", "content": "A"},
        {"role": "tool", "tool_call_id": "read_file", "content": "B"},
    ]
    events = import_events(store, write_json(tmp_path / "b.json", messages))
    assert summary(events)["tool_call"] == 2 and summary(events)["tool_result"] == 2
    pairing = pair_tool_calls(events)
    assert pairing.result_of == {}
    assert anomalies(pairing) == Counter({"duplicate_id": 4})


def test_results_out_of_order_pair_by_id(store: LogStore, tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "read both"},
        assistant_calls(
            ("call_1", "read_file", '{"path": "a"}'), ("call_2", "read_file", '{"path": "b"}')
        ),
        {"role": "tool", "tool_call_id": "call_2", "content": "B"},
        {"role": "tool", "tool_call_id": "call_1", "content": "A"},
    ]
    events = import_events(store, write_json(tmp_path / "c.json", messages))
    pairing = pair_tool_calls(events)
    assert pairing.anomalies == {}
    assert {
        e.payload["input"]["path"]: pairing.result_of[e.seq].payload["output"]
        for e in events
        if e.type == "tool_call"
    } == {"a": "A", "b": "B"}


def test_calls_and_results_without_ids_stay_unresolved(store: LogStore, tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "list"},
        assistant_calls(("", "ls", "{}")),
        {"role": "tool", "content": "a.txt"},
    ]
    events = import_events(store, write_json(tmp_path / "d.json", messages))
    [call] = calls_of(events)
    [result] = [e.payload for e in events if e.type == "tool_result"]
    assert call["id"] == "" and "toolCallId" not in result
    pairing = pair_tool_calls(events)
    assert pairing.result_of == {}
    assert anomalies(pairing) == Counter({"missing_id": 2})


# --- streaming equals the non-streamed answer ------------------------------------------------

ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1731368634,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": assistant_calls(
                ("call_a", "read_file", '{"path": "src/ä.py", "lines": [1, 2]}'),
                ("call_b", "grep", '{"pattern": "TODO"}'),
            ),
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
}


def as_stream(answer: dict[str, Any], piece: int = 4) -> str:
    """The SSE text the API would send for ``answer``: arguments cut into ``piece``-char
    fragments keyed by index, usage in a last chunk with empty choices."""
    head = {k: answer[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]}]
    for index, call in enumerate(answer["choices"][0]["message"]["tool_calls"]):
        start = {"index": index, "id": call["id"], "type": "function"}
        start["function"] = {"name": call["function"]["name"], "arguments": ""}
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [start]}}]})
        text = call["function"]["arguments"]
        for at in range(0, len(text), piece):
            fragment = {"index": index, "function": {"arguments": text[at : at + piece]}}
            chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    chunks.append({"choices": [], "usage": answer["usage"]})
    lines = [f"data: {json.dumps(head | c)}\n\n" for c in chunks]
    return "".join(lines) + "data: [DONE]\n\n"


def test_streamed_answer_equals_the_plain_answer(tmp_path: Path) -> None:
    request = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "go"}]}
    plain = write_json(tmp_path / "plain.json", [{"request": request, "response": ANSWER}])
    stream = {"status_code": 200, "headers": {}, "body": as_stream(ANSWER)}
    streamed = write_json(tmp_path / "streamed.json", [{"request": request, "response": stream}])
    [a], [b] = read_file(plain), read_file(streamed)
    assert [e.payload for e in b.events] == [e.payload for e in a.events]
    assert [(c.payload["id"], c.payload["input"]) for c in b.events[2:]] == [
        ("call_a", {"path": "src/ä.py", "lines": [1, 2]}),
        ("call_b", {"pattern": "TODO"}),
    ]


# --- conversations over several exchanges ---------------------------------------------------


def chat(content: str, created: int = 1700000000) -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return {"id": f"chatcmpl-{created}", "model": "gpt-4o", "created": created, "choices": [choice]}


def test_request_that_does_not_extend_the_conversation(tmp_path: Path) -> None:
    first = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    second = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "bye"}]
    records = [
        {"request": {"model": "gpt-4o", "messages": first}, "response": chat("hello", 1)},
        {"request": {"model": "gpt-4o", "messages": second}, "response": chat("ciao", 2)},
    ]
    path = write_json(tmp_path / "fork.json", records)
    [imported] = read_file(path)
    [warning] = imported.warnings
    assert str(path) in warning and "exchange 2" in warning
    contents = [e.payload.get("content", e.payload.get("text")) for e in imported.events]
    # in place, the transcript says the rest was sent without the history before it
    said = f"fork.json: {warning.removeprefix(f'{path}: ')}"
    assert contents == ["be brief", "hi", "hello", said, "bye", "ciao"]
    assert imported.events[3].payload["kind"] == "import_warning"
    keys = ["x1:m0", "x1:m1", "x1:r", "x2:diverged", "x2:m1", "x2:r"]
    assert [e.key for e in imported.events] == keys


def test_http_error_becomes_an_error_event(store: LogStore, tmp_path: Path) -> None:
    error = {"error": {"message": "Invalid 'messages[1].tool_call_id'", "type": "invalid"}}
    record = {
        "request": {
            "method": "POST",
            "url": "https://api.openai.com/v1/chat/completions",
            "headers": {"User-Agent": "AsyncOpenAI/Python 1.50.0"},
            "body": {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]},
        },
        "response": {
            "status_code": 400,
            "headers": {"date": "Mon, 11 Nov 2024 23:43:55 GMT"},
            "body": json.dumps(error),
        },
    }
    events = import_events(store, write_json(tmp_path / "err.json", record))
    user, failure = events
    assert failure.payload["type"] == "error" and failure.actor == "system"
    assert failure.payload["message"] == "Invalid 'messages[1].tool_call_id'"
    assert failure.payload["code"] == 400
    assert failure.created_at == user.created_at == "2024-11-11T23:43:55.000000Z"
    assert store.get_session(user.session_id).agent == "AsyncOpenAI/Python 1.50.0"


def test_request_body_alone(tmp_path: Path) -> None:
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "developer", "content": "answer in French"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            },
        ],
    }
    [imported] = read_file(write_json(tmp_path / "body.json", body))
    system, user = (e.payload for e in imported.events)
    assert system == {
        "type": "message",
        "role": "system",
        "content": "answer in French",
        "actor": "system",
        "sourceRole": "developer",
    }
    assert user["content"] == "what is this?"
    assert user["blocks"] == body["messages"][1]["content"]  # kept verbatim
    assert imported.session.metadata["model"] == "gpt-4o"
    assert imported.session.title == "what is this?"


def responses_body(rid: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    usage = {"input_tokens": 5, "output_tokens": 7, "input_tokens_details": {"cached_tokens": 2}}
    return {
        "id": rid,
        "object": "response",
        "created_at": 1766010384,
        "status": "completed",
        "model": "o4-mini",
        "output": output,
        "usage": usage,
    }


FUNCTION_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"location": "Tokyo"}',
}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "…"}]}


def test_responses_reasoning_and_stateless_history(store: LogStore, tmp_path: Path) -> None:
    said = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
    }
    question = {"role": "user", "content": "weather in Tokyo?"}
    answer = {
        "type": "message",
        "id": "msg_2",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
    }
    records = [
        {
            "request": {"model": "o4-mini", "instructions": "be brief", "input": [question]},
            "response": responses_body("resp_1", [REASONING, said, FUNCTION_CALL]),
        },
        {  # no previous_response_id: the client resends the whole history (store: false)
            "request": {
                "model": "o4-mini",
                "instructions": "be brief",
                "input": [
                    question,
                    REASONING,
                    said,
                    FUNCTION_CALL,
                    {"type": "function_call_output", "call_id": "call_1", "output": "22C"},
                ],
            },
            "response": responses_body("resp_2", [answer]),
        },
    ]
    path = write_json(tmp_path / "responses.json", records)
    [imported] = read_file(path)
    assert imported.warnings == []
    events = import_events(store, path)
    assert [e.type for e in events] == [
        "message",
        "message",
        "message",
        "tool_call",
        "tool_result",
        "message",
    ]
    system, _, turn, call, result, last = events
    assert system.payload["content"] == "be brief" and system.actor == "system"
    assert turn.payload["content"] == "Let me look."
    assert turn.payload["blocks"] == [REASONING, said]
    assert turn.payload["responseId"] == "resp_1" and turn.payload["messageId"] == "msg_1"
    # input_tokens 5 count the 2 cached ones too: the log's input is the 3 not cached
    assert turn.payload["meta"]["usage"] == {
        "input": 3,
        "output": 7,
        "cache_read": 2,
        "cache_write": None,
    }
    assert (call.payload["id"], call.payload["itemId"]) == ("call_1", "fc_1")
    assert call.payload["input"] == {"location": "Tokyo"}
    assert result.payload["toolCallId"] == "call_1" and result.payload["output"] == "22C"
    assert last.payload["content"] == "Sunny." and "blocks" not in last.payload
    assert pair_tool_calls(events).anomalies == {}


def test_responses_unknown_previous_response_is_a_warning(tmp_path: Path) -> None:
    record = {
        "request": {
            "model": "gpt-4o-mini",
            "previous_response_id": "resp_elsewhere",
            "input": [{"type": "function_call_output", "call_id": "call_9", "output": "ok"}],
        },
        "response": responses_body("resp_3", []),
    }
    [imported] = read_file(write_json(tmp_path / "orphan.json", record))
    [warning] = imported.warnings
    assert "exchange 1" in warning and "resp_elsewhere" in warning
    assert imported.events[0].payload == {
        "type": "tool_result",
        "toolCallId": "call_9",
        "output": "ok",
    }


# --- what sniff leaves alone ------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        *sorted((REALDATA / "anthropic-sdk-python").glob("*")),
        *sorted((REALDATA / "claude-code-spotter").glob("*.jsonl")),
        REALDATA / "claude-code-simonw" / "sample_session.jsonl",
        TOOLBENCH,
    ],
    ids=lambda p: p.name,
)
def test_sniff_leaves_other_formats_alone(path: Path) -> None:
    # SOURCES.md rows "anthropic-sdk-python/* | anthropics/anthropic-sdk-python | ... | MIT",
    # "claude-code-spotter/*.jsonl | marot/spotter | ... | MIT", "claude-code-simonw/
    # sample_session.jsonl | simonw/claude-code-transcripts | ... | Apache-2.0", and ToolBench.
    assert not openai.sniff(path, path.read_bytes())


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}


@pytest.mark.parametrize(
    "data",
    [
        [{"type": "text", "text": "hi"}, TOOL_USE],  # an Anthropic content-block list
        [{"role": "assistant", "content": [TOOL_USE]}],
        {
            "model": "claude-haiku-4-5",
            "max_tokens": 9,
            "messages": [{"role": "user", "content": "x"}],
        },
        {"type": "message", "role": "assistant", "content": [], "stop_reason": "end_turn"},
        {"session_id": "s", "seq": 1, "created_at": "x", "payload": {}, "hash": "00"},
    ],
)
def test_sniff_leaves_anthropic_shapes_alone(tmp_path: Path, data: Any) -> None:
    path = write_json(tmp_path / "other.json", data)
    assert not openai.sniff(path, path.read_bytes())


def test_sniff_leaves_our_own_export_alone(store: LogStore, tmp_path: Path) -> None:
    events = import_events(store, TOOL_CALLS)
    export = tmp_path / "export.jsonl"
    export.write_text("\n".join(jsonl_from_events(events)) + "\n", encoding="utf-8")
    assert not openai.sniff(export, export.read_bytes())
    assert detect(export, export.read_bytes()) is jsonl


# --- bad input ------------------------------------------------------------------------------


def test_malformed_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text('[\n{"role": "user", "content": "hi"},\n{"role": "assistant", "tool_calls": [')
    assert openai.sniff(path, path.read_bytes())  # claimed, so that the error is precise
    for format in (None, "openai"):
        with pytest.raises(FormatError, match="invalid JSON") as caught:
            read_file(path, format)
        assert caught.value.path == str(path) and caught.value.line == 3


def test_cassette_cut_before_a_response(tmp_path: Path) -> None:
    data = TOOL_CALLS.read_bytes()
    path = tmp_path / "cut.yaml"
    path.write_bytes(data[: data.index(b"  response:")])
    assert openai.sniff(path, path.read_bytes())
    with pytest.raises(FormatError, match="truncated") as caught:
        read_file(path)
    assert caught.value.field == "interactions[0].response"
    assert str(path) in str(caught.value)


def test_cassette_cut_inside_a_request_body(tmp_path: Path) -> None:
    data = TOOL_CALLS.read_bytes()
    path = tmp_path / "cut.yaml"
    path.write_bytes(data[: data.index(b'"model"')])  # the YAML stays valid, the JSON does not
    with pytest.raises(FormatError, match="invalid JSON") as caught:
        read_file(path, "openai")
    assert caught.value.field == "interactions[0].request.body"


def test_cassette_cut_inside_a_stream(tmp_path: Path) -> None:
    data = STREAMED_TOOLS.read_bytes()
    cut = data.index(b'"arguments":"catio"')
    path = tmp_path / "cut.yaml"
    path.write_bytes(data[:cut])
    with pytest.raises(FormatError, match="server-sent event at body line 7") as caught:
        read_file(path, "openai")
    assert caught.value.field == "interactions[0].response.body.string"


def test_broken_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "interactions:\n- request:\n    uri: https://api.openai.com/v1/responses\n"
        "    body: [unclosed\n"
    )
    with pytest.raises(FormatError, match="invalid YAML") as caught:
        read_file(path)
    assert caught.value.line == 5


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([{"role": "user", "content": "x"}, {"role": 1, "content": "y"}], "[1].role"),
        ({"model": "m", "messages": [{"content": "no role"}]}, "messages[0].role"),
        (
            [{"role": "assistant", "tool_calls": [{"id": 7, "function": {"name": "f"}}]}],
            "[0].tool_calls[0].id",
        ),
        ([{"role": "user", "content": 12}], "[0].content"),
        (
            {"request": {"model": "m", "input": [{"type": "function_call_output", "call_id": 3}]}},
            "request.input[0].call_id",
        ),
        (
            {
                "request": {"messages": [{"role": "user", "content": "x"}]},
                "response": {"choices": [], "usage": {"prompt_tokens": "many"}},
            },
            "response.usage.prompt_tokens",
        ),
    ],
)
def test_wrong_typed_field_is_named(tmp_path: Path, data: Any, field: str) -> None:
    path = write_json(tmp_path / "bad.json", data)
    with pytest.raises(FormatError) as caught:
        read_file(path, "openai")
    assert caught.value.field == field
    assert str(path) in str(caught.value) and field in str(caught.value)


def test_nothing_is_written_for_bad_input(store: LogStore, tmp_path: Path) -> None:
    good = write_json(tmp_path / "good.json", [{"role": "user", "content": "fine"}])
    bad = write_json(tmp_path / "bad.json", [{"role": ["user"], "content": "x"}])
    with pytest.raises(FormatError):
        import_paths(store, [good, bad], format="openai")
    assert store.sessions() == []


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"interactions": []},
        {
            "interactions": [
                {
                    "request": {"uri": "https://api.openai.com/v1/embeddings", "method": "POST"},
                    "response": {"status": {"code": 200}, "body": {"string": '{"data": []}'}},
                }
            ]
        },
    ],
)
def test_nothing_to_import(tmp_path: Path, data: Any) -> None:
    path = write_json(tmp_path / "empty.json", data)
    with pytest.raises(FormatError, match="no messages or responses to import"):
        read_file(path, "openai")


def sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def test_responses_stream_keeps_the_completed_response(tmp_path: Path) -> None:
    final = responses_body("resp_s", [FUNCTION_CALL])
    started = {**final, "status": "in_progress", "output": [], "usage": None}
    stream = [
        {"type": "response.created", "response": started},
        {"type": "response.output_item.added", "output_index": 0, "item": FUNCTION_CALL},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"lo'},
        {"type": "response.output_item.done", "output_index": 0, "item": FUNCTION_CALL},
        {"type": "response.completed", "response": final},
    ]
    request = {"model": "o4-mini", "input": "weather?", "stream": True}
    whole = {"request": request, "response": {"status_code": 200, "body": sse(stream)}}
    [imported] = read_file(write_json(tmp_path / "stream.json", whole))
    assert imported.warnings == []
    _, turn, call = (e.payload for e in imported.events)
    assert turn["meta"]["usage"]["output"] == 7
    assert (call["id"], call["input"]) == ("call_1", {"location": "Tokyo"})
    # cut before response.completed: the finished items are kept, usage is unknown
    cut = {"request": request, "response": {"status_code": 200, "body": sse(stream[:4])}}
    [imported] = read_file(write_json(tmp_path / "cut.json", cut))
    [warning] = imported.warnings
    assert "exchange 1" in warning and "response.completed" in warning
    _, turn, call = (e.payload for e in imported.events)
    assert turn["meta"]["usage"] is None
    assert call["id"] == "call_1"


def test_several_choices_and_the_one_continued(tmp_path: Path) -> None:
    two = chat("red", 1)
    two["choices"].append({"index": 1, "message": {"role": "assistant", "content": "blue"}})
    asked = [{"role": "user", "content": "a colour?"}]
    picked = [*asked, {"role": "assistant", "content": "blue"}, {"role": "user", "content": "ok"}]
    records = [
        {"request": {"model": "gpt-4o", "messages": asked, "n": 2}, "response": two},
        {"request": {"model": "gpt-4o", "messages": picked}, "response": chat("fine", 2)},
    ]
    [imported] = read_file(write_json(tmp_path / "n2.json", records))
    assert imported.warnings == []  # the second choice was the one sent back
    assert [(e.payload["content"], e.payload.get("choice")) for e in imported.events] == [
        ("a colour?", None),
        ("red", 0),
        ("blue", 1),
        ("ok", None),
        ("fine", None),
    ]
