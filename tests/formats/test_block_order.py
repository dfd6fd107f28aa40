"""Block order inside one assistant response survives import, replay and every view.

The inputs are small recordings written here: an Anthropic response whose text, server search
(``server_tool_use`` / ``web_search_tool_result``) and tool calls interleave, a Responses
output with reasoning between two calls, and a Claude Code message split over several lines
sharing ``message.id``. The real files hold no interleaving (checked: every real response has
its text first), so they test that nothing changes for them (docs/log-format.md, Block order).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agenttrail.formats.fountain import fountain_from_events
from agenttrail.log.store import LogStore
from agenttrail.model import Event, NewEvent, NewSession, content_order, events
from agenttrail.replay import to_anthropic, to_openai_chat, to_openai_responses, validate
from agenttrail.views.transcript import IndexCache
from tests.formats._recordings import ANTHROPIC_SDK, CLAUDE_CODE_SPOTTER, import_events
from tests.views.test_terminal import _rows as terminal_rows

SEARCH_RESULT = [
    {"type": "web_search_result", "url": "https://e.org", "title": "E", "encrypted_content": "x1"}
]
ANSWER = [
    {"type": "text", "text": "I'll search first."},
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": SEARCH_RESULT},
    {"type": "text", "text": "Per E, x is 1. Now reading a file."},
    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
    {"type": "text", "text": "And another."},
    {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b"}},
]
QUESTION = {"role": "user", "content": "what is x?"}
RESULTS = {
    "role": "user",
    "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "B"},
    ],
}
SECOND_REQUEST = {
    "model": "m",
    "max_tokens": 9,
    "messages": [QUESTION, {"role": "assistant", "content": ANSWER}, RESULTS],
}


def anthropic_response(msg_id: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    """A Messages API response body with id ``msg_id`` and ``content``."""
    usage = {"input_tokens": 1, "output_tokens": 2}
    return {
        "type": "message",
        "id": msg_id,
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": "tool_use",
        "usage": usage,
    }


def _anthropic_file(tmp_path: Path) -> Path:
    first = {"model": "m", "max_tokens": 9, "messages": [QUESTION]}
    pairs = [
        (first, anthropic_response("msg_1", ANSWER)),
        (SECOND_REQUEST, anthropic_response("msg_2", [{"type": "text", "text": "done"}])),
    ]
    return recording(tmp_path / "interleaved.json", "https://api.anthropic.com/v1/messages", pairs)


def recording(path: Path, url: str, pairs: list[tuple[Any, Any]]) -> Path:
    """A file of recorded exchanges (``{request, response}`` each) posted to ``url``."""
    doc = [
        {
            "request": {"method": "POST", "url": url, "body": body},
            "response": {"status_code": 200, "body": answer},
        }
        for body, answer in pairs
    ]
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _before(events_: list[Event], key: str, value: str) -> int:
    return next(e.seq for e in events_ if e.payload.get(key) == value) - 1


def test_the_log_keeps_an_anthropic_responses_block_order(store: LogStore, tmp_path: Path) -> None:
    logged = import_events(store, _anthropic_file(tmp_path))
    [message] = [e for e in logged if e.type == "message" and e.payload.get("messageId") == "msg_1"]
    assert message.payload["order"] == [
        {"block": 0},
        {"toolCall": "srvtoolu_1"},
        {"toolResult": "srvtoolu_1"},
        {"block": 1},
        {"toolCall": "toolu_1"},
        {"block": 2},
        {"toolCall": "toolu_2"},
    ]
    assert [b["text"] for b in message.payload["blocks"]] == [
        "I'll search first.",
        "Per E, x is 1. Now reading a file.",
        "And another.",
    ]
    # the tool events stay as they were: right after the message, in content order
    after = [e for e in logged if e.seq > message.seq and e.type != "message"][:4]
    assert [(e.type, e.payload.get("id") or e.payload.get("toolCallId")) for e in after] == [
        ("tool_call", "srvtoolu_1"),
        ("tool_result", "srvtoolu_1"),
        ("tool_call", "toolu_1"),
        ("tool_call", "toolu_2"),
    ]


def test_anthropic_replay_rebuilds_the_interleaved_request_exactly(
    store: LogStore, tmp_path: Path
) -> None:
    logged = import_events(store, _anthropic_file(tmp_path))
    got = to_anthropic(logged, _before(logged, "messageId", "msg_2"))
    assert got.messages == SECOND_REQUEST["messages"]
    assert got.notes == ()
    assert validate(got.messages, "anthropic") == []


def test_chat_replay_says_it_cannot_interleave(store: LogStore, tmp_path: Path) -> None:
    logged = import_events(store, _anthropic_file(tmp_path))
    got = to_openai_chat(logged)
    assistant = got.messages[1]
    assert (
        assistant["content"]
        == "I'll search first.\nPer E, x is 1. Now reading a file.\nAnd another."
    )
    assert [c["id"] for c in assistant["tool_calls"]] == ["toolu_1", "toolu_2"]
    [lost] = [n for n in got.notes if n.kind == "order_lost"]
    assert lost.seq == logged[1].seq
    assert validate(got.messages, "openai") == []


def test_responses_replay_of_anthropic_order_interleaves_text_and_calls(
    store: LogStore, tmp_path: Path
) -> None:
    logged = import_events(store, _anthropic_file(tmp_path))
    got = to_openai_responses(logged)
    assert [(i.get("role"), i.get("type"), i.get("call_id")) for i in got.messages[1:6]] == [
        ("assistant", None, None),  # the texts around the server search (not sent: noted)
        (None, "function_call", "toolu_1"),
        ("assistant", None, None),
        (None, "function_call", "toolu_2"),
        (None, "function_call_output", "toolu_1"),
    ]
    assert got.messages[3]["content"] == "And another."
    assert validate(got.messages, "responses") == []


def test_show_and_fountain_put_each_call_between_its_texts(store: LogStore, tmp_path: Path) -> None:
    logged = import_events(store, _anthropic_file(tmp_path))
    sid = logged[0].session_id
    rows = [(r[0], r[3], r[4].split("\n")[0]) for r in terminal_rows(store, sid)]
    assert rows[1:8] == [
        ("2", "assistant", "I'll search first."),
        ("3→4", "tool", 'web_search({"query": "x"}) — ok'),
        ("2 (cont.)", "assistant", "Per E, x is 1. Now reading a file."),
        ("5→7", "tool", 'read({"path": "a"}) — ok'),
        ("2 (cont.)", "assistant", "And another."),
        ("6→8", "tool", 'read({"path": "b"}) — ok'),
        ("9", "assistant", "done"),
    ]
    text = fountain_from_events(store.get_session(sid), logged)
    lines = [line for line in text.splitlines() if line.strip()]
    start = lines.index("I'll search first.")
    assert lines[start : start + 9] == [
        "I'll search first.",
        '[[tool: web_search({"query":"x"}) — ok]]',
        "M",
        "Per E, x is 1. Now reading a file.",
        '[[tool: read({"path":"a"}) — ok]]',
        "M",
        "And another.",
        '[[tool: read({"path":"b"}) — ok]]',
        "M",
    ]


def test_viewer_rows_give_the_runs_and_the_calls_after_each(
    store: LogStore, tmp_path: Path
) -> None:
    logged = import_events(store, _anthropic_file(tmp_path))
    page = IndexCache().page(store, logged[0].session_id, after_seq=0, limit=100)
    row = next(r for r in page.rows if r["seq"] == 2)
    assert [(run["text"], run["calls"]) for run in row["runs"]] == [
        ("I'll search first.", ["srvtoolu_1"]),
        ("Per E, x is 1. Now reading a file.", ["toolu_1"]),
        ("And another.", ["toolu_2"]),
    ]
    assert next(r for r in page.rows if r["seq"] == 9)["runs"] is None


# --- Responses: reasoning between calls ---------------------------------------------------

REASONING = [{"type": "reasoning", "id": f"rs_{n}", "summary": []} for n in (1, 2)]
CALLS = [
    {
        "type": "function_call",
        "id": f"fc_{n}",
        "call_id": f"call_{n}",
        "name": "f",
        "arguments": "{}",
    }
    for n in (1, 2)
]
OUTPUT = [REASONING[0], CALLS[0], REASONING[1], CALLS[1]]


def test_responses_reasoning_between_calls_is_kept_and_replayed_exactly(
    store: LogStore, tmp_path: Path
) -> None:
    outputs = [
        {"type": "function_call_output", "call_id": f"call_{n}", "output": "ok"} for n in (1, 2)
    ]
    second = {"model": "m", "input": [{"role": "user", "content": "go"}, *OUTPUT, *outputs]}
    pairs = [
        (
            {"model": "m", "input": "go"},
            {
                "object": "response",
                "id": "resp_1",
                "created_at": 1,
                "status": "completed",
                "output": OUTPUT,
            },
        ),
        (
            second,
            {
                "object": "response",
                "id": "resp_2",
                "created_at": 2,
                "status": "completed",
                "output": [
                    {
                        "type": "message",
                        "id": "m_1",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "done"}],
                    }
                ],
            },
        ),
    ]
    path = recording(tmp_path / "responses.json", "https://api.openai.com/v1/responses", pairs)
    logged = import_events(store, path)
    [message] = [
        e for e in logged if e.payload.get("responseId") == "resp_1" and e.type == "message"
    ]
    assert message.payload["order"] == [
        {"block": 0},
        {"toolCall": "call_1"},
        {"block": 1},
        {"toolCall": "call_2"},
    ]
    got = to_openai_responses(logged, _before(logged, "responseId", "resp_2"))
    assert got.messages == second["input"]
    assert validate(got.messages, "responses") == []


# --- Claude Code: one API message over several lines --------------------------------------


def _line(n: int, kind: str, content: Any, **extra: Any) -> str:
    record = {
        "type": kind,
        "uuid": f"u{n}",
        "parentUuid": f"u{n - 1}" if n > 1 else None,
        "sessionId": "cc",
        "timestamp": f"2026-01-01T10:00:{n:02d}.000Z",
        "message": {"role": kind, "content": content, **extra},
    }
    return json.dumps(record)


def test_claude_code_keeps_the_order_across_the_lines_of_one_message(
    store: LogStore, tmp_path: Path
) -> None:
    msg = {"id": "msg_9", "model": "claude-x"}
    lines = [
        _line(1, "user", "look at a and b"),
        _line(
            2, "assistant", [{"type": "thinking", "thinking": "a first", "signature": "s1"}], **msg
        ),
        _line(
            3,
            "assistant",
            [{"type": "tool_use", "id": "toolu_a", "name": "Read", "input": {"p": "a"}}],
            **msg,
        ),
        _line(4, "assistant", [{"type": "text", "text": "now b"}], **msg),
        _line(
            5,
            "assistant",
            [{"type": "tool_use", "id": "toolu_b", "name": "Read", "input": {"p": "b"}}],
            **msg,
        ),
        _line(
            6,
            "user",
            [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "B"},
            ],
        ),
    ]
    path = tmp_path / "cc.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    logged = import_events(store, path)
    [message] = [e for e in logged if e.type == "message" and e.payload.get("messageId") == "msg_9"]
    assert message.payload["order"] == [
        {"block": 0},
        {"toolCall": "toolu_a"},
        {"block": 1},
        {"toolCall": "toolu_b"},
    ]
    got = to_anthropic(logged)
    assert [b["type"] for b in got.messages[1]["content"]] == [
        "thinking",
        "tool_use",
        "text",
        "tool_use",
    ]
    assert validate(got.messages, "anthropic") == []


# --- what does not interleave stays as it was ---------------------------------------------


def test_real_files_without_interleaving_record_no_order(store: LogStore) -> None:
    for path in [
        *sorted(ANTHROPIC_SDK.glob("*.json")),
        *sorted(CLAUDE_CODE_SPOTTER.glob("*.jsonl")),
    ]:
        logged = import_events(store, path)
        assert [e.seq for e in logged if "order" in e.payload] == [], path.name


def test_a_damaged_order_is_read_as_none_and_replays_blocks_first(store: LogStore) -> None:
    text = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    store.create_session(NewSession("d", "t", "a", "u"))
    bad = events.message(
        "assistant", "one\ntwo", blocks=text, order=[{"block": 0}, {"toolCall": "c"}, {"block": 7}]
    )
    store.append_batch(
        "d",
        [
            NewEvent(bad),
            NewEvent(events.tool_call("c", "f", {})),
            NewEvent(events.tool_result("c", output="r")),
        ],
    )
    logged = list(store.read("d"))
    assert content_order(logged[0].payload) is None
    got = to_anthropic(logged)
    assert [b.get("text", b["type"]) for b in got.messages[0]["content"]] == [
        "one",
        "two",
        "tool_use",
    ]
