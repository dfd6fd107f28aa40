"""Replay: worked cases, each rule of docs/replay.md, the notes, and the public surface.

Logs are written to a real log (the ``store`` fixture, each backend) and read back, as replay
reads them in use. Property tests over random logs are in ``test_properties.py``, real
recordings in ``test_fidelity.py``, the validator's rules in ``test_validate.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import InputError
from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import Event, NewEvent, NewSession, events
from agenttrail.replay import (
    PLACEHOLDER,
    PROVIDERS,
    Replay,
    replay,
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
    validate,
)

Payload = dict[str, Any]


def log(store: LogStore, payloads: list[Payload]) -> list[Event]:
    sid = store.create_session(NewSession()).id
    store.append_batch(sid, [NewEvent(p) for p in payloads])
    return list(store.read(sid))


def all_replays(found: list[Event]) -> list[Replay]:
    return [replay(found, provider) for provider in PROVIDERS]


def assert_valid(found: list[Event]) -> None:
    for got in all_replays(found):
        assert validate(got.messages, got.provider) == [], got.provider


def notes(got: Replay) -> list[str]:
    return [str(n) for n in got.notes]


def user(text: str, **extra: Any) -> Payload:
    return events.message("user", text, actor="user", **extra)


def assistant(text: str = "", **extra: Any) -> Payload:
    return events.message("assistant", text, **extra)


def call(call_id: str, name: str, args: Any = None, **extra: Any) -> Payload:
    return events.tool_call(call_id, name, {} if args is None else args, **extra)


def result(call_id: str | None, output: Any, **extra: Any) -> Payload:
    return events.tool_result(call_id, output=output, **extra)


# --- worked cases --------------------------------------------------------------------------


@pytest.fixture
def find_todos(store: LogStore) -> list[Event]:
    """User "find TODOs"; the assistant calls c1 grep and c2 ls; only c1 has a result; then the
    user says "hi"."""
    return log(
        store,
        [
            user("find TODOs"),
            assistant(""),
            call("c1", "grep", {"pattern": "TODO"}),
            call("c2", "ls", {"path": "."}),
            result("c1", "a.py:3: # TODO"),
            user("hi"),
        ],
    )


def test_case_1_openai_placeholder_for_the_call_with_no_result(find_todos: list[Event]) -> None:
    got = to_openai_chat(find_todos)
    assert got.messages == [
        {"role": "user", "content": "find TODOs"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "grep", "arguments": '{"pattern":"TODO"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path":"."}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py:3: # TODO"},
        {"role": "tool", "tool_call_id": "c2", "content": PLACEHOLDER},
        {"role": "user", "content": "hi"},
    ]
    assert validate(got.messages, "openai") == []
    assert notes(got) == [
        "seq 4: call 'c2' (ls) has no result recorded: a placeholder result was sent"
    ]


def test_case_1_anthropic_placeholder_first_then_the_users_text(find_todos: list[Event]) -> None:
    got = to_anthropic(find_todos)
    assert got.system is None
    assert got.messages == [
        {"role": "user", "content": "find TODOs"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "grep", "input": {"pattern": "TODO"}},
                {"type": "tool_use", "id": "c2", "name": "ls", "input": {"path": "."}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "a.py:3: # TODO"},
                {"type": "tool_result", "tool_use_id": "c2", "content": PLACEHOLDER},
                {"type": "text", "text": "hi"},
            ],
        },
    ]
    assert validate(got.messages, "anthropic") == []
    assert [n.kind for n in got.notes] == ["placeholder"]


def test_case_1_no_empty_assistant_message_is_sent(find_todos: list[Event]) -> None:
    for got in all_replays(find_todos):
        assistants = [m for m in got.messages if m.get("role") == "assistant"]
        assert all(m.get("content") or m.get("tool_calls") for m in assistants)
    items = to_openai_responses(find_todos).messages
    assert [i.get("type", i.get("role")) for i in items] == [
        "user",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "user",
    ]
    assert items[4] == {"type": "function_call_output", "call_id": "c2", "output": PLACEHOLDER}
    assert_valid(find_todos)


def test_case_1_an_assistant_message_with_nothing_in_it_is_dropped_and_noted(
    store: LogStore,
) -> None:
    found = log(store, [user("find TODOs"), assistant(""), user("hi")])
    for got in all_replays(found):
        assert [m.get("role") for m in got.messages] == (
            ["user"] if got.provider == "anthropic" else ["user", "user"]
        )
        assert notes(got) == [
            "seq 2: assistant message with no content and no tool calls: not sent"
        ]
    # Anthropic: the two user messages around the dropped one become one turn
    assert to_anthropic(found).messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "find TODOs"}, {"type": "text", "text": "hi"}],
        }
    ]


CASE_2 = [
    {"role": "user", "content": "What's the weather in Paris?"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Here is what the tool said:"},
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18°C, clear"},
        ],
    },
]
"""A user message whose content is text then a tool_result (an Anthropic message list)."""


def test_case_2_anthropic_puts_the_tool_result_block_first(store: LogStore, tmp_path: Path) -> None:
    path = tmp_path / "text-then-result.json"
    path.write_text(json.dumps(CASE_2), encoding="utf-8")
    [report] = import_paths(store, [path])
    found = list(store.read(report.session_id))
    assert [v.rule for v in validate(CASE_2, "anthropic")] == ["tool_result_not_first"]
    got = to_anthropic(found)
    assert got.messages == [
        CASE_2[0],
        CASE_2[1],
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18°C, clear"},
                {"type": "text", "text": "Here is what the tool said:"},
            ],
        },
    ]
    assert validate(got.messages, "anthropic") == []
    assert got.notes == ()
    chat = to_openai_chat(found).messages
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "user"]
    assert chat[1]["content"] == "Let me look."
    assert_valid(found)


def test_case_2_text_logged_before_the_result_still_follows_it(store: LogStore) -> None:
    # The same shape written event by event: the text comes first in the log.
    found = log(
        store,
        [
            user("weather?"),
            assistant("Checking."),
            call("t1", "weather", {"city": "Paris"}),
            user("also check Lyon"),
            result("t1", "18°C"),
        ],
    )
    got = to_anthropic(found)
    assert got.messages[-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "18°C"},
            {"type": "text", "text": "also check Lyon"},
        ],
    }
    assert [m["role"] for m in to_openai_chat(found).messages] == [
        "user",
        "assistant",
        "tool",
        "user",
    ]
    assert_valid(found)


SIX = [f"call_{n}" for n in range(6)]


@pytest.mark.parametrize("seed", range(5))
def test_case_3_six_shuffled_results_follow_one_message_in_call_order(
    store: LogStore, seed: int
) -> None:
    order = SIX[:]
    random.Random(seed).shuffle(order)
    found = log(
        store,
        [
            user("read the six files"),
            assistant("Reading all six."),
            *(call(c, "read_file", {"path": f"{c}.txt"}) for c in SIX),
            *(result(c, f"contents of {c}") for c in order),
        ],
    )
    chat = to_openai_chat(found).messages
    assert [m["role"] for m in chat] == ["user", "assistant"] + ["tool"] * 6
    assert [c["id"] for c in chat[1]["tool_calls"]] == SIX
    assert [(m["tool_call_id"], m["content"]) for m in chat[2:]] == [
        (c, f"contents of {c}") for c in SIX
    ]
    anthropic = to_anthropic(found).messages
    assert [m["role"] for m in anthropic] == ["user", "assistant", "user"]
    assert [b["id"] for b in anthropic[1]["content"] if b["type"] == "tool_use"] == SIX
    assert [(b["tool_use_id"], b["content"]) for b in anthropic[2]["content"]] == [
        (c, f"contents of {c}") for c in SIX
    ]
    items = to_openai_responses(found).messages
    assert [i.get("call_id") for i in items[2:]] == SIX + SIX
    assert [i["type"] for i in items[2:]] == ["function_call"] * 6 + ["function_call_output"] * 6
    assert_valid(found)
    assert all(got.notes == () for got in all_replays(found))


# --- results behind their calls -------------------------------------------------------------


def test_a_result_logged_before_its_call_is_sent_after_it(store: LogStore) -> None:
    found = log(store, [user("go"), result("c1", "done"), assistant("ok"), call("c1", "run")])
    chat = to_openai_chat(found).messages
    assert [m["role"] for m in chat] == ["user", "assistant", "tool"]
    assert chat[2] == {"role": "tool", "tool_call_id": "c1", "content": "done"}
    assert_valid(found)


def test_an_orphan_result_is_never_sent_and_is_reported(store: LogStore) -> None:
    found = log(store, [user("go"), result("ghost", "boo"), assistant("nothing to do")])
    for got in all_replays(found):
        assert "ghost" not in got.json()
        assert notes(got) == ["seq 2: result for 'ghost', which matches no call: not sent"]
    assert_valid(found)


def test_results_without_an_id_and_calls_without_an_id_are_left_out(store: LogStore) -> None:
    found = log(
        store,
        [user("go"), assistant("x"), call("", "legacy"), result(None, "legacy output")],
    )
    got = to_openai_chat(found)
    assert got.messages == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "x"},
    ]
    assert [n.kind for n in got.notes] == ["missing_id", "missing_id"]
    assert got.tools == ("legacy",)  # it was still used
    assert_valid(found)


def test_a_reused_call_id_is_sent_once_with_its_first_result(store: LogStore) -> None:
    # Some local models number their calls call_0, call_1 … afresh each turn.
    found = log(
        store,
        [
            user("a"),
            call("call_0", "read", {"path": "a"}),
            result("call_0", "A"),
            user("b"),
            call("call_0", "read", {"path": "b"}),
            result("call_0", "B"),
        ],
    )
    got = to_anthropic(found)
    assert validate(got.messages, "anthropic") == []
    assert notes(got) == [
        "seq 5: call id 'call_0' was already used by seq 2: this call is not sent "
        "(providers need unique ids)",
        "seq 6: another result for call 'call_0' was already sent (seq 3): not sent",
    ]
    assert_valid(found)


def test_calls_after_a_result_start_a_new_assistant_turn(store: LogStore) -> None:
    # A recorder writes call, result, call, result, reply: the model saw the first result
    # before it made the second call.
    found = log(
        store,
        [
            user("build"),
            call("c1", "make"),
            result("c1", "error: undefined foo", is_error=True),
            call("c2", "edit"),
            result("c2", "fixed"),
            assistant("Fixed it."),
        ],
    )
    anthropic = to_anthropic(found).messages
    assert [m["role"] for m in anthropic] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert anthropic[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "c1",
            "content": "error: undefined foo",
            "is_error": True,
        }
    ]
    assert_valid(found)


def test_a_call_running_at_upto_seq_gets_a_placeholder(store: LogStore) -> None:
    found = log(store, [user("go"), assistant(""), call("c1", "slow"), result("c1", "late")])
    early = to_anthropic(found, upto_seq=3)
    assert early.messages[-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": PLACEHOLDER}
    ]
    assert to_anthropic(found, upto_seq=4).messages[-1]["content"][0]["content"] == "late"
    assert to_anthropic(found, upto_seq=0).messages == []
    assert notes(to_anthropic(found, upto_seq=0)) == [
        "nothing to send: no message in the replayed events"
    ]


def test_error_results_are_marked(store: LogStore) -> None:
    found = log(
        store,
        [
            user("run"),
            call("c1", "sh", {"cmd": "false"}),
            events.tool_result("c1", "sh", error="exit status 1"),
            call("c2", "sh", {"cmd": "make"}),
            result("c2", "make: *** Error 2", exit_code=2),
        ],
    )
    anthropic = to_anthropic(found).messages
    assert anthropic[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "exit status 1", "is_error": True}
    ]
    assert anthropic[4]["content"][0]["is_error"] is True
    chat = to_openai_chat(found).messages
    assert chat[2]["content"] == "error: exit status 1"


# --- who speaks ----------------------------------------------------------------------------


def test_user_tool_invocations_are_context_not_the_agents_calls(store: LogStore) -> None:
    found = log(
        store,
        [
            user("look at notes.txt"),
            events.tool_call("u1", "read", {"path": "notes.txt"}, actor="user"),
            events.tool_result("u1", "read", output="buy milk", actor="user"),
            assistant("You need to buy milk."),
        ],
    )
    action = '<user_action id="u1" tool="read">\n{"path":"notes.txt"}\n</user_action>'
    answer = '<user_action_result id="u1" tool="read" status="ok">\nbuy milk\n</user_action_result>'
    chat = to_openai_chat(found)
    assert chat.messages == [
        {"role": "user", "content": "look at notes.txt"},
        {"role": "user", "content": action},
        {"role": "user", "content": answer},
        {"role": "assistant", "content": "You need to buy milk."},
    ]
    assert chat.tools == ("read",)
    assert [n.kind for n in chat.notes] == ["user_action", "user_action"]
    anthropic = to_anthropic(found).messages
    assert anthropic[0]["content"] == [
        {"type": "text", "text": "look at notes.txt"},
        {"type": "text", "text": action},
        {"type": "text", "text": answer},
    ]
    for got in all_replays(found):
        text = got.json()
        assert "tool_use" not in text and "tool_calls" not in text and "function_call" not in text
    assert_valid(found)


def test_a_failed_user_action_says_so(store: LogStore) -> None:
    found = log(
        store,
        [
            events.tool_call("u1", "write", {"path": "/etc/x"}, actor="user"),
            events.tool_result("u1", "write", error="permission denied\nmore", actor="user"),
        ],
    )
    message = to_openai_chat(found).messages[-1]
    assert 'status="error: permission denied"' in message["content"]
    assert message["content"].endswith("\npermission denied\nmore\n</user_action_result>")


def test_runtime_messages_never_wear_the_users_voice(store: LogStore) -> None:
    found = log(
        store,
        [
            events.message("system", "You are terse.", actor="system"),
            user("hi"),
            events.message("user", "[Request interrupted by user]", actor="system"),
            assistant("Stopped."),
        ],
    )
    chat = to_openai_chat(found).messages
    assert chat == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "[Request interrupted by user]"},
        {"role": "assistant", "content": "Stopped."},
    ]
    got = to_anthropic(found)
    assert got.system == "You are terse."
    assert got.messages[0]["content"] == [
        {"type": "text", "text": "hi"},
        {
            "type": "text",
            "text": "<system_message>\n[Request interrupted by user]\n</system_message>",
        },
    ]
    assert [n.kind for n in got.notes] == ["runtime"]
    items = to_openai_responses(found).messages
    assert items[2] == {"role": "system", "content": "[Request interrupted by user]"}
    assert_valid(found)


def test_a_trigger_is_not_disguised_as_the_user(store: LogStore) -> None:
    found = log(store, [events.message("user", "nightly build failed", actor="trigger")])
    [message] = to_openai_chat(found).messages
    assert message == {"role": "user", "content": "<trigger>\nnightly build failed\n</trigger>"}


def test_anthropic_sends_the_latest_system_prompt_and_notes_the_older(store: LogStore) -> None:
    found = log(
        store,
        [
            events.message("system", "v1", actor="system"),
            user("a"),
            assistant("b"),
            events.message("system", "v2", actor="system"),
            user("c"),
        ],
    )
    got = to_anthropic(found)
    assert got.system == "v2"
    assert notes(got) == [
        "seq 1: system prompt replaced by seq 4 (Anthropic takes one system prompt per request)"
    ]
    assert [m["role"] for m in to_openai_chat(found).messages] == [
        "system",
        "user",
        "assistant",
        "system",
        "user",
    ]


def test_responses_instructions_are_the_instructions_parameter(store: LogStore) -> None:
    found = log(
        store,
        [
            events.message("system", "Be brief.", actor="system", sourceField="instructions"),
            events.message("system", "Dev note", actor="system", sourceRole="developer"),
            user("hi"),
        ],
    )
    got = to_openai_responses(found)
    assert got.instructions == "Be brief."
    assert got.body() == {
        "instructions": "Be brief.",
        "input": [{"role": "developer", "content": "Dev note"}, {"role": "user", "content": "hi"}],
    }


# --- empty things --------------------------------------------------------------------------


def test_empty_messages_and_blank_text_blocks_are_dropped_and_noted(store: LogStore) -> None:
    found = log(
        store,
        [
            user(""),
            user("  "),
            user("real", blocks=[{"type": "text", "text": "real"}, {"type": "text", "text": " "}]),
            assistant("\n\n"),
            assistant("ok", blocks=[{"type": "text", "text": ""}, {"type": "text", "text": "ok"}]),
        ],
    )
    got = to_anthropic(found)
    assert got.messages == [
        {"role": "user", "content": [{"type": "text", "text": "real"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    ]
    assert [n.kind for n in got.notes] == ["empty_dropped"] * 6
    assert_valid(found)


def test_only_assembled_messages_are_replayed(store: LogStore) -> None:
    # A partial ({textDelta}) is never stored; if an unknown shape like it is in a log it is a
    # generic event, never a message.
    found = log(
        store,
        [
            user("hi"),
            {"type": "partial", "textDelta": "Hel"},
            assistant("Hello"),
            {"type": "annotation", "kind": "progress", "actor": "system"},
        ],
    )
    for got in all_replays(found):
        assert "Hel" not in got.json().replace("Hello", "")
        assert notes(got) == [
            "events that are not model messages, not sent: 1 annotation, 1 partial"
        ]


# --- provider-specific shapes ---------------------------------------------------------------


def test_server_tool_calls_get_no_placeholder_and_have_no_openai_form(store: LogStore) -> None:
    found = log(
        store,
        [
            user("search"),
            assistant("Searching."),
            call("srvtoolu_1", "web_search", {"query": "x"}, server=True),
            result(
                "srvtoolu_1",
                [{"type": "web_search_result", "url": "https://example.com", "title": "x"}],
                server=True,
                resultType="web_search_tool_result",
            ),
            call("srvtoolu_2", "code_execution", {"code": "1"}, server=True),
        ],
    )
    got = to_anthropic(found)
    assert got.messages[1]["content"] == [
        {"type": "text", "text": "Searching."},
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "x"},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "url": "https://example.com", "title": "x"}],
        },
        {
            "type": "server_tool_use",
            "id": "srvtoolu_2",
            "name": "code_execution",
            "input": {"code": "1"},
        },
    ]
    assert got.notes == ()
    chat = to_openai_chat(found)
    assert chat.messages[1] == {"role": "assistant", "content": "Searching."}
    assert [n.kind for n in chat.notes] == ["call_not_sent", "call_not_sent"]
    assert_valid(found)


def test_arguments_are_sent_as_the_model_wrote_them(store: LogStore) -> None:
    raw = '{"location": "Seattle, WA"}'
    found = log(
        store,
        [
            user("w"),
            assistant(""),
            call("c1", "weather", {"location": "Seattle, WA"}, arguments=raw),
        ],
    )
    assert to_openai_chat(found).messages[1]["tool_calls"][0]["function"]["arguments"] == raw
    assert to_openai_responses(found).messages[1]["arguments"] == raw


def test_an_input_that_is_not_an_object_is_wrapped_for_anthropic(store: LogStore) -> None:
    found = log(store, [user("w"), assistant(""), call("c1", "patch", "*** Begin Patch")])
    got = to_anthropic(found)
    assert got.messages[1]["content"][0]["input"] == {"input": "*** Begin Patch"}
    assert "filled_in" in [n.kind for n in got.notes]


def test_custom_tool_calls(store: LogStore) -> None:
    found = log(
        store,
        [
            user("w"),
            assistant(""),
            call("c1", "apply", "diff", toolType="custom"),
            result("c1", "ok"),
        ],
    )
    assert to_openai_chat(found).messages[1]["tool_calls"] == [
        {"id": "c1", "type": "custom", "custom": {"name": "apply", "input": "diff"}}
    ]
    assert to_openai_responses(found).messages[1:] == [
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply", "input": "diff"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
    ]
    assert_valid(found)


def test_blocks_with_no_equivalent_are_dropped_and_noted(store: LogStore) -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    # a document in Anthropic's Files API: OpenAI cannot read another provider's file id
    stored = {"type": "document", "source": {"type": "file", "file_id": "file_011"}}
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    found = log(
        store,
        [
            user("look", blocks=[{"type": "text", "text": "look"}, image, stored]),
            assistant("It is a cat.", blocks=[thinking, {"type": "text", "text": "It is a cat."}]),
        ],
    )
    anthropic = to_anthropic(found)
    assert anthropic.messages[0]["content"][1:] == [image, stored]
    assert anthropic.messages[1]["content"][0] == thinking
    chat = to_openai_chat(found)
    linked = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    assert chat.messages == [
        {"role": "user", "content": [{"type": "text", "text": "look"}, linked]},
        {"role": "assistant", "content": "It is a cat."},
    ]
    assert notes(chat) == [
        "seq 1: 1 content block(s) (document) not sent: no Chat Completions equivalent",
        "seq 2: 1 content block(s) (thinking) not sent: no Chat Completions equivalent",
    ]


def test_a_responses_message_item_whose_text_is_sent_is_not_noted_as_left_out(
    store: LogStore,
) -> None:
    # the note named "message" among the blocks not sent, beside the text it had sent
    said = {"type": "message", "content": [{"type": "output_text", "text": "Searching."}]}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    found = log(store, [user("find it"), assistant("Searching.", blocks=[said, reasoning])])
    chat = to_openai_chat(found)
    assert chat.messages[1] == {"role": "assistant", "content": "Searching."}
    assert notes(chat) == [
        "seq 2: 1 content block(s) (reasoning) not sent: no Chat Completions equivalent"
    ]


# --- the promoted tool set, determinism, errors ------------------------------------------------


def test_the_promoted_tool_set_is_rebuilt_from_tool_calls(store: LogStore) -> None:
    found = log(
        store,
        [
            user("a"),
            call("c1", "grep"),
            call("c2", "read"),
            result("c1", "x"),
            call("c3", "grep"),
            events.tool_call("u1", "write", {}, actor="user"),
            call("c4", "edit"),
        ],
    )
    assert {got.tools for got in all_replays(found)} == {("grep", "read", "write", "edit")}
    assert to_openai_chat(found, upto_seq=3).tools == ("grep", "read")


def test_the_same_events_give_the_same_bytes_in_any_order(find_todos: list[Event]) -> None:
    for provider in PROVIDERS:
        once = replay(find_todos, provider)
        again = replay(list(reversed(find_todos)), provider)
        assert once.json() == again.json()
        assert once == again
        assert json.loads(once.json()) == once.body()


def test_replay_after_export_and_import_is_identical(
    find_todos: list[Event], tmp_path: Path
) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text("".join(line + "\n" for line in jsonl_from_events(find_todos)), "utf-8")
    with open_store(tmp_path / "other.db") as other:
        [report] = import_paths(other, [path])
        imported = list(other.read(report.session_id))
    for provider in PROVIDERS:
        assert replay(imported, provider).json() == replay(find_todos, provider).json()


def test_json_writes_lone_surrogates_as_escapes(store: LogStore) -> None:
    found = log(store, [user("bad \udc81 byte")])
    got = to_openai_chat(found)
    assert "\\udc81" in got.json() and "\\udc81" in got.json(indent=2)
    got.json(indent=2).encode("utf-8")
    assert json.loads(got.json())["messages"][0]["content"] == "bad \udc81 byte"


def test_body_shapes(find_todos: list[Event]) -> None:
    assert list(to_openai_chat(find_todos).body()) == ["messages"]
    assert list(to_anthropic(find_todos).body()) == ["messages"]
    assert list(to_openai_responses(find_todos).body()) == ["input"]


def test_bad_arguments_raise_input_errors(store: LogStore, find_todos: list[Event]) -> None:
    with pytest.raises(InputError, match="upto_seq"):
        to_openai_chat(find_todos, upto_seq=-1)
    with pytest.raises(InputError, match="unknown replay format 'gemini'"):
        replay(find_todos, "gemini")
    other = log(store, [user("elsewhere")])
    with pytest.raises(InputError, match="one session"):
        to_anthropic([*find_todos, *other])
    with pytest.raises(InputError, match="names no response"):
        to_openai_responses(find_todos, previous_response_id="resp_nope")


# --- a user message retried by the client ----------------------------------------------------


def test_a_user_message_retried_after_failures_is_one_turn(store: LogStore) -> None:
    # The client sent "deploy it", the API failed twice (logged as errors), the client sent the
    # same words again and got an answer: the log keeps three attempts, replay sends one.
    failure = events.error("overloaded", code=529)
    attempt = user("deploy it")
    found = log(
        store,
        [user("hi"), assistant("hello"), attempt, failure, failure, attempt, assistant("done")],
    )
    assert [e.type for e in found].count("message") == 5  # every attempt stays in the log
    for got in all_replays(found):
        sent = json.dumps(got.messages)
        assert sent.count("deploy it") == 1, got.provider
        assert [n for n in notes(got) if "sent again" in n] == [
            "seq 6: the user message of seq 3 sent again after the failures at seqs 4, 5: "
            "one turn, sent once"
        ]
    chat = to_openai_chat(found).messages
    assert [m["role"] for m in chat] == ["user", "assistant", "user", "assistant"]
    assert_valid(found)


def test_the_same_words_twice_without_a_failure_are_two_messages(store: LogStore) -> None:
    found = log(store, [user("again"), assistant("ok"), user("again"), assistant("ok")])
    got = to_openai_chat(found)
    assert json.dumps(got.messages).count("again") == 2
    assert not [n for n in got.notes if n.kind == "retried_user"]
    # nor a failure between a user message and different words
    failed = log(store, [user("one"), events.error("boom"), user("two"), assistant("ok")])
    assert json.dumps(to_openai_chat(failed).messages).count('"user"') == 2
