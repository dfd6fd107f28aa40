"""Replay fidelity on real recordings: the replayed list equals the list that was really sent.

Real files are read in place (``tests/formats/_recordings.py`` cites their SOURCES.md rows): the
OpenAI cassettes, the Anthropic SDK's recorded exchanges (f59a9391's second request was
rejected with HTTP 400) and real Claude Code transcripts.

For every recorded request, the file is imported and replayed up to the event just before the
request's response (found by the response's id: ``messageId`` / ``responseId`` / the error's
``requestId``), and the result must equal the request's message list. Normalisations, and
nothing else (``docs/replay.md``, Fidelity): object key order is not compared (RFC 8259 §4:
members are unordered); a Responses ``input`` string is the one user message it stands for
("equivalent to a text input with the user role", Responses API reference).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agenttrail.log.store import LogStore
from agenttrail.model import Event
from agenttrail.replay import (
    PLACEHOLDER,
    Replay,
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
    validate,
)
from tests.formats._recordings import (
    ANTHROPIC_SDK,
    BAD_HISTORY,
    CASSETTES,
    CLAUDE_CODE_SPOTTER,
    RESPONSES_OUTPUT,
    import_events,
)


def _sse_id(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            value = json.loads(line[5:])
            found = value.get("id") or (value.get("response") or {}).get("id")
            if isinstance(found, str):
                return found
    raise AssertionError("no id in the stream")


def openai_exchanges(path: Path) -> list[tuple[dict[str, Any], str]]:
    """``(request body, response id)`` for each interaction of a VCR cassette."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for interaction in doc["interactions"]:
        request = json.loads(interaction["request"]["body"])
        body = interaction["response"]["body"]["string"]
        text = body.strip()
        response_id = json.loads(text)["id"] if text.startswith("{") else _sse_id(text)
        out.append((request, response_id))
    return out


def anthropic_exchanges(path: Path) -> list[tuple[dict[str, Any], str, int]]:
    """``(request body, response or request id, HTTP status)`` for each recorded exchange."""
    out = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        body = item["response"]["body"]
        response_id = body["id"] if body.get("type") == "message" else body["request_id"]
        out.append((item["request"]["body"], response_id, item["response"]["status_code"]))
    return out


def seq_of(events: list[Event], response_id: str) -> int:
    """The seq of the first event of the response (or error) with this id."""
    for event in events:
        payload = event.payload
        ids = (payload.get("messageId"), payload.get("responseId"), payload.get("requestId"))
        if event.type in ("message", "error") and response_id in ids:
            return event.seq
    raise AssertionError(f"no event for {response_id}")


def responses_input(request: dict[str, Any]) -> list[Any]:
    value = request["input"]
    return [{"role": "user", "content": value}] if isinstance(value, str) else list(value)


# (file, exchange number) pairs that are not fidelity cases, and why:
NOT_FIDELITY = {
    # The second interaction sends the first question again as a fresh conversation (no
    # previous_response_id, no history): the file is one session, so a replay at that point
    # also holds the first conversation. SOURCES.md: "the first call recorded twice".
    (RESPONSES_OUTPUT.name, 2): "a second, independent conversation in the same file",
    # Rejected with HTTP 400: test_the_rejected_request_* below.
    (BAD_HISTORY.name, 2): "the request the API rejected",
}

OPENAI_CASES = [
    (path.name, number)
    for path in sorted(CASSETTES.glob("*.yaml"))
    for number in range(1, len(openai_exchanges(path)) + 1)
    if (path.name, number) not in NOT_FIDELITY
]
ANTHROPIC_CASES = [
    (path.name, number)
    for path in sorted(ANTHROPIC_SDK.glob("*.json"))
    for number in range(1, len(anthropic_exchanges(path)) + 1)
    if (path.name, number) not in NOT_FIDELITY
]


def test_every_recorded_request_is_a_case_or_named() -> None:
    every = {
        (p.name, n + 1) for p in CASSETTES.glob("*.yaml") for n in range(len(openai_exchanges(p)))
    } | {
        (p.name, n + 1)
        for p in ANTHROPIC_SDK.glob("*.json")
        for n in range(len(anthropic_exchanges(p)))
    }
    assert every == set(OPENAI_CASES) | set(ANTHROPIC_CASES) | set(NOT_FIDELITY)
    assert len(OPENAI_CASES) == 7 and len(ANTHROPIC_CASES) == 5


@pytest.mark.parametrize(("name", "number"), OPENAI_CASES)
def test_openai_replay_equals_the_recorded_request(store: LogStore, name: str, number: int) -> None:
    path = CASSETTES / name
    events = import_events(store, path)
    request, response_id = openai_exchanges(path)[number - 1]
    upto = seq_of(events, response_id) - 1
    got: Replay
    if "messages" in request:
        got = to_openai_chat(events, upto)
        assert got.messages == request["messages"]
        assert validate(request["messages"], "openai") == []
    else:
        previous = request.get("previous_response_id")
        got = to_openai_responses(events, upto, previous_response_id=previous)
        assert got.messages == responses_input(request)
        assert got.previous_response_id == previous
        assert validate(responses_input(request), "responses", previous_response_id=previous) == []
    assert validate(got.messages, got.provider, previous_response_id=got.previous_response_id) == []
    assert all(n.kind != "placeholder" for n in got.notes)  # every call sent had its result


@pytest.mark.parametrize(("name", "number"), ANTHROPIC_CASES)
def test_anthropic_replay_equals_the_recorded_request(
    store: LogStore, name: str, number: int
) -> None:
    path = ANTHROPIC_SDK / name
    events = import_events(store, path)
    request, response_id, status = anthropic_exchanges(path)[number - 1]
    assert status == 200
    got = to_anthropic(events, seq_of(events, response_id) - 1)
    assert got.messages == request["messages"]
    assert got.system == request.get("system")
    assert validate(request["messages"], "anthropic") == []
    assert validate(got.messages, "anthropic") == []


def test_the_chained_responses_request_is_only_the_new_output(store: LogStore) -> None:
    # Interaction 3 continues response 2 (previous_response_id) and sends only the output for
    # call_rlRW…; the unanswered call_ZWlK… of interaction 1 is not part of that request.
    events = import_events(store, RESPONSES_OUTPUT)
    request, response_id = openai_exchanges(RESPONSES_OUTPUT)[2]
    got = to_openai_responses(
        events,
        seq_of(events, response_id) - 1,
        previous_response_id=request["previous_response_id"],
    )
    assert got.messages == [
        {
            "type": "function_call_output",
            "call_id": "call_rlRW2e4SS3iHdBFRFMeI1Wb6",
            "output": "72\u00b0F and sunny",
        }
    ]
    assert [n.kind for n in got.notes] == ["previous_response"]
    whole = to_openai_responses(events, seq_of(events, response_id) - 1)
    assert [i.get("call_id") for i in whole.messages if "call_id" in i] == [
        "call_ZWlKXhnZdoYMAJnVeZvxlcZX",
        "call_ZWlKXhnZdoYMAJnVeZvxlcZX",
        "call_rlRW2e4SS3iHdBFRFMeI1Wb6",
        "call_rlRW2e4SS3iHdBFRFMeI1Wb6",
    ]
    assert whole.messages[2]["output"] == PLACEHOLDER
    assert validate(whole.messages, "responses") == []


# --- the request the API rejected (f59a9391) --------------------------------------------


def test_the_rejected_request_is_invalid_for_the_reason_the_api_gave(store: LogStore) -> None:
    (_, _, ok), (request, request_id, status) = anthropic_exchanges(BAD_HISTORY)
    assert (ok, status) == (200, 400)
    events = import_events(store, BAD_HISTORY)
    [error] = [e for e in events if e.type == "error"]
    assert error.payload["requestId"] == request_id
    api_message = error.payload["message"]
    # "messages.0.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_…"
    api_path, api_reason = api_message.split(": ", 1)

    [violation] = validate(request["messages"], "anthropic")
    assert violation.rule == "tool_result_without_tool_use"
    assert (violation.index, violation.block) == (1, 0)
    # the API combined the two user messages into one turn; so does the validator's path
    assert violation.provider_path == api_path == "messages.0.content.1"
    assert violation.message == api_reason


def test_the_rejected_session_replays_to_the_request_the_client_should_have_sent(
    store: LogStore,
) -> None:
    # The client dropped the assistant's tool_use message from its second request. The log
    # keeps that message (response 1), so replay reattaches the result behind its call: the
    # recorded request with the missing assistant message put back, which is valid.
    events = import_events(store, BAD_HISTORY)
    (_, first_id, _), (request, request_id, _) = anthropic_exchanges(BAD_HISTORY)
    got = to_anthropic(events, seq_of(events, request_id) - 1)
    sent = request["messages"]
    answer = json.loads(BAD_HISTORY.read_text(encoding="utf-8"))[0]["response"]["body"]
    assert answer["id"] == first_id
    assert got.messages == [sent[0], {"role": "assistant", "content": answer["content"]}, sent[1]]
    assert validate(got.messages, "anthropic") == []
    # the note the import left in place of the request that did not extend the conversation
    # is no message: replay says so, and of the error event after it too
    assert [str(n) for n in got.notes] == [
        "events that are not model messages, not sent: 1 annotation"
    ]
    assert [str(n) for n in to_anthropic(events).notes] == [
        "events that are not model messages, not sent: 1 annotation, 1 error"
    ]


# --- Claude Code ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in CLAUDE_CODE_SPOTTER.glob("*.jsonl")))
def test_a_claude_code_session_replays_to_a_valid_anthropic_list(
    store: LogStore, name: str
) -> None:
    events = import_events(store, CLAUDE_CODE_SPOTTER / name)
    got = to_anthropic(events)
    assert validate(got.messages, "anthropic") == []
    assert got.messages[0]["role"] == "user"
    calls = [e.payload["id"] for e in events if e.type == "tool_call"]
    sent = [
        b["id"]
        for m in got.messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert sent == calls  # every call is sent once, in log order
    # runtime lines never wear the user's voice
    runtime = [e for e in events if e.type == "message" and e.actor == "system"]
    texts = [
        b["text"] if isinstance(b, dict) else b
        for m in got.messages
        if m["role"] == "user"
        for b in (m["content"] if isinstance(m["content"], list) else [m["content"]])
        if not isinstance(b, dict) or b["type"] == "text"
    ]
    for event in runtime:
        assert f"<system_message>\n{event.payload['content']}\n</system_message>" in texts
        assert event.payload["content"] not in texts
    # and every chat format takes the same session
    assert validate(to_openai_chat(events).messages, "openai") == []
    assert validate(to_openai_responses(events).messages, "responses") == []


def test_claude_code_whitespace_text_blocks_are_dropped_and_noted(store: LogStore) -> None:
    # short.jsonl line 5 streams a text block "\n\n" before the thinking block; the Messages
    # API refuses whitespace-only text blocks.
    events = import_events(store, CLAUDE_CODE_SPOTTER / "short.jsonl")
    got = to_anthropic(events)
    assistant = got.messages[1]["content"]
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use", "tool_use"]
    assert "seq 5: 1 empty text block(s) dropped" in [str(n) for n in got.notes]
