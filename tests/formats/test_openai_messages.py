"""OpenAI message lists in the shapes other tools store them (``agenttrail.formats.openai``):
messages encoded as JSON strings, arguments given as objects, and the legacy
``function_call`` / role ``function`` protocol.

The inputs here are written by hand from the provider's documentation
(https://platform.openai.com/docs/api-reference/chat/create: ``function_call`` and role
``function`` are the deprecated form of ``tool_calls`` and role ``tool``). The real ToolBench
file is read in place in ``tests/formats/test_toolbench.py``. The ``store`` fixture
(``tests/conftest.py``) is a real log on each backend.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import FormatError
from agenttrail.formats import detect, openai, read_file
from agenttrail.formats.openai import read
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore
from agenttrail.model import Event
from agenttrail.replay import to_anthropic, to_openai_chat, to_openai_responses, validate
from agenttrail.views.pairing import pair_tool_calls
from tests.formats._recordings import import_events


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def of_type(events: list[Event], kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.type == kind]


# --- messages encoded as JSON strings, arguments as objects ----------------------------------

SPAN_MESSAGES = [
    json.dumps({"role": "system", "content": "You list files."}),
    json.dumps({"role": "user", "content": "what is in src?"}),
    json.dumps(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": {"path": "src", "all": True}},
                }
            ],
        }
    ),
    json.dumps({"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"}),
]
"""A request's messages as a tracing span attribute holds them: each one a JSON string, and
the call's arguments an object rather than the JSON string the API sends."""


@pytest.mark.parametrize(
    "document",
    [SPAN_MESSAGES, {"model": "gpt-4o", "messages": SPAN_MESSAGES}],
    ids=["message list", "request body"],
)
def test_messages_encoded_as_json_strings_import(
    store: LogStore, tmp_path: Path, document: Any
) -> None:
    path = write_json(tmp_path / "span.json", document)
    assert detect(path, path.read_bytes()) is openai
    events = import_events(store, path)
    assert [(e.type, e.payload.get("role")) for e in events] == [
        ("message", "system"),
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", None),
        ("tool_result", None),
    ]
    [call] = of_type(events, "tool_call")
    assert (call["id"], call["name"], call["input"]) == (
        "call_1",
        "ls",
        {"path": "src", "all": True},
    )
    assert "arguments" not in call  # the source gave no string to keep
    [result] = of_type(events, "tool_result")
    assert (result["toolCallId"], result["output"]) == ("call_1", "a.py\nb.py")
    assert pair_tool_calls(events).anomalies == {}
    # replay sends the object as a JSON string, the form the API takes (keys in the stored
    # order: canonical CBOR sorts them, docs/log-format.md)
    chat = to_openai_chat(events)
    arguments = chat.messages[2]["tool_calls"][0]["function"]["arguments"]
    assert arguments == '{"all":true,"path":"src"}'
    assert validate(chat.messages, "openai") == []


@pytest.mark.parametrize(
    ("element", "problem"),
    [("not json", "str"), ('{"role": "user"', "str"), ("[1, 2]", "str"), (7, "int")],
    ids=["text", "cut off", "a JSON list", "a number"],
)
def test_a_message_that_is_neither_object_nor_encoded_object_is_named(
    tmp_path: Path, element: Any, problem: str
) -> None:
    path = write_json(tmp_path / "bad.json", [SPAN_MESSAGES[1], element])
    with pytest.raises(FormatError) as caught:
        read_file(path, "openai")
    assert caught.value.field == "[1]"
    assert f"not {problem}" in str(caught.value) and str(path) in str(caught.value)


# --- the legacy function_call protocol: no ids, paired by its own rule -----------------------


def legacy_call(name: str, arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "function_call": {"name": name, "arguments": arguments},
    }


def function(name: str, content: str) -> dict[str, Any]:
    return {"role": "function", "name": name, "content": content}


LEGACY = [
    {"role": "user", "content": "weather in Paris, then Lyon?"},  # 1
    legacy_call("get_weather", '{"city": "Paris"}'),  # 2 message, 3 call
    function("get_weather", "18C"),  # 4 answers 3
    legacy_call("get_weather", {"city": "Lyon"}),  # 5 message, 6 call (arguments an object)
    function("get_forecast", "rain"),  # 7 another name: answers nothing, and 6 is left open
    legacy_call("get_time", "{}"),  # 8 message, 9 call
    {"role": "assistant", "content": "One moment."},  # 10 the model spoke: 9 is unanswered
    function("get_time", "12:00"),  # 11 too late: answers nothing
]
"""A legacy conversation written by hand; beside each message, the seqs it becomes and what
the protocol's rule (one call per assistant message, answered by the next ``function``
message with the same name, before the model speaks again) pairs it with."""


def test_legacy_function_calls_pair_by_the_protocols_rule(store: LogStore, tmp_path: Path) -> None:
    path = write_json(tmp_path / "legacy.json", LEGACY)
    events = import_events(store, path)
    calls = {e.seq: e.payload for e in events if e.type == "tool_call"}
    results = {e.seq: e.payload for e in events if e.type == "tool_result"}
    assert {seq: c["id"] for seq, c in calls.items()} == {
        3: "legacy_call_3",
        6: "legacy_call_6",
        9: "legacy_call_9",
    }
    assert {seq: c.get("pairedBy") for seq, c in calls.items()} == dict.fromkeys(
        (3, 6, 9), "legacy_function_call"
    )
    assert calls[6]["input"] == {"city": "Lyon"}
    assert {seq: (r.get("toolCallId"), r.get("pairedBy")) for seq, r in results.items()} == {
        4: ("legacy_call_3", "legacy_function_call"),
        7: (None, None),
        11: (None, None),
    }
    pairing = pair_tool_calls(events)
    assert {c: r.seq for c, r in pairing.result_of.items()} == {3: 4}
    assert {seq: a.kind for seq, a in pairing.anomalies.items()} == {
        6: "no_result",
        7: "missing_id",
        9: "no_result",
        11: "missing_id",
    }
    # re-import is idempotent: the same file gives the same ids and writes nothing
    [again] = import_paths(store, [path])
    assert (again.written, again.skipped) == (0, len(events))
    assert [i.payload for i in read(path, path.read_bytes())[0].events] == [
        e.payload for e in events
    ]


def test_legacy_function_calls_replay_as_tool_calls(store: LogStore, tmp_path: Path) -> None:
    events = import_events(store, write_json(tmp_path / "legacy.json", LEGACY[:3]))
    chat = to_openai_chat(events)
    assert chat.messages[1:] == [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "legacy_call_3",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "legacy_call_3", "content": "18C"},
    ]
    assert [(n.seq, n.kind) for n in chat.notes] == [(3, "legacy_call")]
    for replayed, provider in [
        (chat, "openai"),
        (to_anthropic(events), "anthropic"),
        (to_openai_responses(events), "responses"),
    ]:
        assert validate(replayed.messages, provider) == [], provider
