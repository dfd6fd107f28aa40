"""Pairing tool calls with results strictly by id (rules: agenttrail.views.pairing)."""

from __future__ import annotations

from agenttrail.log.store import LogStore
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.views.pairing import pair_tool_calls


def _log(store: LogStore, payloads: list[dict[str, object]]) -> list[object]:
    sid = store.create_session(NewSession()).id
    store.append_batch(sid, [NewEvent(p) for p in payloads])
    return list(store.read(sid))


def test_a_result_after_an_unrelated_user_message_pairs_with_its_call(store: LogStore) -> None:
    got = _log(
        store,
        [
            events.tool_call("c1", "grep", {"pattern": "x"}),
            events.message("user", "also check tests"),
            events.tool_result("c1", "grep", output="a.py:1"),
        ],
    )
    pairing = pair_tool_calls(got)  # type: ignore[arg-type]
    assert pairing.result_of[1].seq == 3 and pairing.anomalies == {}


def test_two_calls_sharing_an_id_are_kept_and_flagged_ambiguous(store: LogStore) -> None:
    got = _log(
        store,
        [
            events.tool_call("read_file", "read_file", {"path": "a"}),
            events.tool_call("read_file", "read_file", {"path": "b"}),
            events.tool_result("read_file", "read_file", output="A"),
            events.tool_result("read_file", "read_file", output="B"),
        ],
    )
    pairing = pair_tool_calls(got)  # type: ignore[arg-type]
    assert pairing.result_of == {}
    assert {s: a.kind for s, a in pairing.anomalies.items()} == {
        1: "duplicate_id",
        2: "duplicate_id",
        3: "duplicate_id",
        4: "duplicate_id",
    }
    assert [e.payload.get("output") for e in got[2:]] == ["A", "B"]  # type: ignore[attr-defined]


def test_results_out_of_order_pair_with_their_own_calls(store: LogStore) -> None:
    got = _log(
        store,
        [
            events.tool_call("call_1", "read_file", {"path": "a"}),
            events.tool_call("call_2", "read_file", {"path": "b"}),
            events.tool_result("call_2", "read_file", output="B"),
            events.tool_result("call_1", "read_file", output="A"),
        ],
    )
    pairing = pair_tool_calls(got)  # type: ignore[arg-type]
    assert {c: r.payload["output"] for c, r in pairing.result_of.items()} == {1: "A", 2: "B"}


def test_empty_and_missing_ids_are_kept_unresolved(store: LogStore) -> None:
    got = _log(
        store,
        [
            events.tool_call("", "grep", {}),
            events.tool_result(None, output="something"),
        ],
    )
    pairing = pair_tool_calls(got)  # type: ignore[arg-type]
    assert {s: a.kind for s, a in pairing.anomalies.items()} == {1: "missing_id", 2: "missing_id"}


def test_orphans_duplicates_and_pending_calls_are_named(store: LogStore) -> None:
    got = _log(
        store,
        [
            events.tool_call("a", "x", {}),
            events.tool_result("a", output="1"),
            events.tool_result("a", output="2"),
            events.tool_result("zzz", output="?"),
            events.tool_call("b", "x", {}),
        ],
    )
    kinds = {s: a.kind for s, a in pair_tool_calls(got).anomalies.items()}  # type: ignore[arg-type]
    assert kinds == {
        1: "duplicate_result",
        2: "duplicate_result",
        3: "duplicate_result",
        4: "orphan_result",
        5: "no_result",
    }
