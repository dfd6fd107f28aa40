"""Files over 16 MiB are recognised like small ones: detection reads a bounded prefix
(``agenttrail.formats.detect`` and each format's ``sniff``).

Each large file is a real recording (``tests/formats/_recordings.py`` cites their SOURCES.md
rows), read in place and grown past 16 MiB in ``tmp_path`` by a long text where the format
allows one: a message's content, a transcript line, a streamed text delta.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenttrail.formats import anthropic, claude_code, detect, openai
from agenttrail.formats._common import json_prefix
from tests.formats._recordings import CLAUDE_CODE_SPOTTER, SSE, TOOL_ERROR

LARGE = 17 * 1024 * 1024
"""Past the 16 MiB that the formats once parsed whole to recognise a file."""

PAD = "x" * LARGE


def _write(tmp_path: Path, name: str, text: str) -> tuple[Path, bytes]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    data = path.read_bytes()
    assert len(data) > LARGE
    return path, data


def _large_message_list() -> list[dict[str, Any]]:
    # OpenAI Chat Completions messages: a tool call, its result, then a long user message
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "user", "content": PAD},
    ]


def _openai_request() -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": _large_message_list()}


def _openai_request_long_first() -> dict[str, Any]:
    # the prefix ends inside the very first message
    return {"messages": [{"role": "user", "content": PAD}], "model": "gpt-4o"}


@pytest.mark.parametrize("make", [_large_message_list, _openai_request, _openai_request_long_first])
def test_large_openai_json_is_recognised(tmp_path: Path, make: Any) -> None:
    # Before: a JSON file over 16 MiB was never claimed by the OpenAI format.
    path, data = _write(tmp_path, "large.json", json.dumps(make()))
    assert detect(path, data) is openai


def test_large_real_anthropic_exchange_is_recognised(tmp_path: Path) -> None:
    exchanges = json.loads(TOOL_ERROR.read_text())
    request = exchanges[0]["request"]["body"]
    request["messages"][0]["content"] = PAD
    path, data = _write(tmp_path, "large-anthropic.json", json.dumps(exchanges))
    assert detect(path, data) is anthropic


def test_large_real_anthropic_stream_is_recognised(tmp_path: Path) -> None:
    text = SSE.read_text().replace('"text":"I', f'"text":"{PAD}I', 1)
    path, data = _write(tmp_path, "large-stream.txt", text)
    assert detect(path, data) is anthropic


def test_large_real_claude_code_transcript_is_recognised(tmp_path: Path) -> None:
    lines = (CLAUDE_CODE_SPOTTER / "short.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    grown = json.dumps(first | {"padding": PAD})
    path, data = _write(tmp_path, "large.jsonl", "\n".join([grown, *lines[1:]]) + "\n")
    assert detect(path, data) is claude_code


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            b'[{"role": "user", "content": "hi"}, {"role": "assis',
            [{"role": "user", "content": "hi"}],
        ),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": "aa',
            {"model": "m", "messages": [{"role": "user"}]},
        ),
        (b'\xef\xbb\xbf{"a": [1, 2, 3]}', {"a": [1, 2, 3]}),
        (b'{"a": 1 "b": 2}', None),  # not JSON as far as it goes
        (b'{[1]: 2, "a": 1}', None),  # a key that is not a string (found by test_fuzz.py)
        (b"plain text", None),
    ],
)
def test_json_prefix(data: bytes, expected: Any) -> None:
    assert json_prefix(data, len(data)) == expected
