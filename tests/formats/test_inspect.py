"""Inspect AI eval logs (``agenttrail.formats.inspect``): the three real logs, read in place,
and the damaged input it must refuse whole.

Expected counts were read from the files with jq, not from our reader (``_recordings.py``
cites their SOURCES.md rows):

- browser.json: ``jq -c '.samples[0] | {roles: (.messages|group_by(.role)|map({(.[0].role):
  length})|add), calls: ([.messages[].tool_calls // [] | length]|add), errors:
  ([.messages[]|select(.error)]|length), events: (.events|length), tool_events:
  ([.events[]|select(.event=="tool")]|length), scores: (.scores|length)}'`` gives user 1,
  assistant 5, tool 4, 4 calls, 0 errors, 43 events of which 4 ``tool``, 1 score;
  ``.samples[0].events[]|select(.event=="model")|.output.usage`` gives the second call
  input_tokens 1568, output_tokens 17, total_tokens 1585, input_tokens_cache_read 1024.
- log_message_deduplication.eval: ``unzip -p … samples/0_epoch_1.json | jq`` with the same
  filter gives user 1, assistant 6, tool 5, 5 calls, 0 errors, 42 events of which 5 ``tool``
  and 6 ``model`` (input_refs ``[[0,1]]``, ``[[0,3]]`` … ``[[0,11]]``), 1 score, a pool of 11.
- log_tool_call_error.json: ``jq -c '.samples[0] | {roles: …, errors:
  [.messages[].error.type]}'`` gives 11 ``tool`` messages and no events; error types parsing,
  timeout, parsing, unicode_decode, permission, file_not_found, is_a_directory, limit,
  approval, unknown, output_limit.
"""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import FormatError
from agenttrail.formats import detect, inspect, read_file
from agenttrail.log.store import LogStore
from agenttrail.model import Event
from agenttrail.replay import to_anthropic, to_openai_chat, to_openai_responses, validate
from agenttrail.views.pairing import pair_tool_calls
from tests.conftest import run_cli
from tests.formats._recordings import (
    INSPECT_BROWSER,
    INSPECT_DEDUPLICATION,
    INSPECT_TOOL_ERRORS,
    import_events,
)


def _kinds(events: list[Event]) -> Counter[str]:
    """Events by type, messages by role and annotations by kind."""
    return Counter(
        e.type
        + {"message": f"/{e.payload.get('role')}", "annotation": f"/{e.payload.get('kind')}"}.get(
            e.type, ""
        )
        for e in events
    )


def test_the_json_log_imports_its_sample_with_usage(store: LogStore) -> None:
    assert detect(INSPECT_BROWSER, INSPECT_BROWSER.read_bytes()) is inspect
    events = import_events(store, INSPECT_BROWSER)
    assert _kinds(events) == {
        "message/user": 1,
        "message/assistant": 5,
        "tool_call": 4,
        "tool_result": 4,
        # 43 transcript events less the 4 tool events that are the tool results, and 1 score
        "annotation/inspect_event": 39,
        "annotation/score": 1,
    }
    pairing = pair_tool_calls(events)
    assert len(pairing.result_of) == 4 and not pairing.anomalies
    assistants = [e for e in events if e.payload.get("role") == "assistant"]
    second = assistants[1].payload["meta"]
    assert second["provider"] == "openai" and second["model"] == "gpt-4o-mini-2024-07-18"
    # this log predates Inspect counting input without the cache: 1585 = 1568 + 17
    assert second["usage"] == {
        "input": 1568 - 1024,
        "output": 17,
        "cache_read": 1024,
        "cache_write": None,
    }
    assert second["usage_raw"]["total_tokens"] == 1585
    [score] = [e for e in events if e.payload.get("kind") == "score"]
    assert score.payload["data"]["value"] == "C"
    assert not any("attachment://" in json.dumps(e.payload) for e in events)


def test_the_eval_zip_expands_its_message_pool_ranges(store: LogStore) -> None:
    assert detect(INSPECT_DEDUPLICATION, INSPECT_DEDUPLICATION.read_bytes()) is inspect
    events = import_events(store, INSPECT_DEDUPLICATION)
    assert _kinds(events) == {
        "message/user": 1,
        "message/assistant": 6,
        "tool_call": 5,
        "tool_result": 5,
        "annotation/inspect_event": 42 - 5,
        "annotation/score": 1,
    }
    with zipfile.ZipFile(INSPECT_DEDUPLICATION) as archive:
        sample = json.loads(archive.read("samples/0_epoch_1.json"))
    pool_ids = [m["id"] for m in sample["message_pool"]]
    models = [e.payload["data"] for e in events if e.payload.get("text") == "model"]
    # input_refs [[0, 1]], [[0, 3]] ... [[0, 11]]: each call's input, expanded from the pool
    assert [m["inputMessageIds"] for m in models] == [pool_ids[:n] for n in (1, 3, 5, 7, 9, 11)]
    assert all("input_refs" not in m and "input" not in m for m in models)
    assert [
        e.payload.get("clientMessageId") for e in events if e.type in ("message", "tool_result")
    ] == [m["id"] for m in sample["messages"]]


def test_tool_errors_are_failed_results(store: LogStore) -> None:
    events = import_events(store, INSPECT_TOOL_ERRORS)
    assert [e.type for e in events] == ["tool_result"] * 11
    assert [e.payload["errorType"] for e in events] == [
        "parsing", "timeout", "parsing", "unicode_decode", "permission", "file_not_found",
        "is_a_directory", "limit", "approval", "unknown", "output_limit",
    ]  # fmt: skip
    assert all(e.payload["is_error"] is True and e.payload["error"] for e in events)
    assert events[-1].payload["error"] == "The tool output limit of 10 MiB was exceeded."
    anomalies = pair_tool_calls(events).anomalies
    assert len(anomalies) == 11  # results with no call before them, as the file has


def test_the_same_sample_is_the_same_session_and_imports_once(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    first = run_cli("import", str(INSPECT_DEDUPLICATION), "--db", db)
    assert first.returncode == 0, first.stderr
    again = run_cli("import", str(INSPECT_DEDUPLICATION), "--db", db)
    assert again.stdout == first.stdout
    assert "0 events written, 55 already present" in again.stderr


def _truncated_zip(tmp_path: Path) -> Path:
    bad = tmp_path / "cut.eval"
    bad.write_bytes(INSPECT_DEDUPLICATION.read_bytes()[:3000])
    return bad


def _damaged_member(tmp_path: Path) -> Path:
    """The sample's deflate data scrambled 100 bytes in (the zip directory intact)."""
    with zipfile.ZipFile(INSPECT_DEDUPLICATION) as archive:
        member = archive.getinfo("samples/0_epoch_1.json")
    data = bytearray(INSPECT_DEDUPLICATION.read_bytes())
    start = member.header_offset + 30 + len(member.filename) + len(member.extra) + 100
    for i in range(start, start + 300, 5):
        data[i] ^= 0x55
    bad = tmp_path / "damaged.eval"
    bad.write_bytes(bytes(data))
    return bad


def _sample_without_messages_list(tmp_path: Path) -> Path:
    doc: dict[str, Any] = json.loads(INSPECT_TOOL_ERRORS.read_text())
    doc["samples"][0]["messages"] = "oops"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    return bad


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (_truncated_zip, "cut.eval: not a complete .eval zip"),
        (_damaged_member, "damaged.eval: samples/0_epoch_1.json: cannot unzip"),
        (_sample_without_messages_list, "field 'samples[0].messages': expected a list, not str"),
    ],
)
def test_bad_logs_are_one_line_errors_and_write_nothing(
    tmp_path: Path, make: Any, expected: str
) -> None:
    bad = make(tmp_path)
    db = tmp_path / "log.db"
    done = run_cli("import", str(INSPECT_BROWSER), str(bad), "--db", str(db))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
    assert not db.exists()  # the good file before it was not written either


def test_a_json_that_is_not_an_inspect_log_is_refused_by_name(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"version": 2, "status": "success"}')
    with pytest.raises(FormatError, match=r"other.json: not an Inspect log"):
        read_file(other, "inspect")


@pytest.mark.parametrize("path", [INSPECT_BROWSER, INSPECT_DEDUPLICATION], ids=["json", "eval"])
def test_a_sample_replays_valid_for_every_provider(store: LogStore, path: Path) -> None:
    events = import_events(store, path)
    for replayed, provider in [
        (to_openai_chat(events), "openai"),
        (to_anthropic(events), "anthropic"),
        (to_openai_responses(events), "responses"),
    ]:
        assert validate(replayed.messages, provider) == [], provider
    if path.suffix == ".eval":
        with zipfile.ZipFile(path) as archive:
            sample = json.loads(archive.read("samples/0_epoch_1.json"))
    else:
        sample = json.loads(path.read_text())["samples"][0]
    # the model is sent the sample's own conversation, role for role
    roles = [m["role"] for m in to_openai_chat(events).messages]
    assert roles == [m["role"] for m in sample["messages"]]


def test_an_attachment_the_log_lacks_is_kept_as_written_and_warned(tmp_path: Path) -> None:
    doc = json.loads(INSPECT_TOOL_ERRORS.read_text())
    doc["samples"][0]["messages"][0]["content"] = "attachment://deadbeef"
    log = tmp_path / "log.json"
    log.write_text(json.dumps(doc))
    [session] = read_file(log)
    assert session.events[0].payload["output"] == "attachment://deadbeef"
    assert session.warnings == [f"{log}: samples[0]: attachments not in the log: deadbeef"]
    assert session.events[-1].payload["kind"] == "import_warning"
