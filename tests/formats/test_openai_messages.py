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
from agenttrail.log.store import LogStore
from agenttrail.model import Event
from agenttrail.replay import to_openai_chat, validate
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
