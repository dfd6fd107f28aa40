"""How a tool result is sent to each provider: data or content parts, a failed call, and an
id a provider refuses (docs/replay.md, the event table and Known limits).

Real recordings are read in place (``tests/formats/_recordings.py`` cites their SOURCES.md
rows): the LangGraph trace Langfuse seeds its demo with (a web search answering a JSON list
of records), the Anthropic SDK's tool runner whose tool raised (``is_error``), and Harvey's
``rec-tools.spmd`` (SOURCES.md, "Added 2026-12-01: harvey/"), whose tool ids are
``fountain:N``. What the providers take is theirs: Chat Completions' tool message takes text
or text parts, Anthropic's ``tool_result`` content a string or text, image and document
blocks (``ToolResultBlockParam``), a ``tool_use`` id must match ``^[a-zA-Z0-9_-]+$``.
"""

from __future__ import annotations

import json
from typing import Any

from agenttrail.log.store import LogStore
from agenttrail.model import Event, NewEvent, NewSession, events
from agenttrail.replay import replay, to_anthropic, to_openai_chat, to_openai_responses, validate
from tests.conftest import REALDATA
from tests.formats._recordings import LANGFUSE, TOOL_ERROR, import_events

WEB_SEARCH = LANGFUSE / "langgraph-2025-08-22.json"


def _log(store: LogStore, payloads: list[dict[str, Any]]) -> list[Event]:
    sid = store.create_session(NewSession()).id
    store.append_batch(sid, [NewEvent(p) for p in payloads])
    return list(store.read(sid))


def _tool_messages(messages: list[dict[str, Any]]) -> list[Any]:
    return [m["content"] for m in messages if m["role"] == "tool"]


def _tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        b
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def test_a_result_that_is_a_list_of_records_is_sent_as_its_json(store: LogStore) -> None:
    # it was emptied for Chat Completions (each record taken for a content part of no type)
    # and sent as blocks of no type to Anthropic, which refuses them
    found = import_events(store, WEB_SEARCH)
    records = [{"url": "https://example.com", "title": "Example Result", "q": "example"}]
    chat = to_openai_chat(found)
    [content] = _tool_messages(chat.messages)
    assert json.loads(content) == records
    [block] = _tool_results(to_anthropic(found).messages)
    assert json.loads(block["content"]) == records
    [output] = [i for i in to_openai_responses(found).messages if "output" in i]
    assert json.loads(output["output"]) == records
    for got in (chat, to_anthropic(found), to_openai_responses(found)):
        assert validate(got.messages, got.provider) == [], got.provider
        assert not [n for n in got.notes if n.kind == "dropped_blocks"], got.provider


def test_another_providers_parts_go_to_anthropic_as_its_blocks(store: LogStore) -> None:
    # Responses' function_call_output parts were sent verbatim in a tool_result
    found = _log(
        store,
        [
            events.message("user", "weather?", actor="user"),
            events.tool_call("c1", "weather", {}),
            events.tool_result("c1", output=[{"type": "input_text", "text": "Sunny"}]),
        ],
    )
    [block] = _tool_results(to_anthropic(found).messages)
    assert block["content"] == [{"type": "text", "text": "Sunny"}]


def test_a_failed_call_says_so_to_a_provider_with_no_error_flag(store: LogStore) -> None:
    # the tool raised: Anthropic's is_error was recorded, and lost on the way to OpenAI
    found = import_events(store, TOOL_ERROR)
    [block] = _tool_results(to_anthropic(found).messages)
    assert block["is_error"] is True
    said = block["content"]
    assert "Unexpected error, try again" in json.dumps(said)
    [content] = _tool_messages(to_openai_chat(found).messages)
    assert content == "error: RuntimeError('Unexpected error, try again')"
    [output] = [i for i in to_openai_responses(found).messages if "output" in i]
    assert output["output"] == content


def test_a_failed_call_with_an_empty_output_sends_its_error(store: LogStore) -> None:
    # Inspect records a tool's error beside an empty output: the error was lost everywhere
    found = _log(
        store,
        [
            events.message("user", "list it", actor="user"),
            events.tool_call("c1", "bash", {"cmd": "ls"}),
            events.tool_result("c1", "bash", output="", error="Command timed out after 30s"),
        ],
    )
    [content] = _tool_messages(to_openai_chat(found).messages)
    assert content == "error: Command timed out after 30s"
    [block] = _tool_results(to_anthropic(found).messages)
    assert (block["content"], block["is_error"]) == ("Command timed out after 30s", True)


def test_a_result_that_says_it_failed_is_not_marked_twice(store: LogStore) -> None:
    found = _log(
        store,
        [
            events.message("user", "build", actor="user"),
            events.tool_call("c1", "make", {}),
            events.tool_result("c1", output="Error: no rule to make target", is_error=True),
        ],
    )
    [content] = _tool_messages(to_openai_chat(found).messages)
    assert content == "Error: no rule to make target"


def test_an_id_anthropic_refuses_is_noted(store: LogStore) -> None:
    # Harvey's ids (fountain:23) went to the Messages API with nothing said; it answers 400
    found = import_events(store, REALDATA / "harvey" / "rec-tools.spmd")
    got = replay(found, "anthropic")
    refused = [n for n in got.notes if n.kind == "tool_id_pattern"]
    ids = [
        b["id"]
        for m in got.messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]
    assert ids and all(":" in i for i in ids)
    assert [n.seq for n in refused] == [e.seq for e in found if e.type == "tool_call"]
    assert str(refused[0]).endswith(
        f"call id {ids[0]!r} does not match ^[a-zA-Z0-9_-]+$: sent as the log holds it, "
        "which the Messages API refuses (400)"
    )
    assert not [n for n in replay(found, "openai").notes if n.kind == "tool_id_pattern"]


def test_anthropics_own_result_blocks_are_kept_as_recorded(store: LogStore) -> None:
    # a tool search's tool_reference (ToolResultBlockParam's content union) was dropped
    reference = {"type": "tool_reference", "tool_name": "get_weather"}
    found = _log(
        store,
        [
            events.message("user", "find a tool", actor="user"),
            events.tool_call("c1", "tool_search", {"query": "weather"}),
            events.tool_result("c1", output=[reference]),
        ],
    )
    got = to_anthropic(found)
    [block] = _tool_results(got.messages)
    assert block["content"] == [reference]
    assert not [n for n in got.notes if n.kind == "dropped_blocks"]
