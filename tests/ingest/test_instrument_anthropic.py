"""Anthropic Messages conversations recorded by an instrumented ``anthropic`` client (the real
SDK from PyPI) talking to the loopback upstream of tests/ingest/_upstream.py: which session
each request continues, and what each response becomes.

The replies are written here, in the shapes of the Messages API reference
(https://docs.anthropic.com/en/api/messages) and its extended thinking, web search and
streaming pages; each test also imports the same exchanges recorded, as anthropic-sdk-python's
snapshots hold them, and finds the same session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

import agenttrail
from agenttrail.ingest.instrument import capture_of
from agenttrail.log.store import open_store
from tests.formats._recordings import import_events
from tests.ingest._upstream import Reply, Upstream, payloads, sse_reply
from tests.ingest.test_instrument import client_for

MODEL = "claude-sonnet-4-5"

USAGE = {"input_tokens": 10, "output_tokens": 5}


def message_reply(number: int, content: list[dict[str, Any]]) -> Reply:
    """A Messages API response ``msg_<number>`` holding ``content``."""
    body = {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": USAGE,
    }
    return Reply(200, json.dumps(body).encode())


def user(text: str) -> dict[str, Any]:
    """The payload a prompt is stored as."""
    return {"type": "message", "role": "user", "content": text, "actor": "user"}


def answer(number: int, text: str, **extra: Any) -> dict[str, Any]:
    """The payload response ``msg_<number>`` (:func:`message_reply`) is stored as, timing
    taken out (:func:`tests.ingest._upstream.payloads`)."""
    meta = {
        "model": MODEL,
        "provider": "anthropic",
        "usage": {"input": 10, "output": 5, "cache_read": None, "cache_write": None},
        "usage_raw": USAGE,
        "location": "remote",
        "duration_ms": None,
    }
    return {
        "type": "message",
        "role": "assistant",
        "content": text,
        "meta": meta,
        "messageId": f"msg_{number}",
        "stopReason": "end_turn",
        **extra,
    }


def sessions_of(client: Any, path: Path) -> list[list[dict[str, Any]]]:
    """The payloads of each session the instrumented ``client`` wrote to ``path``."""
    capture = capture_of(client)
    assert capture is not None and capture.flush(10)
    with open_store(path) as store:
        return [payloads(list(store.read(s.id))) for s in store.sessions()]


def imported(up: Upstream, replies: list[Reply], tmp_path: Path) -> list[dict[str, Any]]:
    """The payloads of the session ``agenttrail import`` makes of the requests ``up`` got and
    the ``replies`` it gave, recorded as ``{request, response}`` records."""
    records = [
        {
            "request": {
                "method": "POST",
                "url": f"https://api.anthropic.com{path}",
                "headers": {},
                "body": json.loads(body),
            },
            "response": {"status_code": 200, "headers": {}, "body": reply.body.decode()},
        }
        for (path, _, body), reply in zip(up.requests, replies, strict=True)
    ]
    recording = tmp_path / "recorded.json"
    recording.write_text(json.dumps(records))
    with open_store(tmp_path / "import.db") as store:
        return payloads(import_events(store, recording))


def test_an_earlier_turn_sent_back_without_its_thinking_continues_the_conversation(
    up: Upstream, tmp_path: Path
) -> None:
    # Extended thinking: a client may leave the thinking blocks out of the assistant turns
    # before the last when it sends them back (the API strips them from those turns anyway,
    # https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking). Before, the
    # thinking was compared: the second request started a second session that stored "Hello"
    # and the first reply again (without its usage), then the new turn.
    def reply_content(n: int) -> list[dict[str, Any]]:
        thinking = {"type": "thinking", "thinking": f"Think {n}.", "signature": f"sig{n}"}
        return [thinking, {"type": "text", "text": f"Reply {n}."}]

    replies = [message_reply(n, reply_content(n)) for n in (1, 2, 3)]
    up.script(*replies)
    asked: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 2000,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    client = agenttrail.instrument(client_for(up, "anthropic", "sync"), log=tmp_path / "live.db")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Hello"}]
    with client:
        first = client.messages.create(messages=messages, **asked)
        text_only = [b.model_dump() for b in first.content if b.type == "text"]
        messages += [
            {"role": "assistant", "content": text_only},
            {"role": "user", "content": "And then?"},
        ]
        second = client.messages.create(messages=messages, **asked)
        # the last assistant turn goes back whole, thinking blocks and signatures included
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in second.content]},
            {"role": "user", "content": "Go on"},
        ]
        client.messages.create(messages=messages, **asked)
    [session] = sessions_of(client, tmp_path / "live.db")
    assert session == [
        user("Hello"),
        answer(1, "Reply 1.", blocks=reply_content(1)),  # its thinking kept as received
        user("And then?"),
        answer(2, "Reply 2.", blocks=reply_content(2)),
        user("Go on"),
        answer(3, "Reply 3.", blocks=reply_content(3)),
    ]
    assert imported(up, replies, tmp_path) == session


def sse(*events: dict[str, Any]) -> str:
    """A Messages API stream of ``events`` (each named by its ``type``, as the API sends)."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def test_an_error_event_mid_stream_follows_what_arrived_of_the_message(
    up: Upstream, tmp_path: Path
) -> None:
    # An error event in a stream that began with HTTP 200 (streaming docs, "Error events":
    # an overloaded_error at a time of high usage). Before, the error was stored before the
    # reply it cut short, and nothing said the reply was partial.
    start = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": USAGE,
    }
    overloaded = {"type": "overloaded_error", "message": "Overloaded"}
    text = sse(
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Par"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ti"}},
        {"type": "error", "error": overloaded},
    )
    replies = [sse_reply(text)]
    up.script(*replies)
    client = agenttrail.instrument(client_for(up, "anthropic", "sync"), log=tmp_path / "live.db")
    with client, pytest.raises(anthropic.APIStatusError, match="Overloaded") as raised:
        for _ in client.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": "Answer me"}],
            stream=True,
        ):
            pass
    assert raised.value.body == {"type": "error", "error": overloaded}
    [session] = sessions_of(client, tmp_path / "live.db")
    partial = answer(1, "Parti")
    del partial["stopReason"]  # message_delta, which brings it, never came
    assert session == [
        user("Answer me"),
        partial,
        {
            "type": "error",
            "message": "Overloaded",
            "errorType": "overloaded_error",
            "incomplete": True,
        },
    ]
    assert imported(up, replies, tmp_path) == session


@pytest.mark.parametrize(
    ("page_age", "dump"),
    [
        # a null in the response, left out by model_dump(exclude_none=True)
        ({"page_age": None}, {"exclude_none": True}),
        # a key the response left out, sent back null by model_dump()
        ({}, {}),
    ],
    ids=["null-dropped", "null-added"],
)
def test_a_server_tool_result_sent_back_with_or_without_nulls_continues_the_conversation(
    up: Upstream, tmp_path: Path, page_age: dict[str, Any], dump: dict[str, Any]
) -> None:
    # A web search result's optional page_age (web search tool docs): the SDK's model holds
    # it either way, so the block the agent sends back has a null the response did not, or
    # lacks one it had. Before, the result's content was compared as exact JSON: the second
    # request started a second session holding the whole first exchange again.
    call = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "weather in Paris"},
    }
    results = [
        {
            "type": "web_search_result",
            "url": "https://weather.example/paris",
            "title": "Paris weather",
            "encrypted_content": "EqgfCioIARgBIiQ3",
            **page_age,
        }
    ]
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": results}
    said = {"type": "text", "text": "Paris is sunny."}
    replies = [
        message_reply(1, [call, result, said]),
        message_reply(2, [{"type": "text", "text": "You're welcome."}]),
    ]
    up.script(*replies)
    client = agenttrail.instrument(client_for(up, "anthropic", "sync"), log=tmp_path / "live.db")
    asked: dict[str, Any] = {"model": MODEL, "max_tokens": 100}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris?"}]
    tools = [{"type": "web_search_20250305", "name": "web_search"}]
    with client:
        first = client.messages.create(messages=messages, tools=tools, **asked)
        messages += [
            {"role": "assistant", "content": [b.model_dump(**dump) for b in first.content]},
            {"role": "user", "content": "Thanks"},
        ]
        client.messages.create(messages=messages, **asked)
    sent = json.loads(up.requests[1][2])["messages"][1]["content"][1]["content"][0]
    assert ("page_age" in sent) != ("page_age" in results[0])  # the agent sent it changed
    [session] = sessions_of(client, tmp_path / "live.db")
    assert session == [
        user("Weather in Paris?"),
        answer(
            1,
            "Paris is sunny.",
            blocks=[said],
            order=[{"toolCall": "srvtoolu_1"}, {"toolResult": "srvtoolu_1"}, {"block": 0}],
        ),
        {
            "type": "tool_call",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "weather in Paris"},
            "server": True,
            "messageId": "msg_1",
        },
        {
            "type": "tool_result",
            "toolCallId": "srvtoolu_1",
            "output": results,  # as the response gave it
            "server": True,
            "resultType": "web_search_tool_result",
        },
        user("Thanks"),
        answer(2, "You're welcome."),
    ]
    assert imported(up, replies, tmp_path) == session
