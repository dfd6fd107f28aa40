"""The validator (``agenttrail.replay.validate``): one broken list per rule, and valid lists.

Each broken list is the smallest one that breaks exactly that rule; the rule's source (provider
doc or API error text) is in the docstring of :func:`agenttrail.replay.validate`. Real accepted
and rejected requests are checked in ``test_fidelity.py``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from agenttrail.errors import InputError
from agenttrail.replay import validate

USER = {"role": "user", "content": "hi"}


def tool_use(call_id: str = "t1") -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "f", "input": {}}


def tool_result(call_id: str = "t1") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}


def chat_call(call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def asks(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "tool_calls": list(calls)}


def tool(call_id: str = "c1") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def fcall(call_id: str = "c1") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}


def fout(call_id: str = "c1") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


# (provider, messages, [(rule, index, block, provider_path)])
BROKEN: list[tuple[str, list[Any], list[tuple[str, int, int | None, str]]]] = [
    # OpenAI Chat Completions
    ("openai", [], [("empty_request", -1, None, "messages")]),
    ("openai", [USER, "hi"], [("not_an_object", 1, None, "messages[1]")]),
    ("openai", [{"role": "robot", "content": "x"}], [("unknown_role", 0, None, "messages[0]")]),
    ("openai", [{"role": "user", "content": ""}], [("empty_content", 0, None, "messages[0]")]),
    ("openai", [USER, {"role": "assistant"}], [("empty_assistant", 1, None, "messages[1]")]),
    ("openai", [USER, tool()], [("tool_without_call", 1, None, "messages[1]")]),
    (
        "openai",
        [USER, asks(chat_call()), USER, tool()],
        [
            ("tool_call_without_result", 1, 0, "messages[1].tool_calls[0]"),
            ("tool_without_call", 3, None, "messages[3]"),
        ],
    ),
    (
        "openai",
        [USER, asks(chat_call("c1"), chat_call("c2")), tool("c2")],
        [("tool_call_without_result", 1, 0, "messages[1].tool_calls[0]")],
    ),
    (
        "openai",
        [USER, asks(chat_call()), tool(), tool()],
        [("duplicate_tool_result", 3, None, "messages[3]")],
    ),
    (
        "openai",
        [USER, asks(chat_call(), chat_call()), tool()],
        [("duplicate_tool_call_id", 1, 1, "messages[1].tool_calls[1]")],
    ),
    (
        "openai",
        [USER, asks({"id": "c1", "type": "function", "function": {"name": "f"}}), tool()],
        [("tool_call_shape", 1, 0, "messages[1].tool_calls[0]")],
    ),
    (
        # three calls' arguments run together, as a mis-assembled stream once stored them
        "openai",
        [
            USER,
            asks(
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": 1}{"b": 2}{"c": 3}'},
                }
            ),
            tool(),
        ],
        [("arguments_not_json", 1, 0, "messages[1].tool_calls[0]")],
    ),
    # Anthropic Messages
    ("anthropic", [], [("empty_request", -1, None, "messages")]),
    (
        "anthropic",
        [{"role": "system", "content": "x"}, USER],
        [("system_role", 0, None, "messages.0")],
    ),
    ("anthropic", [{"role": "user", "content": ""}], [("empty_content", 0, None, "messages.0")]),
    (
        "anthropic",
        [{"role": "user", "content": [{"type": "text", "text": " \n"}]}],
        [("empty_text_block", 0, 0, "messages.0.content.0")],
    ),
    (
        "anthropic",
        [{"role": "user", "content": [{"text": "no type"}]}],
        [("block_shape", 0, 0, "messages.0.content.0")],
    ),
    (
        "anthropic",
        [USER, {"role": "user", "content": [tool_result()]}],
        [("tool_result_without_tool_use", 1, 0, "messages.0.content.1")],
    ),
    (
        "anthropic",
        [
            USER,
            {"role": "assistant", "content": [tool_use()]},
            {"role": "user", "content": [{"type": "text", "text": "x"}, tool_result()]},
        ],
        [("tool_result_not_first", 2, 1, "messages.2.content.1")],
    ),
    (
        "anthropic",
        [USER, {"role": "assistant", "content": [tool_use()]}, USER],
        [("tool_use_without_result", 1, 0, "messages.1.content.0")],
    ),
    (
        "anthropic",
        [USER, {"role": "assistant", "content": [tool_use()]}],
        [("tool_use_without_result", 1, 0, "messages.1.content.0")],
    ),
    (
        "anthropic",
        [
            USER,
            {"role": "assistant", "content": [tool_use()]},
            {"role": "user", "content": [tool_result(), tool_result()]},
        ],
        [("duplicate_tool_result", 2, 1, "messages.2.content.1")],
    ),
    (
        "anthropic",
        [
            USER,
            {"role": "assistant", "content": [tool_use()]},
            {"role": "user", "content": [tool_result()]},
            {"role": "assistant", "content": [tool_use()]},
            {"role": "user", "content": [tool_result()]},
        ],
        [("duplicate_tool_use_id", 3, 0, "messages.3.content.0")],
    ),
    (
        "anthropic",
        [
            USER,
            {"role": "assistant", "content": [tool_use("call.1")]},
            {"role": "user", "content": [tool_result("call.1")]},
        ],
        [("tool_use_id_pattern", 1, 0, "messages.1.content.0")],
    ),
    (
        "anthropic",
        [{"role": "user", "content": [tool_use()]}],
        [
            ("tool_use_in_user", 0, 0, "messages.0.content.0"),
        ],
    ),
    (
        "anthropic",
        [USER, {"role": "assistant", "content": [tool_result()]}],
        [("tool_result_in_assistant", 1, 0, "messages.1.content.0")],
    ),
    # OpenAI Responses
    ("responses", [], [("empty_request", -1, None, "input")]),
    ("responses", [{"role": "user", "content": ""}], [("empty_content", 0, None, "input[0]")]),
    (
        "responses",
        [USER, {"role": "assistant", "content": ""}],
        [("empty_assistant", 1, None, "input[1]")],
    ),
    ("responses", [{"role": "robot", "content": "x"}], [("unknown_role", 0, None, "input[0]")]),
    ("responses", [USER, fcall()], [("call_without_output", 1, None, "input[1]")]),
    ("responses", [USER, fout()], [("output_without_call", 1, None, "input[1]")]),
    (
        "responses",
        [USER, fout(), fcall()],
        [
            ("output_without_call", 1, None, "input[1]"),
            ("call_without_output", 2, None, "input[2]"),
        ],
    ),
    ("responses", [USER, fcall(), fout(), fout()], [("duplicate_output", 3, None, "input[3]")]),
    (
        "responses",
        [USER, fcall(), fcall(), fout()],
        [("duplicate_call_id", 2, None, "input[2]")],
    ),
    (
        "responses",
        [USER, {"type": "function_call", "call_id": "c1", "name": "f"}, fout()],
        [("call_shape", 1, None, "input[1]")],
    ),
    (
        "responses",
        [USER, fcall() | {"arguments": '{"location": "P'}, fout()],
        [("arguments_not_json", 1, None, "input[1]")],
    ),
]


@pytest.mark.parametrize(("provider", "messages", "expected"), BROKEN)
def test_each_rule(
    provider: str, messages: list[Any], expected: list[tuple[str, int, int | None, str]]
) -> None:
    got = validate(messages, provider)
    assert [(v.rule, v.index, v.block, v.provider_path) for v in got] == expected
    assert all(str(v).startswith(v.provider_path + ": ") for v in got)


def test_every_documented_rule_has_a_broken_example() -> None:
    # the rule codes are the bracketed names in validate's docstring
    assert validate.__doc__ is not None
    documented = {
        code.strip()
        for group in re.findall(r"\[([a-z_, ]+)\]", validate.__doc__)
        for code in group.split(",")
    }
    assert {rule for _, _, expected in BROKEN for rule, *_ in expected} == documented


VALID: list[tuple[str, list[Any]]] = [
    ("openai", [USER, asks(chat_call("c1"), chat_call("c2")), tool("c2"), tool("c1"), USER]),
    ("openai", [{"role": "system", "content": "s"}, USER, {"role": "assistant", "content": "a"}]),
    (
        "anthropic",
        [
            USER,
            {"role": "assistant", "content": [{"type": "text", "text": "a"}, tool_use("t1")]},
            {"role": "user", "content": [tool_result("t1"), {"type": "text", "text": "more"}]},
            {"role": "assistant", "content": ""},  # an empty final assistant message is allowed
        ],
    ),
    (
        "anthropic",
        # consecutive user messages are one turn: the results are still first in it
        [
            USER,
            {"role": "assistant", "content": [tool_use("t1"), tool_use("t2")]},
            {"role": "user", "content": [tool_result("t2")]},
            {"role": "user", "content": [tool_result("t1")]},
            USER,
        ],
    ),
    (
        "anthropic",
        # server tools are answered by the server, in the assistant message or not at all
        [USER, {"role": "assistant", "content": [{**tool_use("srv1"), "type": "server_tool_use"}]}],
    ),
    ("responses", [USER, fcall("c1"), fcall("c2"), fout("c2"), fout("c1"), {"type": "reasoning"}]),
]


@pytest.mark.parametrize(("provider", "messages"), VALID)
def test_valid_lists(provider: str, messages: list[Any]) -> None:
    assert validate(messages, provider) == []


def test_a_continued_responses_input_may_answer_calls_it_does_not_hold() -> None:
    assert validate([fout()], "responses", previous_response_id="resp_1") == []
    assert validate([], "responses", previous_response_id="resp_1") == []


def test_bad_arguments() -> None:
    with pytest.raises(InputError, match="unknown provider 'gemini'"):
        validate([], "gemini")
    with pytest.raises(InputError, match="expected a list"):
        validate({"messages": []}, "openai")  # type: ignore[arg-type]
