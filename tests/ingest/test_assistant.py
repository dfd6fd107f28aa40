"""One assistant message with parallel tool calls and its usage, recorded by a live agent
(``Turn.assistant``, agenttrail/ingest/assistant.py): one message in the log and in every
replay target, the usage counted once, the importers' own layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenttrail import Recorder, ToolCall, import_paths, usage
from agenttrail.errors import InputError
from agenttrail.evidence.audit import audit
from agenttrail.log.store import LogStore
from agenttrail.model import usage_of, usage_totals
from agenttrail.replay import replay
from tests import mortgage_model
from tests.conftest import run_cli

QUESTION = "Weather in Paris and Rome?"
ANSWER = "Sunny in Paris, rain in Rome."
PARIS, ROME = {"city": "Paris"}, {"city": "Rome"}


def _record_parallel_calls(store: LogStore) -> tuple[str, list[str]]:
    """A turn whose model asks for two tools at once, the results coming back in reverse."""
    rec = Recorder.start(store, agent="forecaster")
    with rec.turn(model="gpt-4o", provider="openai", location="remote") as turn:
        turn.user(QUESTION)
        ids = turn.assistant(
            "Checking both.",
            tool_calls=[("weather", PARIS, "call_p"), ToolCall("weather", ROME, "call_r")],
            usage=usage(input=1200, output=30, cache_read=1000),
            usage_raw={"prompt_tokens": 2200, "prompt_tokens_details": {"cached_tokens": 1000}},
            duration_ms=850,
        )
        turn.tool_result("call_r", "rain")
        turn.tool_result("call_p", "sun")
        turn.reply(ANSWER, usage=usage(input=2000, output=9, cache_read=1150))
    return rec.session_id, ids


# The request bodies each API expects after such a turn, written from the providers' docs:
# https://platform.openai.com/docs/guides/function-calling (one assistant message with
# tool_calls, then one tool message per call), https://platform.claude.com/docs/en/agents-and-
# tools/tool-use/handle-tool-calls (text then tool_use blocks in one assistant message, the
# tool_result blocks together in the next user message),
# https://platform.openai.com/docs/api-reference/responses/create (the message item, the
# function_call items, then their outputs).
PARIS_ARGS, ROME_ARGS = '{"city":"Paris"}', '{"city":"Rome"}'
EXPECTED: dict[str, list[dict[str, Any]]] = {
    "openai": [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [
                {
                    "id": "call_p",
                    "type": "function",
                    "function": {"name": "weather", "arguments": PARIS_ARGS},
                },
                {
                    "id": "call_r",
                    "type": "function",
                    "function": {"name": "weather", "arguments": ROME_ARGS},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_p", "content": "sun"},
        {"role": "tool", "tool_call_id": "call_r", "content": "rain"},
        {"role": "assistant", "content": ANSWER},
    ],
    "anthropic": [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "call_p", "name": "weather", "input": PARIS},
                {"type": "tool_use", "id": "call_r", "name": "weather", "input": ROME},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_p", "content": "sun"},
                {"type": "tool_result", "tool_use_id": "call_r", "content": "rain"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]},
    ],
    "responses": [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "Checking both."},
        {"type": "function_call", "call_id": "call_p", "name": "weather", "arguments": PARIS_ARGS},
        {"type": "function_call", "call_id": "call_r", "name": "weather", "arguments": ROME_ARGS},
        {"type": "function_call_output", "call_id": "call_p", "output": "sun"},
        {"type": "function_call_output", "call_id": "call_r", "output": "rain"},
        {"role": "assistant", "content": ANSWER},
    ],
}


@pytest.mark.parametrize("target", ["openai", "anthropic", "responses"])
def test_parallel_calls_replay_as_one_assistant_message(
    store: LogStore, db_url: str, target: str
) -> None:
    session_id, ids = _record_parallel_calls(store)
    assert ids == ["call_p", "call_r"]
    done = run_cli("replay", session_id, "--format", target, "--db", db_url)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["input" if target == "responses" else "messages"] == EXPECTED[target]
    assert "placeholder" not in done.stderr and "orphan" not in done.stderr


def test_the_usage_of_a_message_with_calls_is_counted_once(store: LogStore) -> None:
    session_id, _ = _record_parallel_calls(store)
    got = [e.payload for e in store.read(session_id)]
    kinds = [(p["type"], p.get("role")) for p in got]
    assert kinds == [
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", None),
        ("tool_call", None),
        ("tool_result", None),
        ("tool_result", None),
        ("message", "assistant"),
    ]
    message, calls = got[1], got[2:4]
    assert {c["messageId"] for c in calls} == {message["messageId"]}
    assert all("meta" not in c for c in calls)
    meta = message["meta"]
    assert (meta["model"], meta["provider"], meta["duration_ms"]) == ("gpt-4o", "openai", 850)
    assert meta["usage_raw"] == {
        "prompt_tokens": 2200,
        "prompt_tokens_details": {"cached_tokens": 1000},
    }
    # docs/log-format.md, Usage: the kinds are disjoint, so the session's total is the sum of
    # the two model calls as given: 1200 + 2000 uncached input tokens, 1000 + 1150 cache reads.
    assert usage_totals(got) == {
        "input": 3200,
        "output": 39,
        "cache_read": 2150,
        "cache_write": None,
    }


def test_an_openai_reply_with_cache_reads_reads_back_as_recorded(store: LogStore) -> None:
    # The recorder's usage is always in the disjoint kinds; an openai event without a
    # usage_raw key is read as one written before that rule, its cache reads taken out of
    # input a second time (docs/log-format.md, Usage): the recorder must say it follows it.
    rec = Recorder.start(store)
    with rec.turn(model="gpt-4o", provider="openai", location="remote") as turn:
        turn.reply("x", usage=usage(input=2000, output=9, cache_read=1150))
    (event,) = store.read(rec.session_id)
    assert usage_of(event.payload["meta"]) == {
        "input": 2000,
        "output": 9,
        "cache_read": 1150,
        "cache_write": None,
    }
    assert event.payload["meta"]["usage_raw"] is None


@pytest.mark.parametrize("source", ["openai", "anthropic"])
def test_a_recorded_turn_replays_as_its_import_does(
    store: LogStore, tmp_path: Path, source: str
) -> None:
    # The same conversation as a message list of that provider, read by its importer
    # (formats/openai, formats/anthropic): the recorder writes the layout they write.
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(EXPECTED[source]), encoding="utf-8")
    recorded, _ = _record_parallel_calls(store)
    (report,) = import_paths(store, [path], format=source)
    ours, theirs = list(store.read(recorded)), list(store.read(report.session_id))
    assert [(e.type, e.payload.get("role")) for e in ours] == [
        (e.type, e.payload.get("role")) for e in theirs
    ]
    for target in ("openai", "anthropic", "responses"):
        assert replay(ours, target).messages == replay(theirs, target).messages, target


def test_recording_a_message_again_with_its_ids_writes_nothing(store: LogStore) -> None:
    rec = Recorder.start(store)
    with rec.turn(model="m") as turn:
        for _ in range(2):  # an agent retrying after a lost acknowledgement
            ids = turn.assistant(
                tool_calls=[("a", {}, "c1"), ("b", {"x": 1}, "c2")], message_id="resp_1"
            )
            assert ids == ["c1", "c2"]
    got = [e.payload for e in store.read(rec.session_id)]
    assert [(p["type"], p.get("content"), p.get("id")) for p in got] == [
        ("message", "", None),
        ("tool_call", None, "c1"),
        ("tool_call", None, "c2"),
    ]


def test_a_result_of_a_call_of_a_message_gets_its_trace_row(store: LogStore) -> None:
    loan = {"principal": 300_000, "annual_rate": 0.065, "years": 30}
    rec = Recorder.start(store, agent="advisor")
    with rec.turn(model="m") as turn:
        turn.user("payment?")
        (call,) = turn.assistant(tool_calls=[("run_model", loan)], usage=usage(input=5, output=2))
        result = turn.tool_result(call, json.dumps(mortgage_model.run_model(loan)))
    (row,) = store.traces(rec.session_id)
    assert (row.call_seq, row.result_seq, row.turn_seq, row.status) == (
        3,
        result.seq,
        1,
        "verified",
    )
    assert [a.ok for a in audit(store, [rec.session_id])] == [True]


@pytest.mark.parametrize(
    ("text", "calls", "counts", "refusal"),
    [
        (None, [], None, "a message needs text or tool calls"),
        ("", [("a", {}, "c1"), ("b", {}, "c1")], None, "call id 'c1' is given twice"),
        ("x", [("", {})], None, r"tool_calls\[0\]: the tool name must be a non-empty"),
        ("x", ["read_file"], None, r"tool_calls\[0\]: expected a ToolCall or \(name, input"),
        ("x", [("a", {}, "")], None, r"tool_calls\[0\]: the call id must be a non-empty"),
        ("x", [], {"prompt_tokens": 5}, "usage key 'prompt_tokens' is not one of input"),
        ("x", [], {"output": -1}, "usage output must be a token count >= 0, not -1"),
        ("x", [], {"input": 2.5}, "usage input must be a token count >= 0, not 2.5"),
    ],
)
def test_a_message_given_wrongly_is_refused_naming_what(
    store: LogStore, text: str | None, calls: list[Any], counts: Any, refusal: str
) -> None:
    rec = Recorder.start(store)
    with rec.turn(model="m") as turn:
        with pytest.raises(InputError, match=f"^Turn.assistant.*{refusal}"):
            turn.assistant(text, tool_calls=calls, usage=counts)
        assert list(store.read(rec.session_id)) == []  # nothing written
