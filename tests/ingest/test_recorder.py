"""The recorder API a live agent writes with, checked against the Harvey audit trail's
example (docs/specs.md)."""

from __future__ import annotations

import json
import time

import pytest

from agenttrail import Recorder, usage
from agenttrail.errors import InputError, PayloadTooLarge, TurnInFlight
from agenttrail.evidence.audit import audit
from agenttrail.ingest.sample import SAMPLE_SESSION_ID, record_sample
from agenttrail.log.store import LogStore
from agenttrail.model import NewEvent, events, tool_status
from agenttrail.views.pairing import pair_tool_calls
from tests import mortgage_model


def test_the_sample_session_holds_the_harvey_example(store: LogStore) -> None:
    # docs/specs.md, The Harvey audit trail, "A complete session file with all four
    # new elements": recall before the first turn, a plain turn, a RAG turn, a tool loop with
    # one failing call, a shell scene, a remote route whose model made its own tool call.
    assert record_sample(store) == SAMPLE_SESSION_ID
    assert record_sample(store) == SAMPLE_SESSION_ID  # a second run writes nothing
    got = list(store.read(SAMPLE_SESSION_ID))
    kinds = [e.type for e in got]
    assert kinds[0] == "recall" and kinds.index("recall") < kinds.index("message")
    recalled = [(r["id"], r["source"], r["score"]) for r in got[0].payload["results"]]
    assert recalled == [
        ("workspace_profile_250928", "workspace_profile", 1.0),
        ("tool_use_d55f70", "tool_use", 0.75),
    ]
    users = [e.payload["content"] for e in got if e.type == "message" and e.actor == "user"]
    assert users == [
        "What is 2+2?",
        "How do I initialise a Go module?",
        "Does harvey.go compile cleanly?",
        "@mistral review this fix",
    ]
    rag = next(e.payload for e in got if e.type == "rag")
    assert (rag["chunks"], rag["store"], rag["top_score"]) == (3, "rag_store.db", 0.87)
    pairing = pair_tool_calls(got)
    calls = [e for e in got if e.type == "tool_call"]
    notes = [
        (
            c.payload.get("character"),
            c.payload["name"],
            str(tool_status(pairing.result_of[c.seq].payload)),
        )
        for c in calls
    ]
    assert notes == [
        (None, "read_file", "ok"),
        (None, "run_shell", "error: exit 1"),
        ("MISTRAL", "read_file", "ok"),
    ]
    assert pairing.anomalies == {}
    shell = next(e.payload for e in got if e.type == "shell")
    assert (shell["command"], shell["exit_code"]) == ("go build ./...", 1)
    replies = [e.payload for e in got if e.type == "message" and e.payload["role"] == "assistant"]
    assert [r["meta"]["location"] for r in replies] == ["local"] * 3 + ["remote"]
    assert replies[-1]["character"] == "MISTRAL"
    assert got[-1].type == "session_end"


def test_a_turn_records_its_failure_and_reraises(store: LogStore) -> None:
    rec = Recorder.start(store, title="t")
    with pytest.raises(ZeroDivisionError), rec.turn(model="m") as turn:
        turn.user("go")
        1 / 0  # noqa: B018
    last = list(store.read(rec.session_id))[-1]
    assert last.type == "error" and last.actor == "system"
    assert "ZeroDivisionError" in last.payload["message"]


def test_client_message_id_makes_the_user_message_idempotent(store: LogStore) -> None:
    rec = Recorder.start(store)
    with rec.turn(model="m") as turn:
        first = turn.user("hello", client_message_id="abc")
        again = turn.user("hello", client_message_id="abc")
    assert (first.seq, again.seq, again.duplicate) == (1, 1, True)


def test_usage_unknown_is_null_not_zero(store: LogStore) -> None:
    rec = Recorder.start(store)
    with rec.turn(model="m", provider="p", location="remote") as turn:
        turn.reply("x", usage=usage(input=5))
    meta = next(store.read(rec.session_id)).payload["meta"]
    assert meta["usage"] == {"input": 5, "output": None, "cache_read": None, "cache_write": None}
    assert meta["duration_ms"] is None


def test_a_too_large_tool_result_fails_naming_the_limit(store: LogStore) -> None:
    rec = Recorder.start(store)
    with rec.turn() as turn:
        call = turn.tool_call("dump", {})
        with pytest.raises(PayloadTooLarge, match="16,777,216"):
            turn.tool_result(call, "x" * (17 * 1024 * 1024))


def test_a_turn_holds_the_turn_lock_until_it_ends(store: LogStore) -> None:
    rec = Recorder.start(store, agent="harvey")
    user_call = [NewEvent(events.tool_call("u1", "read_file", {"path": "a"}, actor="user"))]
    with rec.turn(model="m") as turn:
        turn.user("go")
        lease = store.current_turn(rec.session_id)
        assert lease is not None and lease.turn_id == turn.turn_id and lease.holder == "harvey"
        with pytest.raises(TurnInFlight, match=turn.turn_id):
            store.append_batch(rec.session_id, user_call, unless_turn=True)
        assert [e.seq for e in store.read(rec.session_id)] == [1]  # nothing appended
    assert store.current_turn(rec.session_id) is None
    assert store.append_batch(rec.session_id, user_call, unless_turn=True)[0].seq == 2


def test_an_expired_lease_frees_the_lock(store: LogStore) -> None:
    sid = Recorder.start(store).session_id
    store.acquire_turn(sid, turn_id="t1", holder="a", ttl_s=0.05)
    with pytest.raises(TurnInFlight):
        store.acquire_turn(sid, turn_id="t2", holder="b", ttl_s=10)
    time.sleep(0.1)
    assert store.current_turn(sid) is None
    assert store.acquire_turn(sid, turn_id="t2", holder="b", ttl_s=10).turn_id == "t2"
    store.release_turn(sid, "t1")  # not the holder: a no-op
    assert store.current_turn(sid) is not None


# -- the recorder as a context manager closes the session ---------------------------------------


def test_leaving_a_recorder_block_closes_the_session(store: LogStore) -> None:
    with Recorder.start(store, title="t") as rec, rec.turn(model="m") as turn:
        turn.user("hi")
        turn.reply("hello")
    last = list(store.read(rec.session_id))[-1]
    assert (last.seq, last.type, last.actor) == (3, "session_end", "system")
    assert last.payload["reason"] == "closed"


def test_an_exception_closes_the_session_naming_its_type_and_goes_on(store: LogStore) -> None:
    with pytest.raises(ZeroDivisionError), Recorder.start(store) as rec, rec.turn() as turn:
        turn.user("divide")
        1 / 0  # noqa: B018
    got = [e.payload for e in store.read(rec.session_id)]
    assert [p["type"] for p in got] == ["message", "error", "session_end"]
    assert got[-1]["reason"] == "failed: ZeroDivisionError"
    assert store.current_turn(rec.session_id) is None


def test_a_session_closed_in_the_block_is_closed_once(store: LogStore) -> None:
    with Recorder.start(store) as rec:
        rec.close("done")
    assert [(e.type, e.payload.get("reason")) for e in store.read(rec.session_id)] == [
        ("session_end", "done")
    ]


# -- trace rows commit with their results ------------------------------------------------------

_LOAN = {"principal": 300_000, "annual_rate": 0.065, "years": 30}


@pytest.mark.parametrize("retry", ["the call and its result", "the result only"])
def test_a_retried_tool_result_writes_the_trace_row_the_log_lacks(
    store: LogStore, retry: str
) -> None:
    # A log written before results committed with their rows: a result stored, its row not.
    rec = Recorder.start(store, agent="advisor")
    envelope = json.dumps(mortgage_model.run_model(_LOAN))
    call = events.tool_call("c1", "run_model", _LOAN)
    store.append(rec.session_id, call, key="tool_call:c1")
    result = events.tool_result("c1", None, output=envelope)
    store.append(rec.session_id, result, key="tool_result:c1")
    assert store.traces(rec.session_id) == []
    with rec.turn(model="m") as turn:  # the agent, restarted, records them again
        if retry == "the call and its result":
            assert turn.tool_call("run_model", _LOAN, id="c1") == "c1"
        again = turn.tool_result("c1", envelope)
    assert (again.seq, again.duplicate) == (2, True)
    (row,) = store.traces(rec.session_id)
    assert (row.call_seq, row.result_seq, row.tool, row.status) == (1, 2, "run_model", "verified")
    assert [a.ok for a in audit(store, [rec.session_id])] == [True]


def test_a_result_of_a_call_recorded_before_a_restart_gets_its_trace_row(store: LogStore) -> None:
    first = Recorder.start(store, agent="advisor")
    with first.turn(model="m") as turn:
        turn.user("payment?")
        turn.tool_call("run_model", _LOAN, id="c1")
    resumed = Recorder(store, first.session_id)
    with resumed.turn(model="m") as turn:
        appended = turn.tool_result("c1", json.dumps(mortgage_model.run_model(_LOAN)))
    (row,) = store.traces(first.session_id)
    assert (row.call_seq, row.result_seq, row.turn_seq) == (2, appended.seq, 1)
    assert [a.ok for a in audit(store, [first.session_id])] == [True]


# -- turn leases: renewed while the agent lives, taken over by its restart ----------------------


def test_a_turn_keeps_its_lease_through_a_tool_call_longer_than_the_lease(
    store: LogStore,
) -> None:
    rec = Recorder.start(store, agent="harvey", lease_s=1)
    with rec.turn(model="m") as turn:
        time.sleep(2.5)  # a long tool call: the lease is renewed meanwhile
        lease = store.current_turn(rec.session_id)
        assert lease is not None and lease.turn_id == turn.turn_id
        with pytest.raises(TurnInFlight):
            store.acquire_turn(rec.session_id, turn_id="t", holder="someone else", ttl_s=5)
    assert turn.lease.lost is None
    assert store.current_turn(rec.session_id) is None


def test_a_restarted_agent_takes_over_its_own_lease_at_once_and_no_one_elses(
    store: LogStore,
) -> None:
    sid = Recorder.start(store, agent="harvey").session_id
    # What a killed agent leaves: a lease of its holder, running on.
    store.acquire_turn(sid, turn_id="turn_killed", holder="harvey", ttl_s=600)
    with (
        pytest.raises(TurnInFlight, match="turn_killed"),
        Recorder(store, sid, holder="other").turn(),
    ):
        pass
    with pytest.raises(TurnInFlight):  # the server's turn route never takes over
        store.acquire_turn(sid, turn_id="t", holder="harvey", ttl_s=5)
    started = time.monotonic()
    with Recorder(store, sid).turn(model="m") as turn:
        assert time.monotonic() - started < 1
        lease = store.current_turn(sid)
        assert lease is not None and (lease.turn_id, lease.holder) == (turn.turn_id, "harvey")
    assert store.current_turn(sid) is None


def test_a_turn_whose_lease_was_taken_over_stops_renewing_it(store: LogStore) -> None:
    rec = Recorder.start(store, agent="harvey", lease_s=1)
    with rec.turn(model="m") as first:
        with Recorder(store, rec.session_id).turn(model="m") as second:
            time.sleep(0.8)  # more than one renewal period of the first turn
            lease = store.current_turn(rec.session_id)
            assert lease is not None and lease.turn_id == second.turn_id
        assert first.lease.lost is not None and second.turn_id in first.lease.lost


def test_the_turn_lease_length_comes_from_the_argument_or_the_environment(
    store: LogStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = Recorder.start(store).session_id
    assert Recorder(store, sid).lease_s == 10.0
    monkeypatch.setenv("AGENTTRAIL_TURN_LEASE_S", "2.5")
    assert (Recorder(store, sid).lease_s, Recorder(store, sid, lease_s=4).lease_s) == (2.5, 4.0)
    monkeypatch.setenv("AGENTTRAIL_TURN_LEASE_S", "soon")
    with pytest.raises(InputError, match="AGENTTRAIL_TURN_LEASE_S='soon' is not a number"):
        Recorder(store, sid)
    with pytest.raises(InputError, match=r"lease_s: a turn lease of 0.5 s is outside .* 1 to 3600"):
        Recorder.start(store, lease_s=0.5)
    assert len(store.sessions()) == 1  # refused before the session was created
