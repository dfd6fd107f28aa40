"""Replay over random logs (Hypothesis): every output is valid, deterministic, and survives
export → import.

The logs mix what real sessions hold: parallel calls, results in any order and before their
calls, orphan results, calls that never get a result, reused and missing ids, user messages
between calls and results, the user's own tool runs, runtime (actor ``system``) and trigger
messages, system prompts, empty and whitespace-only text, and events that are not messages.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agenttrail.codec import encode_payload
from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import open_store
from agenttrail.model import Event, NewEvent, NewSession, events
from agenttrail.replay import PLACEHOLDER, PROVIDERS, replay, validate

Payload = dict[str, Any]

TEXT = st.one_of(
    st.sampled_from(["", " ", "\n\n", "hi", "find TODOs", "done."]),
    st.text(st.characters(), max_size=12),  # lone surrogates included (st.text() alone has none)
)
NAMES = st.sampled_from(["grep", "ls", "read_file", "edit", "bash"])


@st.composite
def logs(draw: st.DrawFn) -> list[Payload]:
    """A random session log as payloads, in log order."""
    ids = [f"call_{n}" for n in range(draw(st.integers(0, 8)))]
    pending = list(ids)  # call ids not issued yet
    payloads: list[Payload] = []
    for _ in range(draw(st.integers(1, 14))):
        step = draw(
            st.sampled_from(
                [
                    "user",
                    "user",
                    "turn",
                    "turn",
                    "result",
                    "result",
                    "orphan",
                    "action",
                    "runtime",
                    "system",
                    "trigger",
                    "other",
                ]
            )
        )
        if step == "user":
            payloads.append(events.message("user", draw(TEXT), actor="user"))
        elif step == "turn":
            if draw(st.booleans()):
                blocks = None
                if draw(st.booleans()):
                    blocks = [
                        {"type": "text", "text": draw(TEXT)} for _ in range(draw(st.integers(1, 3)))
                    ]
                payloads.append(events.message("assistant", draw(TEXT), blocks=blocks))
            for _ in range(draw(st.integers(0, 4))):
                if pending and draw(st.integers(0, 9)) > 0:
                    call_id = pending.pop(0)
                else:  # a reused or missing id
                    call_id = draw(st.sampled_from([*ids[:2], ""])) if ids else ""
                payloads.append(events.tool_call(call_id, draw(NAMES), {"n": len(payloads)}))
        elif step == "result" and ids:
            call_id = draw(st.sampled_from(ids))  # issued or not yet: results may come first
            payloads.append(events.tool_result(call_id, output=draw(TEXT)))
        elif step == "orphan":
            call_id = draw(st.sampled_from(["ghost", "", None]))
            payloads.append(events.tool_result(call_id, output="orphaned"))
        elif step == "action":
            action_id = f"user_{len(payloads)}"
            payloads.append(events.tool_call(action_id, draw(NAMES), {}, actor="user"))
            if draw(st.booleans()):
                payloads.append(events.tool_result(action_id, output=draw(TEXT), actor="user"))
        elif step == "runtime":
            payloads.append(events.message("user", draw(TEXT), actor="system"))
        elif step == "system":
            payloads.append(events.message("system", draw(TEXT), actor="system"))
        elif step == "trigger":
            payloads.append(events.message("user", draw(TEXT), actor="trigger"))
        else:
            payloads.append(
                draw(st.sampled_from([events.error("boom"), events.shell("ls", "", 0)]))
            )
    # whatever was drawn, the parallel calls of one turn get their results shuffled
    tail = [events.tool_result(c, output=f"result of {c}") for c in ids if c not in pending]
    payloads.extend(draw(st.permutations(tail)) if draw(st.booleans()) else [])
    return payloads


def as_events(payloads: list[Payload], session: str = "s") -> list[Event]:
    return [
        Event(session, n, "2026-01-01T00:00:00.000000Z", encode_payload(p), bytes(32))
        for n, p in enumerate(payloads, start=1)
    ]


@settings(max_examples=300, deadline=None)
@given(logs(), st.integers(0, 40))
def test_every_replay_passes_the_validator(payloads: list[Payload], upto: int) -> None:
    found = as_events(payloads)
    for upto_seq in (None, upto):
        for provider in PROVIDERS:
            got = replay(found, provider, upto_seq=upto_seq)
            violations = validate(got.messages, provider)
            if got.messages:
                assert violations == [], (provider, got.messages)
            else:
                assert [v.rule for v in violations] == ["empty_request"]
                assert "empty" in [n.kind for n in got.notes]


@settings(max_examples=200, deadline=None)
@given(logs())
def test_nothing_is_left_out_or_filled_in_silently(payloads: list[Payload]) -> None:
    found = as_events(payloads)
    for provider in PROVIDERS:
        got = replay(found, provider)
        text = got.json()
        placeholders = text.count(json.dumps(PLACEHOLDER)[1:-1])
        assert placeholders == sum(n.kind == "placeholder" for n in got.notes)
        orphans = sum(
            p.get("type") == "tool_result" and p.get("output") == "orphaned" for p in payloads
        )
        left_out = {"orphan_result", "missing_id", "duplicate_result"}
        assert sum(n.kind in left_out and n.seq is not None for n in got.notes) >= orphans
        assert "orphaned" not in text
        calls = [p["name"] for p in payloads if p.get("type") == "tool_call"]
        assert got.tools == tuple(dict.fromkeys(calls))


@settings(max_examples=200, deadline=None)
@given(logs(), st.randoms(use_true_random=False))
def test_the_same_events_give_the_same_bytes(payloads: list[Payload], rnd: Any) -> None:
    found = as_events(payloads)
    shuffled = found[:]
    rnd.shuffle(shuffled)
    again = as_events(json.loads(json.dumps(payloads)))  # equal payloads, rebuilt
    for provider in PROVIDERS:
        first = replay(found, provider).json()
        assert replay(shuffled, provider).json() == first
        assert replay(again, provider).json() == first


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logs())
def test_replay_after_export_and_import_is_identical(payloads: list[Payload]) -> None:
    # A session with no events exports as an empty file, which import refuses ("empty
    # file"): there is nothing to carry over.
    assume(payloads)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with open_store(folder / "a.db") as store:
            sid = store.create_session(NewSession()).id
            store.append_batch(sid, [NewEvent(p) for p in payloads])
            original = list(store.read(sid))
        export = folder / "export.jsonl"
        lines = jsonl_from_events(original)
        export.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        with open_store(folder / "b.db") as other:
            [report] = import_paths(other, [export])
            imported = list(other.read(report.session_id))
    for provider in PROVIDERS:
        assert replay(imported, provider).json() == replay(original, provider).json()
