"""The same exchange recorded twice (one provider response id) is imported once, with a warning.

A retried recording in a cassette, or two request/response records of one response, hold one
response: it becomes one assistant message, its calls once, its usage once, and an
``import_warning`` annotation in the second copy's place names the response id
(``formats/_common.recorded_again``). The inputs are real recordings read in place from
``../shared/realdata`` (citations in ``tests/formats/_recordings.py``) with one exchange
written twice, as a retrying client's recorder writes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agenttrail.formats import read_file
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore
from agenttrail.model import Event
from tests.formats._recordings import CASSETTES, SSE, TOOL_ERROR, import_events

TOOL_CALLS = CASSETTES / "test_chat_completion_tool_calls_with_content.yaml"
STREAMED_TOOLS = CASSETTES / "test_chat_completion_multiple_tools_streaming_with_content.yaml"


def without_notes(events: list[Event]) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.type != "annotation"]


def usage_total(events: list[Event]) -> int:
    total = 0
    for event in events:
        meta = event.payload.get("meta") if event.type == "message" else None
        usage = meta.get("usage") if isinstance(meta, dict) else None
        total += (usage or {}).get("output") or 0
    return total


def _twice(store: LogStore, tmp_path: Path, original: Path, doubled: Path, rid: str) -> None:
    once = import_events(store, original)
    [read] = read_file(doubled)
    assert [w for w in read.warnings if rid in w] == [read.warnings[-1]]
    assert "already recorded" in read.warnings[-1]
    [report] = import_paths(store, [doubled])
    events = list(store.read(report.session_id))
    assert without_notes(events) == without_notes(once)
    assert usage_total(events) == usage_total(once)
    calls = [e.payload["id"] for e in events if e.type == "tool_call"]
    assert len(calls) == len(set(calls))
    notes = [e.payload for e in events if e.type == "annotation"]
    assert [n["kind"] for n in notes] == ["import_warning"]
    assert rid in notes[0]["text"]


@pytest.mark.parametrize(
    ("cassette", "where"), [(TOOL_CALLS, 0), (TOOL_CALLS, 1), (STREAMED_TOOLS, 0)]
)
def test_openai_cassette_with_an_interaction_recorded_twice(
    store: LogStore, tmp_path: Path, cassette: Path, where: int
) -> None:
    doc = yaml.safe_load(cassette.read_text(encoding="utf-8"))
    interactions = doc["interactions"]
    body = interactions[where]["response"]["body"]["string"]
    if body.lstrip().startswith("data:"):  # a stream: every chunk carries the response id
        rid = json.loads(body.lstrip().splitlines()[0].removeprefix("data:"))["id"]
    else:
        rid = json.loads(body)["id"]
    doc["interactions"] = [*interactions[: where + 1], *interactions[where:]]
    doubled = tmp_path / cassette.name
    doubled.write_text(yaml.safe_dump(doc), encoding="utf-8")
    _twice(store, tmp_path, cassette, doubled, rid)


@pytest.mark.parametrize("where", [0, 1])
def test_anthropic_exchanges_with_a_record_of_one_response_twice(
    store: LogStore, tmp_path: Path, where: int
) -> None:
    records = json.loads(TOOL_ERROR.read_text(encoding="utf-8"))
    rid = records[where]["response"]["body"]["id"]
    doubled = tmp_path / TOOL_ERROR.name
    doubled.write_text(json.dumps([*records[: where + 1], *records[where:]]), encoding="utf-8")
    _twice(store, tmp_path, TOOL_ERROR, doubled, rid)


def test_anthropic_stream_of_one_message_twice(store: LogStore, tmp_path: Path) -> None:
    text = SSE.read_text(encoding="utf-8")
    rid = next(
        json.loads(line.removeprefix("data:"))["message"]["id"]
        for line in text.splitlines()
        if '"message_start"' in line and line.startswith("data:")
    )
    doubled = tmp_path / SSE.name
    doubled.write_text(text.rstrip("\n") + "\n\n" + text, encoding="utf-8")
    _twice(store, tmp_path, SSE, doubled, rid)


# -- a response id used again for another exchange is not a copy ---------------------------
# Some OpenAI-compatible servers give every response the same id; a request that brings a new
# message under such an id must be imported whole (before, it was skipped as a copy, the
# user's new message with it).


def _imported_whole(path: Path) -> None:
    """The second exchange of ``path`` (its request changed, its response id the first's) is
    read as its own: no copy warning, its new question, two replies."""
    [read] = read_file(path)
    assert not [w for w in read.warnings if "already recorded" in w]
    texts = [str(e.payload.get("content")) for e in read.events if e.payload.get("role") == "user"]
    assert texts[-1] == "a new question"
    replies = [e for e in read.events if e.payload.get("role") == "assistant"]
    assert len(replies) == 2


def test_an_openai_response_id_reused_for_a_new_request_is_imported(tmp_path: Path) -> None:
    doc = yaml.safe_load(TOOL_CALLS.read_text(encoding="utf-8"))
    first = doc["interactions"][0]
    again = json.loads(json.dumps(first))
    request = json.loads(again["request"]["body"])
    request["messages"] = [{"role": "user", "content": "a new question"}]
    again["request"]["body"] = json.dumps(request)
    doc["interactions"] = [first, again]
    path = tmp_path / TOOL_CALLS.name
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    _imported_whole(path)


def test_an_anthropic_response_id_reused_for_a_new_request_is_imported(tmp_path: Path) -> None:
    records = json.loads(TOOL_ERROR.read_text(encoding="utf-8"))
    again = json.loads(json.dumps(records[0]))
    again["request"]["body"]["messages"] = [{"role": "user", "content": "a new question"}]
    path = tmp_path / TOOL_ERROR.name
    path.write_text(json.dumps([records[0], again]), encoding="utf-8")
    _imported_whole(path)
