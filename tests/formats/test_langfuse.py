"""Langfuse trace exports (``agenttrail.formats.langfuse``): the three real exports, read in
place, and the damaged input it must refuse.

Expected counts were read from the files with jq, not from our reader (``_recordings.py``
cites their SOURCES.md rows). ``jq -c '{obs: (.observations|group_by(.type)|map({(.[0].type):
length})|add), scores: (.trace.scores|length), sessionId: .trace.sessionId}'`` gives:

- langgraph: 2 GENERATION, 7 SPAN, 2 scores, no sessionId. The first generation's input is
  two ``user`` messages and a ``role: tool`` message without ``tool_call_id`` (the tool's
  definition); its output has 1 call in ``additional_kwargs.tool_calls``; the ``Web-Search``
  SPAN's output has ``tool_call_id`` of that call. So 2 user and 2 assistant messages, 1 call,
  1 result, 1 unmapped input, 7 - 1 = 6 spans kept.
- openai-agents: 2 GENERATION, 2 AGENT, 1 TOOL, 2 scores; input ``[{role: user}]``, outputs
  ``function_call`` then ``message``; the TOOL ``get_weather`` answers the call. The agent's
  instructions were sent beside that input: ``jq '[.observations[] | select(.type==
  "GENERATION") | .metadata.attributes["llm.input_messages.0.message.content"]]'`` gives
  ``"You are a helpful agent."`` twice (role ``system``), one system message.
- pydantic-ai-tools: 4 GENERATION, 5 SPAN, 3 TOOL, 0 scores; ``jq '[.observations[] |
  select(.type=="GENERATION") | {s: .startTime, in: [.input[] | {role, parts: [.parts[] |
  .type]}], out: [.output[] | .parts[] | .type]}] | sort_by(.s)'``: two distinct system
  prompts, three distinct user texts, outputs of 3 calls, text, text, 1 call
  (``final_result``, never answered), three TOOL spans with ``gen_ai.tool.call.id``.

Costs: ``jq '[.observations[] | select(.type=="GENERATION") | .costDetails]'``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from agenttrail.errors import FormatError
from agenttrail.formats import detect, langfuse, read_file
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore
from agenttrail.model import Event
from agenttrail.replay import to_anthropic, to_openai_chat, to_openai_responses, validate
from agenttrail.views.pairing import pair_tool_calls
from tests.conftest import run_cli
from tests.formats._recordings import LANGFUSE, import_events

LANGGRAPH = LANGFUSE / "langgraph-2025-08-22.json"
OPENAI_AGENTS = LANGFUSE / "openai-agents-2025-09-30.json"
PYDANTIC_AI = LANGFUSE / "pydantic-ai-tools-2025-12-04.json"


def _kinds(events: list[Event]) -> Counter[str]:
    """Events by type, messages by role and annotations by kind."""
    suffix = {"message": "role", "annotation": "kind"}
    return Counter(
        e.type + (f"/{e.payload.get(suffix[e.type])}" if e.type in suffix else "") for e in events
    )


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            LANGGRAPH,
            {
                "message/user": 2,
                "message/assistant": 2,
                "tool_call": 1,
                "tool_result": 1,
                "annotation/langfuse_input": 1,
                "annotation/score": 2,
                "langfuse_observation": 6,
                "langfuse_trace": 1,
            },
        ),
        (
            OPENAI_AGENTS,
            {
                "message/system": 1,
                "message/user": 1,
                "message/assistant": 2,
                "tool_call": 1,
                "tool_result": 1,
                "annotation/score": 2,
                "langfuse_observation": 2,
                "langfuse_trace": 1,
            },
        ),
        (
            PYDANTIC_AI,
            {
                "message/system": 2,
                "message/user": 3,
                "message/assistant": 4,
                "tool_call": 4,
                "tool_result": 3,
                "langfuse_observation": 5,
                "langfuse_trace": 1,
            },
        ),
    ],
    ids=["langgraph", "openai-agents", "pydantic-ai"],
)
def test_each_export_imports_as_one_session(
    store: LogStore, path: Path, expected: dict[str, int]
) -> None:
    assert detect(path, path.read_bytes()) is langfuse
    events = import_events(store, path)
    assert _kinds(events) == expected
    pairing = pair_tool_calls(events)
    assert len(pairing.result_of) == expected["tool_result"]
    assert all(e.payload.get("toolCallId") for e in events if e.type == "tool_result")


def test_generations_keep_model_usage_and_cost_as_recorded(store: LogStore) -> None:
    doc = json.loads(PYDANTIC_AI.read_text())
    generations = sorted(
        (o for o in doc["observations"] if o["type"] == "GENERATION"), key=lambda o: o["startTime"]
    )
    events = import_events(store, PYDANTIC_AI)
    assistants = [e.payload for e in events if e.payload.get("role") == "assistant"]
    assert [a["meta"]["cost"] for a in assistants] == [g["costDetails"] for g in generations]
    assert [a["meta"]["usage_raw"] for a in assistants] == [g["usageDetails"] for g in generations]
    assert assistants[0]["meta"]["model"] == "gpt-4o-mini-2024-07-18"
    # jq '.observations[].metadata.attributes["gen_ai.system"] // empty': openai on all four
    assert {a["meta"]["provider"] for a in assistants} == {"openai"}
    assert assistants[0]["meta"]["usage"] == {
        "input": 265,
        "output": 73,
        "cache_read": None,
        "cache_write": None,
    }
    assert assistants[3]["meta"]["cost"]["total"] == 6.1049999e-05
    assert "input" not in assistants[0]["langfuse"] and assistants[0]["langfuse"]["id"]


def test_tool_results_answer_their_calls_by_id(store: LogStore) -> None:
    events = import_events(store, PYDANTIC_AI)
    calls = {e.payload["id"]: e.payload["name"] for e in events if e.type == "tool_call"}
    results = {
        e.payload["toolCallId"]: e.payload["output"] for e in events if e.type == "tool_result"
    }
    assert set(results) == {c for c, name in calls.items() if name != "final_result"}
    assert results["call_WxZcCvSDhGT4RJHlcU01k10x"].startswith("Dad joke idea:")
    langgraph = import_events(store, LANGGRAPH)
    [result] = [e.payload for e in langgraph if e.type == "tool_result"]
    assert result["toolCallId"] == "call_1oGK863sxQHlPreFhDdEs3yl"
    assert result["output"] == [
        {"url": "https://example.com", "title": "Example Result", "q": "example"}
    ]


def test_importing_again_writes_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    first = run_cli("import", str(LANGGRAPH), "--db", db)
    assert first.returncode == 0, first.stderr
    again = run_cli("import", str(LANGGRAPH), "--db", db)
    assert again.stdout == first.stdout and "0 events written, 16 already present" in again.stderr


def test_traces_of_one_langfuse_session_are_one_session(tmp_path: Path) -> None:
    docs = [json.loads(p.read_text()) for p in (OPENAI_AGENTS, LANGGRAPH)]
    for doc in docs:
        doc["trace"]["sessionId"] = "chat-42"
    both = tmp_path / "both.json"
    both.write_text(json.dumps(docs))
    [session] = read_file(both)
    # in time order: the LangGraph trace (2025-08-22) before the Agents SDK one (2025-09-30)
    assert session.session.metadata["traceIds"] == [docs[1]["trace"]["id"], docs[0]["trace"]["id"]]
    assert Counter(e.payload["type"] for e in session.events)["langfuse_trace"] == 2
    assert session.session.metadata["langfuseSessionId"] == "chat-42"


def test_observations_that_are_not_a_list_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"trace": {"id": "t1"}, "observations": {"id": "o1"}}')
    with pytest.raises(FormatError, match=r"bad.json: field 'observations': expected a list"):
        read_file(bad)


@pytest.mark.parametrize("path", [LANGGRAPH, OPENAI_AGENTS], ids=["langgraph", "openai-agents"])
def test_a_trace_replays_valid_for_every_provider(store: LogStore, path: Path) -> None:
    events = import_events(store, path)
    for replayed, provider in [
        (to_openai_chat(events), "openai"),
        (to_anthropic(events), "anthropic"),
        (to_openai_responses(events), "responses"),
    ]:
        assert validate(replayed.messages, provider) == [], provider
    roles = [m["role"] for m in to_openai_chat(events).messages]
    assert roles.count("tool") == 1 and roles[-1] == "assistant"


def test_instructions_sent_beside_the_input_are_the_system_message(store: LogStore) -> None:
    # the OpenAI Agents SDK passes its agent's instructions apart from the messages: the
    # session had no system prompt, and its replay none
    [report] = import_paths(store, [OPENAI_AGENTS])
    found = list(store.read(report.session_id))
    system = [e for e in found if e.type == "message" and e.payload["role"] == "system"]
    assert [e.payload["content"] for e in system] == ["You are a helpful agent."]
    first_user = next(e for e in found if e.type == "message" and e.payload["role"] == "user")
    assert system[0].seq < first_user.seq
    replayed = to_openai_responses(found).messages
    assert replayed[0] == {"role": "system", "content": "You are a helpful agent."}
