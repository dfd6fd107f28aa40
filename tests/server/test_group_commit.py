"""Group commit: concurrent appends share one transaction and one commit, each still
acknowledged once, in seq order, and refused alone (docs/server.md, Group commit)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from agenttrail.errors import (
    AgentTrailError,
    AppendOnlyViolation,
    PayloadTooLarge,
    SessionNotFound,
    TurnInFlight,
)
from agenttrail.log.chain import verify
from agenttrail.log.store import Appended, LogStore, open_store
from agenttrail.log.store.sqlite import SQLiteStore
from agenttrail.model import NewEvent, NewSession
from agenttrail.server.committer import Committer
from tests.server.conftest import Server


def _events(*tags: str) -> list[NewEvent]:
    return [NewEvent({"type": "x", "tag": tag}) for tag in tags]


def _tags(store: LogStore, session_id: str) -> list[tuple[int, str]]:
    return [(e.seq, e.payload["tag"]) for e in store.read(session_id)]


def _verified(store: LogStore, session_id: str) -> bool:
    (verdict,) = verify(store, [session_id])
    return verdict.ok


def _together(committer: Committer, calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Each ``(session_id, events, unless_turn)`` handed to the committer at once, in one
    turn of the event loop (so they wait for the same group); their outcomes, errors as
    values."""

    async def all_at_once() -> list[Any]:
        return await asyncio.gather(
            *(committer.append(s, e, unless_turn=u) for s, e, u in calls),
            return_exceptions=True,
        )

    return asyncio.run(all_at_once())


def test_appends_that_arrive_together_share_one_commit(store: LogStore) -> None:
    a = store.create_session(NewSession("a")).id
    b = store.create_session(NewSession("b")).id
    committer = Committer(store)
    calls = [(a, _events("a1"), False), (b, _events("b1", "b2"), False), (a, _events("a2"), False)]
    got = _together(committer, calls)
    assert (committer.requests, committer.commits) == (3, 1)
    assert [[r.seq for r in g] for g in got] == [[1], [1, 2], [2]]  # a's in arrival order
    assert _tags(store, a) == [(1, "a1"), (2, "a2")]
    assert _tags(store, b) == [(1, "b1"), (2, "b2")]
    assert _verified(store, a) and _verified(store, b)


def test_a_refused_batch_fails_alone_and_the_rest_of_its_group_commits(db_url: str) -> None:
    with open_store(db_url, max_payload_bytes=4096) as store:
        _refused_alone(store)


def _refused_alone(store: LogStore) -> None:
    a = store.create_session(NewSession("a")).id
    held = store.create_session(NewSession("held")).id
    store.acquire_turn(held, turn_id="t1", holder="agent", ttl_s=300)
    store.append(a, {"type": "x", "tag": "first"}, key="k1")
    committer = Committer(store)
    huge = [NewEvent({"type": "x", "tag": "big", "blob": "x" * (store.max_payload_bytes + 1)})]
    calls = [
        (a, _events("a1"), False),
        ("nope", _events("lost"), False),  # no such session
        (a, huge, False),  # above the payload limit: refused before the transaction
        (held, _events("user"), True),  # a user's call while an agent turn holds the lock
        (a, [NewEvent({"type": "x", "tag": "again"}, key="k1")], False),  # a key already used
        (a, [NewEvent({"type": "x", "tag": "new"}, key="k2")], False),
        (a, [NewEvent({"type": "x", "tag": "retry"}, key="k2")], False),  # same key, same group
        (held, _events("agent"), False),  # the agent's own appends go on during its turn
    ]
    got = _together(committer, calls)
    assert committer.commits == 1
    assert isinstance(got[1], SessionNotFound)
    assert isinstance(got[2], PayloadTooLarge)
    assert isinstance(got[3], TurnInFlight) and got[3].turn_id == "t1"
    assert [r.seq for r in got[0]] == [2]
    assert got[4] == [Appended(1, got[4][0].hash, duplicate=True)]
    assert [(r.seq, r.duplicate) for r in got[5]] == [(3, False)]
    assert [(r.seq, r.duplicate) for r in got[6]] == [(3, True)]
    assert [r.seq for r in got[7]] == [1]
    assert _tags(store, a) == [(1, "first"), (2, "a1"), (3, "new")]
    assert _tags(store, held) == [(1, "agent")]
    assert _verified(store, a) and _verified(store, held)


def test_a_batch_the_database_refuses_fails_alone(db_path: Any) -> None:
    # A row the database itself refuses (here a trigger of the test's, as a constraint or a
    # guard trigger would) breaks the group's transaction: each batch is then written alone,
    # so only the refused one fails.
    with SQLiteStore(db_path, max_payload_bytes=1 << 20) as store:
        a = store.create_session(NewSession("a")).id
        b = store.create_session(NewSession("b")).id
        bad = store.create_session(NewSession("bad")).id
        store._conn.execute(
            "CREATE TEMP TRIGGER refuse BEFORE INSERT ON session_events "
            f"WHEN NEW.session_id = '{bad}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
        outcomes = store.append_group(
            [(a, _events("a1"), False), (bad, _events("x"), False), (b, _events("b1"), False)]
        )
        assert [r.seq for r in outcomes[0]] == [1]  # type: ignore[union-attr]
        assert isinstance(outcomes[1], AppendOnlyViolation)
        assert [r.seq for r in outcomes[2]] == [1]  # type: ignore[union-attr]
        assert _tags(store, a) == [(1, "a1")] and _tags(store, bad) == []


def test_many_concurrent_requests_are_each_acknowledged_once_without_gaps(server: Server) -> None:
    writers, posts = 12, 15
    sessions = ["g0", "g1", "g2"]
    with server.client() as http:
        for sid in sessions:
            assert http.post("/v1/sessions", json={"id": sid}).status_code == 201
    acknowledged: dict[str, list[tuple[int, str]]] = defaultdict(list)
    failures: list[str] = []
    lock = threading.Lock()

    def write(n: int) -> None:
        with server.client(rights="append") as http:
            for i in range(posts):
                sid = sessions[(n + i) % len(sessions)]
                tag = f"{n}.{i}"
                body: dict[str, Any] = {"payload": {"type": "x", "tag": tag}}
                if i % 5 == 4:  # every fifth a batch of two, and every seventh a bad one
                    body = {"events": [{"payload": {"type": "x", "tag": tag}}] * 2}
                if i % 7 == 6:
                    bad = http.post(f"/v1/sessions/{sid}/events", json={"payload": "not a map"})
                    if bad.status_code != 422:
                        failures.append(f"bad body: {bad.status_code}")
                answer = http.post(f"/v1/sessions/{sid}/events", json=body)
                if answer.status_code != 201:
                    failures.append(f"{tag}: {answer.status_code} {answer.text}")
                    continue
                with lock:
                    acknowledged[sid] += [(seq, tag) for seq in answer.json()["seqs"]]

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    for sid in sessions:
        stored = _tags(server.store, sid)
        # Every acknowledged seq holds what was acknowledged there, once; no gap, nothing else.
        assert sorted(acknowledged[sid]) == stored
        assert [seq for seq, _ in stored] == list(range(1, len(stored) + 1))
        assert _verified(server.store, sid)
    assert sum(len(v) for v in acknowledged.values()) == writers * (posts + posts // 5)


def test_an_invocation_after_a_turn_is_granted_is_always_refused(server: Server) -> None:
    # The turn lock under concurrent load: invocations race a turn being taken. Every one
    # sent after the turn was granted must be refused (409); one that was logged must have
    # been sent before the grant. A check of the lease outside the append's transaction, or
    # a group commit that decided a batch against a stale lease, would let one through.
    with server.client() as http:
        sid = http.post("/v1/sessions", json={}).json()["id"]
    granted = threading.Event()
    late: list[int] = []

    def invoke() -> None:
        with server.client() as http:
            for _ in range(12):
                sent_after_grant = granted.is_set()
                status = http.post(f"/v1/sessions/{sid}/tools/list_dir/invoke", json={}).status_code
                if sent_after_grant and status != 409:
                    late.append(status)

    threads = [threading.Thread(target=invoke) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    with server.client() as http:
        assert http.post(f"/v1/sessions/{sid}/turns", json={"holder": "agent"}).status_code == 201
    granted.set()
    for t in threads:
        t.join()
    assert late == []


def test_groups_over_the_same_sessions_in_opposite_orders_do_not_deadlock(db_url: str) -> None:
    # append_group locks sessions in id order whatever the order given (PostgreSQL locks
    # each session row to the commit; in the order given, these two would deadlock).
    with open_store(db_url) as one, open_store(db_url) as two:
        a = one.create_session(NewSession("a")).id
        b = one.create_session(NewSession("b")).id
        errors: list[object] = []

        def write(store: LogStore, order: list[str]) -> None:
            for i in range(20):
                outcomes = store.append_group([(s, _events(f"{s}{i}"), False) for s in order])
                errors.extend(o for o in outcomes if isinstance(o, AgentTrailError))

        threads = [
            threading.Thread(target=write, args=(one, [a, b])),
            threading.Thread(target=write, args=(two, [b, a])),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for sid in (a, b):
            assert [seq for seq, _ in _tags(one, sid)] == list(range(1, 41))
            assert _verified(one, sid)
