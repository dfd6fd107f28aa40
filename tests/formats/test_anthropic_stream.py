"""Assembling Anthropic Messages streams (``agenttrail.formats.anthropic._stream``): a
``content_block_start`` at an index already in use, an ``error`` event mid-message.

The real stream is the Anthropic SDK's ``tool_use_response.txt`` (``tests/formats/_recordings.py``
cites its SOURCES.md row), read in place; the edited copies, and streams of our own, are
written to ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path

from agenttrail.formats import ImportedSession, anthropic
from tests.formats._recordings import SSE

FIRST_ID = "toolu_01NRLabsLyVHZPKxbKvkfSMn"


def _block_one(text: str) -> str:
    """The events of block 1 (the tool_use) in the real stream, blank lines included."""
    start = text.index('event: content_block_start\ndata: {"type":"content_block_start","index":1')
    end = text.index("event: message_delta")
    return text[start:end]


def test_a_block_that_starts_again_is_a_second_block_and_an_anomaly_on_both(
    tmp_path: Path,
) -> None:
    # The real tool_use block streamed again at the same index with another id: before, the
    # second replaced the first and the first call was lost without a word.
    text = SSE.read_text()
    block = _block_one(text)
    again = block.replace(FIRST_ID, "toolu_second").replace('"ar"', '"ar!"')
    path = tmp_path / "restarted.txt"
    imported = _read(path, text.replace(block, block + again))
    calls = [e.payload for e in imported.events if e.payload["type"] == "tool_call"]
    assert [(c["id"], c["input"]) for c in calls] == [
        (FIRST_ID, {"location": "Paris"}),
        ("toolu_second", {"location": "Par!is"}),
    ]
    [warning] = imported.warnings
    assert "block 1 (tool_use 'toolu_second') starts again" in warning
    assert f"tool_use '{FIRST_ID}', started at line 20" in warning


MESSAGE_START = (
    "message_start",
    '{"type":"message_start","message":{"id":"msg_1","type":"message",'
    '"role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":3}}}',
)
"""A stream's first event (written for these tests): message msg_1 of claude-x."""


def _read(path: Path, stream: str) -> ImportedSession:
    """The one session the stream ``stream``, written to ``path``, imports as."""
    path.write_text(stream)
    [imported] = anthropic.read(path, path.read_bytes())
    return imported


def _events(events: list[tuple[str, str]]) -> str:
    """Server-sent events of ``(event name, data)`` pairs, as the Messages API streams them."""
    return "".join(f"event: {kind}\ndata: {data}\n\n" for kind, data in events)


def test_deltas_after_a_restart_go_to_the_new_block(tmp_path: Path) -> None:
    # The second start arrives while the first block's input is half streamed: the first keeps
    # what arrived (not JSON, kept as text), the rest goes to the second.
    stream = _events(
        [
            MESSAGE_START,
            (
                "content_block_start",
                '{"type":"content_block_start","index":0,"content_block":'
                '{"type":"tool_use","id":"toolu_a","name":"f","input":{}}}',
            ),
            (
                "content_block_delta",
                '{"type":"content_block_delta","index":0,"delta":'
                '{"type":"input_json_delta","partial_json":"{\\"x\\": "}}',
            ),
            (
                "content_block_start",
                '{"type":"content_block_start","index":0,"content_block":'
                '{"type":"tool_use","id":"toolu_b","name":"f","input":{}}}',
            ),
            (
                "content_block_delta",
                '{"type":"content_block_delta","index":0,"delta":'
                '{"type":"input_json_delta","partial_json":"{\\"y\\": 2}"}}',
            ),
            ("content_block_stop", '{"type":"content_block_stop","index":0}'),
            ("message_stop", '{"type":"message_stop"}'),
        ]
    )
    path = tmp_path / "restarted.txt"
    imported = _read(path, stream)
    calls = [e.payload for e in imported.events if e.payload["type"] == "tool_call"]
    assert [(c["id"], c["input"]) for c in calls] == [("toolu_a", '{"x": '), ("toolu_b", {"y": 2})]
    assert len(imported.warnings) == 2
    assert "starts again" in imported.warnings[0]
    assert "not JSON" in imported.warnings[1]


def test_an_error_event_ends_the_message_it_cuts_short(tmp_path: Path) -> None:
    # An error event mid-stream (streaming docs, "Error events"): the message so far comes
    # first and the error, marked incomplete, after it. Before, the error came first and the
    # message after it, warned about as a truncated file. An error after a message_stop cuts
    # nothing short.
    stream = _events(
        [
            MESSAGE_START,
            (
                "content_block_start",
                '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
            ),
            (
                "content_block_delta",
                '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}',
            ),
            ("error", '{"type":"error","error":{"type":"overloaded_error","message":"Busy"}}'),
            ("error", '{"type":"error","error":{"type":"api_error","message":"Again"}}'),
        ]
    )
    path = tmp_path / "error.txt"
    imported = _read(path, stream)
    assert [e.payload for e in imported.events] == [
        {
            "type": "message",
            "role": "assistant",
            "content": "Hi",
            "meta": {
                "model": "claude-x",
                "provider": "anthropic",
                "usage": {"input": 3, "output": None, "cache_read": None, "cache_write": None},
                "duration_ms": None,
                "usage_raw": {"input_tokens": 3},
                "location": "remote",
            },
            "messageId": "msg_1",
        },
        {"type": "error", "message": "Busy", "errorType": "overloaded_error", "incomplete": True},
        {"type": "error", "message": "Again", "errorType": "api_error"},
    ]
    assert imported.warnings == [
        f"{path}: line 2: the message started here is cut short by the error event at line 11; "
        "it is assembled from what arrived"
    ]
