"""Usage and cost (agenttrail.views.usage, agenttrail.providers.prices) on real imported
sessions: token totals checked against sums read from the raw files here, costs against the
providers' published per-token prices, ``unknown`` for a model no table prices, and a cost a
source recorded kept as recorded."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.providers.prices import PRICE_SOURCE
from agenttrail.views.usage import calls_of, totals_by, usage_totals_of
from tests.conftest import REALDATA, run_cli

SPOTTER = REALDATA / "claude-code-spotter"
CASSETTES = REALDATA / "otel-openai-v2-cassettes"
MTOK = Decimal(1_000_000)


def _claude_code_usage(path: Path) -> dict[str, int]:
    """Token sums of a Claude Code transcript, read straight from its lines: every line of one
    API response repeats ``message.id`` and the usage so far, so each id counts once, with the
    usage of its line that reports the most output (the last state of a streamed response)."""
    best: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        message = record.get("message") or {}
        usage = message.get("usage")
        if record.get("type") != "assistant" or not usage:
            continue
        seen = best.get(message["id"])
        if seen is None or usage["output_tokens"] > seen["output_tokens"]:
            best[message["id"]] = usage
    sums: dict[str, int] = defaultdict(int)
    for usage in best.values():
        sums["input"] += usage["input_tokens"]
        sums["output"] += usage["output_tokens"]
        sums["cache_read"] += usage["cache_read_input_tokens"]
        sums["cache_write"] += usage["cache_creation_input_tokens"]
    sums["calls"] = len(best)
    return dict(sums)


def _openai_usage(path: Path) -> dict[str, int]:
    """Token sums of a cassette of non-streamed OpenAI responses, from each response body's
    ``usage`` (Chat Completions or Responses names), cached prompt tokens taken out of input."""
    sums: dict[str, int] = defaultdict(int)
    for interaction in yaml.safe_load(path.read_text())["interactions"]:
        usage = json.loads(interaction["response"]["body"]["string"])["usage"]
        prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
        sums["input"] += prompt - details["cached_tokens"]
        sums["cache_read"] += details["cached_tokens"]
        sums["output"] += usage.get("completion_tokens", usage.get("output_tokens"))
        sums["calls"] += 1
    return dict(sums)


def _anthropic_usage(path: Path) -> tuple[dict[str, int | None], dict[str, int]]:
    """Token sums of a recorded Messages exchange (a list of request/response records), from
    each response body's ``usage``: Anthropic's four counts are already disjoint; a count no
    response reports stays ``None`` (one response here reports no cache counts at all). And,
    per kind, how many responses do not report it."""
    names = {
        "input": "input_tokens",
        "output": "output_tokens",
        "cache_read": "cache_read_input_tokens",
        "cache_write": "cache_creation_input_tokens",
    }
    sums: dict[str, int | None] = dict.fromkeys(names)
    missing = dict.fromkeys(names, 0)
    records = json.loads(path.read_text())
    for record in records:
        usage = record["response"]["body"]["usage"]
        for kind, name in names.items():
            if name in usage:
                sums[kind] = (sums[kind] or 0) + usage[name]
            else:
                missing[kind] += 1
    return {**sums, "calls": len(records)}, missing


def _imported(store: LogStore, path: Path) -> str:
    (report,) = import_paths(store, [path])
    return report.session_id


@pytest.mark.parametrize("name", ["short.jsonl", "tool_heavy.jsonl", "agent-aac57f5.jsonl"])
def test_claude_code_totals_match_the_transcript(store: LogStore, name: str) -> None:
    sid = _imported(store, SPOTTER / name)
    totals = usage_totals_of(store.read(sid))
    expected = _claude_code_usage(SPOTTER / name)
    assert totals.calls == expected.pop("calls")
    assert totals.tokens == expected


@pytest.mark.parametrize(
    "name",
    ["10e53c1d-51be-4c64-b5bf-99adb3fa4719.json", "092be1de-d3f8-4c22-a4ea-a7ad54689836.json"],
)
def test_anthropic_totals_match_the_recording(store: LogStore, name: str) -> None:
    path = REALDATA / "anthropic-sdk-python" / name
    sid = _imported(store, path)
    totals = usage_totals_of(store.read(sid))
    expected, missing = _anthropic_usage(path)
    assert totals.calls == expected.pop("calls")
    assert totals.tokens == expected
    # a sum over responses some of which did not report a kind says so, never passes for all
    assert totals.unreported == missing
    for kind, count in expected.items():
        partial = count is not None and missing[kind] > 0
        assert totals.count_text(kind).endswith(" + ?") == partial
    assert totals.record()["tokens_unknown_calls"] == missing
    said = "(+ ?: not every call reported it; the sum is of those that did)"
    assert totals.tokens_text().endswith(said) == any(
        count is not None and missing[kind] for kind, count in expected.items()
    )


@pytest.mark.parametrize(
    "name",
    [
        "test_chat_completion_tool_calls_with_content.yaml",
        "test_responses_with_function_call_output.yaml",
    ],
)
def test_openai_totals_match_the_cassette(store: LogStore, name: str) -> None:
    sid = _imported(store, CASSETTES / name)
    totals = usage_totals_of(store.read(sid))
    expected = _openai_usage(CASSETTES / name)
    assert totals.calls == expected.pop("calls")
    assert totals.tokens == {**expected, "cache_write": None}  # OpenAI reports no cache writes


def test_cost_of_a_claude_call_is_its_tokens_at_the_published_prices(store: LogStore) -> None:
    # short.jsonl: one response of claude-opus-4-6 on 2026-02-10 that wrote its cache for an
    # hour (usage.cache_creation.ephemeral_1h_input_tokens == cache_creation_input_tokens).
    sid = _imported(store, SPOTTER / "short.jsonl")
    (call,) = calls_of(store.get_session(sid), store.read(sid))
    # Anthropic's published prices for Claude Opus 4.6, per million tokens: $5 input, $25
    # output, $0.50 cache hits, $10 one-hour cache writes
    # (https://platform.claude.com/docs/en/about-claude/pricing); the table says the same.
    from genai_prices.data import providers

    anthropic = next(p for p in providers if p.id == "anthropic")
    table = next(m for m in anthropic.models if m.id == "claude-opus-4-6").prices
    first = table[0].prices if isinstance(table, list) else table
    assert [first.input_mtok.base, first.output_mtok.base] == [5, 25]  # type: ignore[union-attr]
    assert [first.cache_read_mtok.base, first.cache_write_1h_mtok.base] == [Decimal("0.5"), 10]  # type: ignore[union-attr]
    expected = (3 * 5 + 13 * 25 + 11515 * Decimal("0.5") + 13835 * 10) / MTOK
    assert call.cost.amount == expected
    assert (call.cost.currency, call.cost.source) == ("USD", PRICE_SOURCE)


def test_cost_of_openai_calls_is_their_tokens_at_the_published_prices(store: LogStore) -> None:
    name = "test_chat_completion_tool_calls_with_content.yaml"
    sid = _imported(store, CASSETTES / name)
    totals = usage_totals_of(store.read(sid))
    used = _openai_usage(CASSETTES / name)
    # gpt-4o-mini: $0.15 input, $0.60 output per million tokens
    # (https://platform.openai.com/docs/pricing)
    assert totals.cost == {
        "USD": (used["input"] * Decimal("0.15") + used["output"] * Decimal("0.6")) / MTOK
    }


def _session(store: LogStore, sid: str, metas: list[dict[str, Any]]) -> str:
    store.create_session(NewSession(sid, "costs", "harvey"))
    batch = [NewEvent(events.message("user", "go"), created_at="2026-05-01T10:00:00.000000Z")]
    for i, meta in enumerate(metas):
        batch.append(
            NewEvent(
                events.message("assistant", f"answer {i}", meta=meta),
                created_at=f"2026-05-0{i + 2}T10:00:00.000000Z",
            )
        )
    store.append_batch(sid, batch)
    return sid


def _meta(model: str, **extra: Any) -> dict[str, Any]:
    usage = events.usage(input=1000, output=100, cache_read=None, cache_write=None)
    return {"model": model, "provider": "openai", "usage": usage, "usage_raw": None, **extra}


def test_a_model_no_table_prices_costs_unknown_never_zero(store: LogStore) -> None:
    sid = _session(store, "unpriced", [_meta("house-model-7")])
    totals = usage_totals_of(store.read(sid))
    assert totals.cost_text() == "unknown"
    record = totals.record()
    assert record["cost"] is None
    assert (record["cost_unknown_calls"], record["unpriced_models"]) == (1, ["house-model-7"])
    mixed = _session(store, "mixed", [_meta("house-model-7"), _meta("gpt-4o-mini")])
    both = usage_totals_of(store.read(mixed))
    assert both.cost_text() == "$0.00021 + unknown"  # (1000 × 0.15 + 100 × 0.60) / 10⁶


def test_a_recorded_cost_is_kept_as_recorded(store: LogStore) -> None:
    recorded = {"total": 0.0123, "currency": "USD", "source": "langfuse"}
    sid = _session(store, "recorded", [_meta("gpt-4o-mini", cost=recorded)])
    (call,) = calls_of(store.get_session(sid), store.read(sid))
    assert (call.cost.amount, call.cost.source) == (Decimal("0.0123"), "langfuse")


def test_totals_group_by_turn_model_and_day(store: LogStore) -> None:
    sid = _session(store, "grouped", [_meta("gpt-4o-mini"), _meta("house-model-7")])
    calls = calls_of(store.get_session(sid), store.read(sid))
    assert list(totals_by(calls, "turn")) == ["grouped#1"]  # one user message opens the turn
    assert list(totals_by(calls, "model")) == ["gpt-4o-mini", "house-model-7"]
    assert list(totals_by(calls, "day")) == ["2026-05-02", "2026-05-03"]


def test_usage_command(db_path: Path, store: LogStore) -> None:
    db = str(db_path)
    imported = run_cli(
        "import", str(SPOTTER / "tool_heavy.jsonl"), str(SPOTTER / "short.jsonl"), "--db", db
    )
    assert imported.returncode == 0, imported.stderr
    result = run_cli("usage", "--by", "model", "--json", "--db", db)
    assert result.returncode == 0, result.stderr
    (row,) = [json.loads(line) for line in result.stdout.splitlines()]
    heavy, short = (
        _claude_code_usage(SPOTTER / "tool_heavy.jsonl"),
        _claude_code_usage(SPOTTER / "short.jsonl"),
    )
    assert row["model"] == "claude-opus-4-6"
    assert row["calls"] == heavy["calls"] + short["calls"]
    assert row["tokens"]["cache_read"] == heavy["cache_read"] + short["cache_read"]
    # by session, in the order `sessions` lists them (by start), not the order of import
    by_session = run_cli("usage", "--by", "session", "--json", "--db", db).stdout.splitlines()
    listed = run_cli("sessions", "--json", "--db", db).stdout.splitlines()
    assert [json.loads(row)["session"] for row in by_session] == [
        json.loads(row)["id"] for row in listed
    ]
    assert json.loads(listed[0])["started"] < json.loads(listed[1])["started"]
    later = run_cli("usage", "--since", "2026-02-11", "--json", "--db", db)
    assert later.stdout == ""  # both transcripts are of 2026-02-10
    # a time too, as sessions --since takes it (a new user's RFC 3339 time was refused)
    that_day = run_cli(
        "usage", "--by", "model", "--since", "2026-02-10T00:00:00Z", "--json", "--db", db
    )
    assert that_day.stdout == result.stdout
    # --until as sessions --until reads it: a date takes the whole day
    through = run_cli("usage", "--by", "model", "--until", "2026-02-10", "--json", "--db", db)
    assert through.stdout == result.stdout
    earlier = run_cli("usage", "--until", "2026-02-09T23:59:59Z", "--json", "--db", db)
    assert earlier.stdout == ""
    backwards = run_cli("usage", "--since", "2026-02-11", "--until", "2026-02-10", "--db", db)
    assert backwards.returncode == 2 and "--since 2026-02-11 is after --until" in backwards.stderr
    none = run_cli("usage", "--since", "2026-02-11T00:00:00Z", "--db", db)
    assert (none.returncode, none.stdout) == (0, "")
    # nothing printed at all read as a log that could not be read: stderr says why
    assert none.stderr == (
        "no model calls with usage on or after 2026-02-11T00:00:00.000000Z in 2 sessions\n"
    )
    odd = run_cli("usage", "--since", "soon", "--db", db)
    assert (odd.returncode, odd.stderr.strip()) == (
        2,
        "error: --since 'soon': expected a date (YYYY-MM-DD) or an RFC 3339 time",
    )
    bad = run_cli("usage", "--by", "week", "--db", db)
    assert (bad.returncode, bad.stderr.strip()) == (
        2,
        "error: --by 'week': use one of session, model, agent, day, turn",
    )
    shown = run_cli("show", "5560", "--db", db)
    assert (
        "usage: 1 model call · 3 in · 13 out · 11,515 cache read · 13,835 cache write"
        in shown.stdout
    )
    listed = run_cli("sessions", "--usage", "--json", "--db", db)
    by_id = {r["id"]: r["usage"] for r in map(json.loads, listed.stdout.splitlines())}
    assert by_id["55604662-cf2a-4331-851a-ec234028f8ca"]["tokens"]["cache_write"] == 13835


def test_prices_are_read_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cost is computed with every socket refused: the table is the package's own data."""
    import socket

    from agenttrail.providers.prices import price_of

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a network call: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    at = datetime(2026, 5, 1, tzinfo=UTC)
    price = price_of(
        "gpt-4o-mini", "openai", input=1000, output=100, cache_read=0, cache_write=0, at=at
    )
    assert price == (1000 * Decimal("0.15") + 100 * Decimal("0.6")) / MTOK


def test_the_installed_price_table_has_its_date() -> None:
    from importlib.metadata import version

    from agenttrail.providers.prices import PUBLISHED

    installed = version("genai-prices")
    assert installed in PUBLISHED  # pyproject.toml pins it; PUBLISHED dates it
    assert f"genai-prices {installed} (published {PUBLISHED[installed]})" == PRICE_SOURCE


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("gpt-4o", "openai"),
        ("gpt-4o-mini", "openai"),
        ("o3", "openai"),
        ("claude-sonnet-4-20250514", "anthropic"),
        ("claude-opus-4-1", "anthropic"),
        ("claude-sonnet-4-5", "anthropic"),  # tiered: a prompt over 200k tokens costs more
        ("gemini-2.5-pro", None),  # tiered
        ("deepseek-chat", None),  # a price that changed over time
    ],
)
def test_a_price_is_the_price_tables_own_for_any_counts(model: str, provider: str | None) -> None:
    """``price_of`` asks the table once per price entry and multiplies (a table without tiers
    is linear in the counts); ``genai-prices``' own ``calc_price`` of each call is the oracle,
    over counts on both sides of the tier thresholds and dates years apart."""
    import random

    from genai_prices import Usage, calc_price

    from agenttrail.providers.prices import price_of

    rnd = random.Random(model)
    for _ in range(150):
        counts = {
            "input": rnd.randrange(0, 300_000),
            "output": rnd.randrange(0, 5_000),
            "cache_read": rnd.choice([0, rnd.randrange(0, 300_000)]),
            "cache_write": rnd.choice([0, rnd.randrange(0, 30_000)]),
            "cache_write_1h": rnd.choice([0, rnd.randrange(0, 30_000)]),
        }
        at = datetime(
            rnd.randrange(2023, 2027), rnd.randrange(1, 13), 1, rnd.randrange(24), tzinfo=UTC
        )
        write = counts["cache_write"]
        usage = Usage(
            input_tokens=counts["input"] + counts["cache_read"] + write,
            output_tokens=counts["output"],
            cache_read_tokens=counts["cache_read"],
            cache_write_tokens=write,
            cache_write_1h_tokens=min(counts["cache_write_1h"], write),
        )
        expected = calc_price(usage, model, provider_id=provider, genai_request_timestamp=at)
        assert price_of(model, provider, at=at, **counts) == expected.total_price, (counts, at)


def test_days_are_listed_in_calendar_order_whatever_the_sessions_order(store: LogStore) -> None:
    # sessions listed newest first gave days out of order (a new user's check of issue 20)
    late = _session(store, "late", [_meta("gpt-4o-mini")])
    store.create_session(NewSession(id="early"))
    store.append(
        "early",
        events.message("assistant", "hi", meta=_meta("gpt-4o-mini")),
        created_at="2025-01-01T10:00:00.000000Z",
    )
    calls = [
        *calls_of(store.get_session(late), store.read(late)),
        *calls_of(store.get_session("early"), store.read("early")),
    ]
    days = list(totals_by(calls, "day"))
    assert days == sorted(days) and days[0] == "2025-01-01"


def test_a_sessions_cost_is_the_sum_of_the_price_tables_price_of_each_call(
    store: LogStore,
) -> None:
    """The header's sum prices the calls of a model with undated, untiered prices together
    (their tokens summed); genai-prices' own calc_price of each call, added up, is the
    oracle, over models priced each way (undated, tiered, dated), a recorded cost, an
    unpriced model, and counts with cache reads and writes of both lengths."""
    import random

    from genai_prices import Usage, calc_price

    rnd = random.Random(7)
    models = [
        ("gpt-4o", "openai"),
        ("claude-sonnet-4-20250514", "anthropic"),
        ("claude-sonnet-4-5", "anthropic"),  # tiered
        ("deepseek-chat", None),  # dated
        ("house-model-7", None),  # unpriced
    ]
    store.create_session(NewSession("mixed", "costs", "harvey"))
    batch, expected = [], Decimal(0)
    for i in range(300):
        model, provider = models[i % len(models)]
        counts = {
            "input": rnd.randrange(0, 250_000),
            "output": rnd.randrange(0, 4_000),
            "cache_read": rnd.choice([None, rnd.randrange(0, 100_000)]),
            "cache_write": rnd.choice([None, rnd.randrange(0, 30_000)]),
        }
        hour = rnd.choice([0, rnd.randrange(0, 30_000)])
        raw = {"cache_creation": {"ephemeral_1h_input_tokens": hour}}
        meta = events.meta(model=model, provider=provider, usage=events.usage(**counts))
        meta["usage_raw"] = raw
        if i == 7:
            meta["cost"] = {"total": 0.5, "currency": "USD", "source": "langfuse"}
            expected += Decimal("0.5")
        at = datetime(2024 + i % 3, 1 + i % 12, 1 + i % 28, i % 24, tzinfo=UTC)
        stamp = at.strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        batch.append(NewEvent(events.message("assistant", f"a{i}", meta=meta), stamp))
        if i == 7 or model == "house-model-7":
            continue
        read, write = counts["cache_read"] or 0, counts["cache_write"] or 0
        usage = Usage(
            input_tokens=counts["input"] + read + write,
            output_tokens=counts["output"],
            cache_read_tokens=read,
            cache_write_tokens=write,
            cache_write_1h_tokens=min(hour, write),
        )
        expected += calc_price(
            usage, model, provider_id=provider, genai_request_timestamp=at
        ).total_price
    store.append_batch("mixed", batch)
    totals = usage_totals_of(store.read("mixed"))
    assert totals.cost == {"USD": expected}
    assert (totals.calls, totals.unpriced) == (300, 60)
    assert totals.sources == {PRICE_SOURCE, "langfuse"}
