"""Token usage with one meaning (``agenttrail.model.reading.usage_of``, ``usage_totals``): each
token in one kind, whatever the provider, older OpenAI events read by the same rule.

Real recordings are read in place (``tests/formats/_recordings.py`` cites their SOURCES.md
rows): the Claude Code transcript ``claude-code-spotter/tool_heavy.jsonl``, whose lines read
and write the prompt cache, and the OpenAI cassettes. Their totals are checked against the
providers' own definitions applied to the raw usage objects: Anthropic's prompt is
``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``
(https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching), OpenAI's is
``prompt_tokens`` / ``input_tokens``, cached ones included
(https://platform.openai.com/docs/guides/prompt-caching).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agenttrail.formats import read_file
from agenttrail.log.store import LogStore
from agenttrail.model import NewEvent, NewSession, events, usage_of, usage_totals
from agenttrail.views.transcript._rows import meta_fields
from tests.formats._recordings import CASSETTES, CLAUDE_CODE_SPOTTER

OLD_OPENAI = {
    "model": "gpt-4o",
    "provider": "openai",
    "usage": {"input": 1000, "output": 20, "cache_read": 800, "cache_write": None},
    "duration_ms": None,
    "location": "remote",
}
"""An OpenAI event as the importer wrote it before ``usage_raw``: ``input`` is prompt_tokens,
the 800 cached ones included."""

ANTHROPIC = events.meta(
    provider="anthropic",
    usage=events.usage(input=50, output=10, cache_read=900, cache_write=40),
    usage_raw={
        "input_tokens": 50,
        "output_tokens": 10,
        "cache_read_input_tokens": 900,
        "cache_creation_input_tokens": 40,
    },
)


def _chat_response(usage: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": "ok"}
    return {
        "object": "chat.completion",
        "id": "chatcmpl-1",
        "created": 1700000000,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": usage,
    }


def test_openai_cached_tokens_are_taken_out_of_input(tmp_path: Path) -> None:
    # Before: input 1000 and cache_read 800, so the 800 were counted twice in a sum.
    raw = {
        "prompt_tokens": 1000,
        "completion_tokens": 20,
        "total_tokens": 1020,
        "prompt_tokens_details": {"cached_tokens": 800, "audio_tokens": 0},
    }
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    path = tmp_path / "cached.json"
    path.write_text(json.dumps({"request": request, "response": _chat_response(raw)}))
    [imported] = read_file(path)
    meta = imported.events[-1].payload["meta"]
    assert meta["usage"] == {"input": 200, "output": 20, "cache_read": 800, "cache_write": None}
    assert meta["usage_raw"] == raw
    assert sum(v for v in meta["usage"].values() if v is not None) == raw["total_tokens"]


def test_responses_cached_tokens_are_taken_out_of_input(tmp_path: Path) -> None:
    raw = {
        "input_tokens": 300,
        "input_tokens_details": {"cached_tokens": 256},
        "output_tokens": 9,
        "output_tokens_details": {"reasoning_tokens": 4},
        "total_tokens": 309,
    }
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed"}
    item["content"] = [{"type": "output_text", "text": "ok", "annotations": []}]
    body = {"object": "response", "id": "resp_1", "created_at": 1700000000, "model": "gpt-4o"}
    body |= {"status": "completed", "output": [item], "usage": raw}
    path = tmp_path / "responses.json"
    path.write_text(json.dumps({"request": {"model": "gpt-4o", "input": "hi"}, "response": body}))
    [imported] = read_file(path)
    meta = imported.events[-1].payload["meta"]
    assert meta["usage"] == {"input": 44, "output": 9, "cache_read": 256, "cache_write": None}
    assert meta["usage_raw"] == raw


def test_more_cached_than_prompt_tokens_leaves_input_unknown(tmp_path: Path) -> None:
    raw = {
        "prompt_tokens": 10,
        "completion_tokens": 1,
        "prompt_tokens_details": {"cached_tokens": 11},
    }
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"request": request, "response": _chat_response(raw)}))
    [imported] = read_file(path)
    assert imported.events[-1].payload["meta"]["usage"]["input"] is None


def test_an_old_openai_event_is_read_by_the_new_rule() -> None:
    assert usage_of(OLD_OPENAI) == {
        "input": 200,
        "output": 20,
        "cache_read": 800,
        "cache_write": None,
    }
    new = dict(OLD_OPENAI, usage_raw={"prompt_tokens": 1000})  # written under the new rule
    new["usage"] = dict(OLD_OPENAI["usage"], input=200)
    assert usage_of(new) == usage_of(OLD_OPENAI)
    assert usage_of(ANTHROPIC) == ANTHROPIC["usage"]  # Anthropic always kept them apart
    assert usage_of({"provider": "openai", "usage": None}) is None
    assert usage_of(None) is None


def test_a_count_that_is_not_an_integer_reads_as_unknown() -> None:
    class Tokens(int):  # an int of another type (an IntEnum, say) is still a count
        pass

    usage = {"input": True, "output": 2.0, "cache_read": "7", "cache_write": Tokens(3)}
    assert usage_of({"usage": usage}) == {
        "input": None,
        "output": None,
        "cache_read": None,
        "cache_write": 3,
    }


def test_totals_count_no_token_twice() -> None:
    payloads = [
        events.message("assistant", "a", meta=OLD_OPENAI),
        events.message("assistant", "b", meta=ANTHROPIC),
        events.message("user", "no meta"),
        events.message("assistant", "c", meta=events.meta(usage=events.usage(output=5))),
    ]
    assert usage_totals(payloads) == {
        "input": 250,
        "output": 35,
        "cache_read": 1700,
        "cache_write": 40,
    }
    # a kind nobody reported stays unknown, never 0
    assert usage_totals([]) == dict.fromkeys(("input", "output", "cache_read", "cache_write"))


def test_a_stored_old_event_is_read_anew_and_never_rewritten(store: LogStore) -> None:
    session = store.create_session(NewSession("old-openai"))
    payload = events.message("assistant", "hi", meta=OLD_OPENAI)
    [appended] = store.append_batch(session.id, [NewEvent(payload)])
    [event] = store.read(session.id)
    assert event.payload["meta"]["usage"]["input"] == 1000  # as stored
    assert event.hash == appended.hash
    assert usage_totals([event.payload])["input"] == 200
    assert meta_fields(event.payload["meta"])["usage"]["input"] == 200  # the ⓘ bubble


def _prompt_total(raw: dict[str, Any]) -> int:
    """The whole prompt by the provider's own definition of its usage object."""
    if "prompt_tokens" in raw:
        return int(raw["prompt_tokens"])
    if "cache_read_input_tokens" in raw or "cache_creation_input_tokens" in raw:
        return sum(
            int(raw.get(k) or 0)
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
    return int(raw["input_tokens"])


def _cached(raw: dict[str, Any]) -> int:
    details = raw.get("prompt_tokens_details") or raw.get("input_tokens_details") or {}
    return int(raw.get("cache_read_input_tokens") or details.get("cached_tokens") or 0)


def _check_totals(paths: list[Path]) -> int:
    """Import each file, and check its totals against its raw usage objects; the prompt
    tokens seen."""
    seen = 0
    for path in paths:
        payloads = [e.payload for s in read_file(path) for e in s.events]
        raws = [
            p["meta"]["usage_raw"]
            for p in payloads
            if isinstance(p.get("meta"), dict) and isinstance(p["meta"].get("usage_raw"), dict)
        ]
        totals = usage_totals(payloads)
        prompt = sum(v or 0 for k, v in totals.items() if k != "output")
        assert prompt == sum(_prompt_total(r) for r in raws), path.name
        assert (totals["cache_read"] or 0) == sum(_cached(r) for r in raws), path.name
        seen += prompt
    return seen


def test_real_claude_code_totals_match_the_raw_usage() -> None:
    paths = sorted(CLAUDE_CODE_SPOTTER.glob("*.jsonl"))
    assert _check_totals(paths) > 0


def test_real_openai_totals_match_the_raw_usage() -> None:
    paths = sorted(CASSETTES.glob("test_chat_completion*.yaml"))
    paths += sorted(CASSETTES.glob("test_responses*.yaml"))
    assert _check_totals(paths) > 0
