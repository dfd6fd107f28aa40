"""Claude Code transcripts (``agenttrail.formats.claude_code``): real files and small fixtures.

Real files are read in place from ``../shared/realdata`` (``SOURCES.md``):

- ``claude-code-spotter/short.jsonl``, ``tool_heavy.jsonl``, ``agent-aac57f5.jsonl``:
  SOURCES.md rows "claude-code-spotter/<file> | marot/spotter |
  test/fixtures/transcripts/<file> (the subagent under ae4a77f8-.../subagents/) |
  8cc42b0bd39d | 035dfd363ef9 (0c7102a37a16 for the subagent) | MIT", real Claude Code CLI
  2.1.38/2.1.39 sessions.
- ``claude-code-simonw/sample_session.jsonl``: SOURCES.md row "claude-code-simonw/
  sample_session.jsonl | simonw/claude-code-transcripts | tests/sample_session.jsonl |
  cad133d9132a | d6de723671d2 | Apache-2.0 | 1813", the older layout with a leading
  ``summary`` line and no ``parentUuid``.

The ``store`` fixture (``tests/conftest.py``) is a real SQLite file, closed after each test.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import FormatError
from agenttrail.formats import claude_code, detect, read_file
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore
from agenttrail.model import Event
from agenttrail.views.pairing import pair_tool_calls
from tests.conftest import REALDATA

SPOTTER = REALDATA / "claude-code-spotter"
SIMONW = REALDATA / "claude-code-simonw" / "sample_session.jsonl"


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def summary(events: list[Event]) -> Counter[str]:
    """Counts per kind: ``message:<role>:<actor>``, ``tool_call``, ``annotation:<kind>``, ..."""
    counts: Counter[str] = Counter()
    for event in events:
        payload = event.payload
        if event.type == "message":
            counts[f"message:{payload['role']}:{event.actor}"] += 1
        elif event.type == "annotation":
            counts[f"annotation:{payload['kind']}"] += 1
        else:
            counts[str(event.type)] += 1
    return counts


# Expected counts, established by reading each file with jq, not by running the importer:
#   jq -r '.type + (if .subtype then ":"+.subtype else "" end)' F | sort | uniq -c
#       -> records per type (every non user/assistant record is one annotation);
#   jq -r 'select(.type=="assistant") | .message.id // "none"' F | sort | uniq -c
#       -> assistant messages = distinct message.id (simonw: 3 lines without an id = 3);
#   jq '[.message.content[]? | select(.type=="tool_use")] | length' F  (and "tool_result")
#       -> tool calls / tool results;
#   diff of the sorted tool_use ids and tool_result tool_use_ids -> equal sets, no
#       duplicates, so no pairing anomaly;
#   user text lines read by eye (jq '.message.content' of each user line): typed prompts vs
#       runtime lines ("[Request interrupted by user...]", <local-command-caveat> with
#       isMeta, <command-name>, <local-command-stdout>); the subagent's prompt is the main
#       agent's (actor agent).
REAL_FILES: dict[str, dict[str, Any]] = {
    "short.jsonl": {
        # 15 lines: 1 file-history-snapshot, 3 progress, 2 system:local_command, 4 user
        # (1 typed prompt, 2 tool_result lines, 1 "[Request interrupted by user for tool
        # use]"), 5 assistant lines of one message.id holding 2 tool_use blocks.
        "session_id": "55604662-cf2a-4331-851a-ec234028f8ca",
        "title": "mix phx.server doesnt seem to start",
        "counts": {
            "message:user:user": 1,
            "message:user:system": 1,
            "message:assistant:agent": 1,
            "tool_call": 2,
            "tool_result": 2,
            "annotation:file-history-snapshot": 1,
            "annotation:progress": 3,
            "annotation:system:local_command": 2,
        },
    },
    "tool_heavy.jsonl": {
        # 39 lines: 3 file-history-snapshot, 10 progress, 2 queue-operation,
        # 2 system:local_command, 13 user (2 typed prompts, 6 tool_result lines, 2
        # "[Request interrupted by user]", the isMeta caveat, <command-name>/mcp,
        # <local-command-stdout>), 9 assistant lines of 4 message.ids with 6 tool_use.
        "session_id": "d6e0bada-1959-4eec-a9d2-0bfade768d8f",
        "title": "start phoenix in background",
        "counts": {
            "message:user:user": 2,
            "message:user:system": 5,
            "message:assistant:agent": 4,
            "tool_call": 6,
            "tool_result": 6,
            "annotation:file-history-snapshot": 3,
            "annotation:progress": 10,
            "annotation:queue-operation": 2,
            "annotation:system:local_command": 2,
        },
    },
    "agent-aac57f5.jsonl": {
        # 40 lines, all isSidechain with agentId aac57f5: 1 prompt from the main agent,
        # 12 tool_result lines, 12 progress, 15 assistant lines of 3 message.ids with 12
        # tool_use (6 WebSearch in the first message, 6 WebFetch in the second).
        "session_id": "ae4a77f8-aedd-4bc1-888f-c94edc91af04:agent-aac57f5",
        # The first prompt's first line, cut to 80 characters with the ellipsis.
        "title": "Search hex.pm for the latest versions of these Elixir packages and return the r…",
        "counts": {
            "message:user:agent": 1,
            "message:assistant:agent": 3,
            "tool_call": 12,
            "tool_result": 12,
            "annotation:progress": 12,
        },
    },
    "sample_session.jsonl": {
        # 8 lines: 1 summary, 2 typed prompts, 2 tool_result lines, 3 assistant lines
        # without message.id (so 3 messages) holding 2 tool_use blocks.
        "session_id": "test-session-id",
        "title": "Test session for JSONL parsing",
        "counts": {
            "message:user:user": 2,
            "message:assistant:agent": 3,
            "tool_call": 2,
            "tool_result": 2,
            "annotation:summary": 1,
        },
    },
}


def real_path(name: str) -> Path:
    return SIMONW if name == "sample_session.jsonl" else SPOTTER / name


@pytest.mark.parametrize("name", sorted(REAL_FILES))
def test_real_file_imports_with_expected_counts(store: LogStore, name: str) -> None:
    path = real_path(name)
    expected = REAL_FILES[name]
    [report] = import_paths(store, [path])
    assert report.session_id == expected["session_id"]
    assert report.warnings == []  # every parentUuid in these files names a line (jq check)
    session = store.get_session(report.session_id)
    assert session.title == expected["title"]
    assert session.agent == "claude-code"
    assert session.metadata["format"] == "claude_code"
    assert session.metadata["source"] == name
    events = list(store.read(report.session_id))
    assert summary(events) == Counter(expected["counts"])
    pairing = pair_tool_calls(events)
    assert pairing.anomalies == {}
    assert len(pairing.call_of) == expected["counts"]["tool_result"]
    # a second import of the same file writes nothing
    [again] = import_paths(store, [path])
    assert (again.written, again.skipped) == (0, len(events))
    assert len(list(store.read(report.session_id))) == len(events)


def test_every_claude_code_file_in_realdata_is_covered() -> None:
    found = {p.name for p in REALDATA.glob("claude-code-*/*.jsonl")}
    assert found == set(REAL_FILES)
    for name in found:
        path = real_path(name)
        assert detect(path, path.read_bytes()) is claude_code


def test_parallel_results_out_of_order_pair_with_their_own_calls(store: LogStore) -> None:
    # agent-aac57f5.jsonl lines 2-8: one message (msg_01XnP8V9...) of 7 lines, a text block
    # then 6 WebSearch tool_use blocks; lines 10-20 answer them in the order
    # 1, 4, 3, 6, 5, 2 (jq '.message.content[]? | select(.type=="tool_result")|.tool_use_id').
    [report] = import_paths(store, [SPOTTER / "agent-aac57f5.jsonl"])
    events = list(store.read(report.session_id))
    first = events[1]
    assert first.type == "message"
    assert first.payload["messageId"] == "msg_01XnP8V9m3LNbxPnXbuinNKs"
    assert first.payload["source"]["lines"] == [2, 3, 4, 5, 6, 7, 8]
    calls = events[2:8]
    assert [e.type for e in calls] == ["tool_call"] * 6
    call_ids = [e.payload["id"] for e in calls]
    assert [e.payload["source"]["line"] for e in calls] == [3, 4, 5, 6, 7, 8]
    results = [e for e in events if e.type == "tool_result"][:6]
    result_ids = [e.payload["toolCallId"] for e in results]
    assert sorted(result_ids) == sorted(call_ids)
    assert result_ids != call_ids
    assert [call_ids.index(i) for i in result_ids] == [0, 3, 2, 5, 4, 1]
    pairing = pair_tool_calls(events)
    for result in [e for e in events if e.type == "tool_result"]:
        call = pairing.call_of[result.seq]
        assert call.payload["id"] == result.payload["toolCallId"]
    # every payload of a subagent line carries the agent id
    assert all(e.payload["agentId"] == "aac57f5" for e in events)
    assert all(e.payload["isSidechain"] is True for e in events)


def test_message_split_around_tool_results_is_one_message(store: LogStore) -> None:
    # agent-aac57f5.jsonl: msg_01QUWJL4... is on lines 21-24 and 29-31, with tool_result
    # lines 26 and 28 (and progress lines) between them.
    [report] = import_paths(store, [SPOTTER / "agent-aac57f5.jsonl"])
    events = list(store.read(report.session_id))
    [merged] = [
        e
        for e in events
        if e.payload.get("messageId") == "msg_01QUWJL4JqVhaSxqh4fsVEw3" and e.type == "message"
    ]
    assert merged.payload["source"]["lines"] == [21, 22, 23, 24, 29, 30, 31]
    after = events[merged.seq : merged.seq + 6]  # seq is 1-based: events[seq] is the next
    assert [e.type for e in after] == ["tool_call"] * 6
    assert [e.payload["source"]["line"] for e in after] == [22, 23, 24, 29, 30, 31]
    assert merged.created_at == "2026-02-12T14:12:45.005000Z"  # line 21's timestamp


def test_real_usage_is_taken_once_from_the_largest_output(tmp_path: Path) -> None:
    # tool_heavy.jsonl lines 34 and 37 (msg_019BN3FR...) both carry usage, output_tokens 25
    # then 173, input 47, cache_read 26504, cache_creation 1115 (jq '.message.usage').
    path = SPOTTER / "tool_heavy.jsonl"
    [imported] = claude_code.read(path, path.read_bytes())
    [message] = [
        e.payload
        for e in imported.events
        if e.payload["type"] == "message"
        and e.payload.get("messageId") == "msg_019BN3FRqb7NU4DgBN5jdsym"
    ]
    assert message["content"] == ""  # only tool_use blocks
    meta = dict(message["meta"])
    line_37 = json.loads(path.read_text().splitlines()[36])
    assert meta.pop("usage_raw") == line_37["message"]["usage"]  # kept verbatim
    assert meta == {
        "model": "claude-opus-4-6",
        "provider": "anthropic",
        "usage": {"input": 47, "output": 173, "cache_read": 26504, "cache_write": 1115},
        "duration_ms": None,
        "location": "remote",
    }


def test_runtime_lines_are_system_and_tool_use_result_is_kept() -> None:
    path = SPOTTER / "tool_heavy.jsonl"
    [imported] = claude_code.read(path, path.read_bytes())
    by_line: dict[int, list[dict[str, Any]]] = {}
    for event in imported.events:
        source = event.payload["source"]
        if "line" in source:
            by_line.setdefault(source["line"], []).append(event.payload)
    actors = {n: by_line[n][0].get("actor") for n in (4, 18, 20, 21, 22, 26, 39)}
    assert actors == {
        4: "user",  # "start phoenix in background"
        18: "system",  # [Request interrupted by user]
        20: "system",  # isMeta, <local-command-caveat>
        21: "system",  # <command-name>/mcp
        22: "system",  # <local-command-stdout>
        26: "user",  # typed prompt
        39: "system",  # [Request interrupted by user]
    }
    assert all(by_line[n][0]["role"] == "user" for n in actors)
    # line 11: tool_result whose toolUseResult side object is kept verbatim
    [result] = by_line[11]
    raw = json.loads(path.read_text(encoding="utf-8").splitlines()[10])
    assert result["type"] == "tool_result"
    assert result["toolCallId"] == "toolu_018GZVh9ymkrdx1TnR8reg5Y"
    assert result["toolUseResult"] == raw["toolUseResult"]
    assert result["output"] == raw["message"]["content"][0]["content"]
    assert result["is_error"] is False
    # lines 27-30 (msg_01LbyjvsALGe2gMsTgDSj7e6): text, thinking (with its signature), then
    # two tool_use; the non-tool blocks stay in blocks, in order
    [thinking_message] = [
        e.payload
        for e in imported.events
        if e.payload["type"] == "message"
        and e.payload.get("messageId") == "msg_01LbyjvsALGe2gMsTgDSj7e6"
    ]
    assert thinking_message["source"]["lines"] == [27, 28, 29, 30]
    assert [b["type"] for b in thinking_message["blocks"]] == ["text", "thinking"]
    assert "signature" in thinking_message["blocks"][1]
    # system records are annotations holding the line verbatim
    [local] = by_line[23]
    assert local["type"] == "annotation"
    assert local["kind"] == "system:local_command"
    assert local["actor"] == "system"
    assert local["data"] == json.loads(path.read_text(encoding="utf-8").splitlines()[22])


def assistant_line(
    uuid: str, parent: str | None, block: dict[str, Any], output: int
) -> dict[str, Any]:
    return {
        "type": "assistant",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s-merge",
        "timestamp": f"2026-01-01T00:00:0{uuid[-1]}Z",
        "message": {
            "id": "msg_A",
            "model": "claude-x",
            "role": "assistant",
            "content": [block],
            "usage": {
                "input_tokens": 5,
                "output_tokens": output,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 7,
            },
        },
    }


def test_two_lines_of_one_message_count_usage_once(store: LogStore, tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "merge.jsonl",
        [
            {
                "type": "user",
                "uuid": "u1",
                "parentUuid": None,
                "sessionId": "s-merge",
                "timestamp": "2026-01-01T00:00:00Z",
                "message": {"role": "user", "content": "hi"},
            },
            assistant_line("a2", "u1", {"type": "text", "text": "Looking."}, 12),
            assistant_line(
                "a3", "a2", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": 1}}, 40
            ),
        ],
    )
    [report] = import_paths(store, [path])
    events = list(store.read(report.session_id))
    assert [e.type for e in events] == ["message", "message", "tool_call"]
    message = events[1].payload
    assert message["content"] == "Looking."
    assert message["meta"]["usage"] == {"input": 5, "output": 40, "cache_read": 0, "cache_write": 7}
    assert message["source"] == {"lines": [2, 3], "uuids": ["a2", "a3"]}
    assert events[1].created_at == "2026-01-01T00:00:02.000000Z"
    assert events[2].payload["source"] == {"line": 3, "uuid": "a3"}
    assert events[2].payload["messageId"] == "msg_A"
    assert events[2].created_at == "2026-01-01T00:00:03.000000Z"
    assert events[0].payload["actor"] == "user"


def test_dangling_parent_is_warned_and_file_order_kept(store: LogStore, tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "dangling.jsonl",
        [
            {
                "type": "user",
                "uuid": "u1",
                "parentUuid": None,
                "sessionId": "s-dangle",
                "timestamp": "2026-01-01T00:00:05Z",
                "message": {"role": "user", "content": "one"},
            },
            {
                "type": "user",
                "uuid": "u2",
                "parentUuid": "nowhere",
                "sessionId": "s-dangle",
                "timestamp": "2026-01-01T00:00:01Z",
                "message": {"role": "user", "content": "two"},
            },
        ],
    )
    [report] = import_paths(store, [path])
    assert len(report.warnings) == 1
    assert "dangling.jsonl:2" in report.warnings[0]
    assert "'nowhere'" in report.warnings[0]
    events = list(store.read(report.session_id))
    assert [e.type for e in events] == ["message", "annotation", "message"]
    assert [events[0].payload["content"], events[2].payload["content"]] == ["one", "two"]
    note = events[1].payload
    assert note["kind"] == "import_warning"
    assert note["actor"] == "system"
    assert note["text"] == report.warnings[0]
    assert note["source"] == {"line": 2, "uuid": "u2"}
    assert store.get_session("s-dangle").started == "2026-01-01T00:00:01.000000Z"


def test_user_line_with_results_then_text_and_injected_kinds(tmp_path: Path) -> None:
    base = {"sessionId": "s-user", "timestamp": "2026-01-01T00:00:00Z"}
    path = write_jsonl(
        tmp_path / "user.jsonl",
        [
            {
                **base,
                "type": "user",
                "uuid": "u1",
                "isCompactSummary": True,
                "message": {"role": "user", "content": "This session is being continued ..."},
            },
            {
                **base,
                "type": "user",
                "uuid": "u2",
                "toolUseResult": {"stdout": "x"},
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t9",
                            "content": [{"type": "text", "text": "x"}],
                            "is_error": True,
                        },
                        {"type": "text", "text": "also do y"},
                        {"type": "image", "source": {"type": "base64", "data": "AA=="}},
                    ],
                },
            },
            {
                **base,
                "type": "user",
                "uuid": "u3",
                "message": {
                    "role": "user",
                    "content": "<system-reminder>be brief</system-reminder>",
                },
            },
        ],
    )
    [imported] = claude_code.read(path, path.read_bytes())
    payloads = [e.payload for e in imported.events]
    assert [p["type"] for p in payloads] == ["message", "tool_result", "message", "message"]
    assert payloads[0]["actor"] == "system"
    assert payloads[1]["toolCallId"] == "t9"
    assert payloads[1]["output"] == [{"type": "text", "text": "x"}]
    assert payloads[1]["is_error"] is True
    assert payloads[1]["toolUseResult"] == {"stdout": "x"}
    assert payloads[2]["actor"] == "user"
    assert payloads[2]["content"] == "also do y"
    assert [b["type"] for b in payloads[2]["blocks"]] == ["text", "image"]
    assert payloads[3]["actor"] == "system"
    assert all(p["role"] == "user" for p in payloads if p["type"] == "message")
    # title: the first typed prompt, not the compact summary
    assert imported.session.title == "also do y"
    keys = [e.key for e in imported.events]
    assert len(set(keys)) == len(keys)


def test_api_error_line_is_an_error_event(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "err.jsonl",
        [
            {
                "type": "assistant",
                "uuid": "e1",
                "sessionId": "s-err",
                "isApiErrorMessage": True,
                "error": "rate_limit",
                "apiErrorStatus": 429,
                "timestamp": "2026-01-01T00:00:00Z",
                "message": {
                    "id": "x",
                    "model": "<synthetic>",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "API Error: 429 limit"}],
                },
            }
        ],
    )
    [imported] = claude_code.read(path, path.read_bytes())
    [event] = imported.events
    assert event.payload["type"] == "error"
    assert event.payload["message"] == "API Error: 429 limit"
    assert event.payload["code"] == 429
    assert event.payload["errorType"] == "rate_limit"


def test_no_session_id_gets_a_content_id(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "nosid.jsonl",
        [{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hello"}}],
    )
    [imported] = claude_code.read(path, path.read_bytes())
    assert imported.session.id is None
    [again] = read_file(path)
    assert again.session.id is not None
    assert again.session.id == read_file(path)[0].session.id


def test_appended_lines_import_as_new_events_only(store: LogStore, tmp_path: Path) -> None:
    # A live transcript imported mid-message (short.jsonl cut after line 5, inside the API
    # message msg_01MKH1… that spans lines 5-10), then again once it is whole: the events
    # already written are skipped, and the whole message is written, not lost as "present"
    # (readers show the two as one: tests/formats/test_claude_code_growth.py).
    lines = (SPOTTER / "short.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl"
    path.write_text("".join(lines[:5]), encoding="utf-8")
    [first] = import_paths(store, [path])
    path.write_text("".join(lines), encoding="utf-8")
    [second] = import_paths(store, [path])
    assert second.skipped == first.written - 1  # all but the part-message
    stored = list(store.read(second.session_id))
    assert len(stored) == first.written + second.written
    parts = [
        e.payload
        for e in stored
        if e.payload.get("messageId") == "msg_01MKH1ccEGrZGNPvu8pYiiQa" and e.type == "message"
    ]
    assert [len(p.get("blocks") or []) for p in parts] == [0, 3]  # "\n\n" alone, then whole
    assert any(b.get("type") == "thinking" for b in parts[-1]["blocks"])


def test_sniff_claims_claude_code_only(tmp_path: Path) -> None:
    for name in REAL_FILES:
        path = real_path(name)
        assert claude_code.sniff(path, path.read_bytes())
    export = json.dumps(
        {
            "session_id": "s",
            "seq": 1,
            "created_at": "x",
            "actor": "user",
            "payload": {"type": "message"},
            "hash": "00",
        }
    ).encode()
    assert not claude_code.sniff(Path("e.jsonl"), export + b"\n")
    for other in (
        "anthropic-sdk-python/10e53c1d-51be-4c64-b5bf-99adb3fa4719.json",
        "inspect_ai/log_tool_call_error.json",
        "otel-openai-v2-cassettes/test_chat_completion_tool_calls_with_content.yaml",
    ):
        path = REALDATA / other
        assert not claude_code.sniff(path, path.read_bytes())
    anthropic_response = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    assert not claude_code.sniff(Path("r.json"), json.dumps(anthropic_response).encode())
    assert not claude_code.sniff(Path("x.jsonl"), b"")
    # a torn first line does not hide the file's format; read then names the line
    torn = b'{"type": "user", "sessi\n' + (SPOTTER / "short.jsonl").read_bytes()
    assert claude_code.sniff(Path("t.jsonl"), torn)


@pytest.mark.parametrize(
    ("lines", "line", "field"),
    [
        # truncated last line
        (
            [
                '{"type":"user","uuid":"a","message":{"role":"user","content":"hi"}}',
                '{"type":"assistant","uuid":"b","mess',
            ],
            2,
            None,
        ),
        # JSON but not an object
        (
            ['{"type":"user","uuid":"a","message":{"role":"user","content":"hi"}}', "[1, 2]"],
            2,
            None,
        ),
        # content of the wrong type
        (
            ['{"type":"user","uuid":"a","message":{"role":"user","content":42}}'],
            1,
            "message.content",
        ),
        # message of the wrong type
        (['{"type":"assistant","uuid":"a","message":"hello"}'], 1, "message"),
        # a block that is not an object
        (
            ['{"type":"assistant","uuid":"a","message":{"id":"m","content":["x"]}}'],
            1,
            "message.content[0]",
        ),
        # a record without a type
        (
            ['{"type":"user","uuid":"a","message":{"role":"user","content":"hi"}}', '{"uuid":"b"}'],
            2,
            "type",
        ),
        # a usage count that is not an integer
        (
            [
                '{"type":"assistant","uuid":"a","message":{"id":"m","content":[],'
                '"usage":{"output_tokens":"12"}}}'
            ],
            1,
            "message.usage.output_tokens",
        ),
    ],
)
def test_malformed_input_names_file_line_and_field(
    tmp_path: Path, lines: list[str], line: int, field: str | None
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(FormatError) as caught:
        claude_code.read(path, path.read_bytes())
    error = caught.value
    assert error.line == line
    assert error.field == field
    assert f"bad.jsonl:{line}" in str(error)
    if field:
        assert field in str(error)


def test_malformed_file_writes_nothing(store: LogStore, tmp_path: Path) -> None:
    good = SPOTTER / "short.jsonl"
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(good.read_bytes()[:-40])  # cut inside the last line
    with pytest.raises(FormatError, match=r"bad\.jsonl:15"):
        import_paths(store, [good, bad], format="claude_code")
    assert store.sessions() == []


def test_keys_are_unique_and_stable() -> None:
    for name in REAL_FILES:
        path = real_path(name)
        [one] = claude_code.read(path, path.read_bytes())
        [two] = claude_code.read(path, path.read_bytes())
        keys = [e.key for e in one.events]
        assert len(set(keys)) == len(keys)
        assert keys == [e.key for e in two.events]
        assert all(e.payload["source"] for e in one.events)


def test_a_timestamp_before_year_1000_keeps_four_digits(store: LogStore, tmp_path: Path) -> None:
    """``created_at`` is always 27 characters; ``strftime`` would write year 1 as ``1-01-01…``."""
    lines = [
        {"type": "user", "uuid": "u1", "timestamp": "0001-01-01T00:00:00Z", "sessionId": "s"},
        {"type": "user", "uuid": "u2", "timestamp": "2025-01-01T00:00:00Z", "sessionId": "s"},
    ]
    for line in lines:
        line["message"] = {"role": "user", "content": "hi"}
    [report] = import_paths(store, [write_jsonl(tmp_path / "s.jsonl", lines)])
    times = [event.created_at for event in store.read(report.session_id)]
    assert times == ["0001-01-01T00:00:00.000000Z", "2025-01-01T00:00:00.000000Z"]
