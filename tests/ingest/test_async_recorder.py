"""The recorder for asyncio agents (agenttrail/ingest/async_recorder.py), under a real event
loop: concurrent turns in different sessions, the turn lease renewed while the loop awaits,
failures recorded, the session closed on leaving ``async with``."""

from __future__ import annotations

import asyncio

import pytest

from agenttrail import AsyncRecorder, Recorder, usage, verify
from agenttrail.errors import TurnInFlight
from agenttrail.log.store import LogStore
from agenttrail.replay import replay

SESSIONS = 4


async def _agent(store: LogStore, n: int, all_in: asyncio.Barrier) -> str:
    """One agent's turn: a model asking for two tools at once, their results, a reply."""
    rec = await AsyncRecorder.start(store, agent=f"agent{n}", title=f"run {n}")
    async with rec, rec.turn(model="m", provider="anthropic", location="remote") as turn:
        await turn.user(f"question {n}")
        # Every agent is inside its turn before any goes on: four turns held at once.
        await asyncio.wait_for(all_in.wait(), timeout=20)
        ids = await turn.assistant(
            f"looking {n}",
            tool_calls=[("search", {"q": n}), ("fetch", {"url": n})],
            usage=usage(input=10 * n, output=n),
        )
        await asyncio.sleep(0.01 * (SESSIONS - n))  # the sessions interleave
        for call_id in reversed(ids):
            await turn.tool_result(call_id, f"result {n} {call_id}")
        await turn.reply(f"answer {n}", usage=usage(input=n, output=1))
    return rec.session_id


def test_concurrent_turns_in_different_sessions(store: LogStore) -> None:
    async def main() -> list[str]:
        all_in = asyncio.Barrier(SESSIONS)
        return await asyncio.gather(*(_agent(store, n, all_in) for n in range(SESSIONS)))

    session_ids = asyncio.run(main())
    assert len(set(session_ids)) == SESSIONS
    for n, session_id in enumerate(session_ids):
        got = list(store.read(session_id))
        assert [e.seq for e in got] == list(range(1, 9))
        kinds = [(e.type, e.payload.get("role") or e.payload.get("name")) for e in got]
        assert kinds == [
            ("message", "user"),
            ("message", "assistant"),
            ("tool_call", "search"),
            ("tool_call", "fetch"),
            ("tool_result", None),
            ("tool_result", None),
            ("message", "assistant"),
            ("session_end", None),
        ]
        assert got[0].payload["content"] == f"question {n}"
        assert got[1].payload["meta"]["usage"]["input"] == 10 * n
        messages = replay(got, "anthropic").messages
        assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
        assert [b["type"] for b in messages[1]["content"]] == ["text", "tool_use", "tool_use"]
        assert store.current_turn(session_id) is None
    assert all(v.ok for v in verify(store))


def test_an_async_turn_keeps_its_lease_while_the_loop_awaits(store: LogStore) -> None:
    async def main() -> None:
        rec = await AsyncRecorder.start(store, agent="harvey", lease_s=1)
        async with rec.turn(model="m") as turn:
            await asyncio.sleep(2.5)  # a slow model call: more than two lease lengths
            lease = store.current_turn(rec.session_id)
            assert lease is not None and lease.turn_id == turn.turn_id
            with pytest.raises(TurnInFlight):
                store.acquire_turn(rec.session_id, turn_id="t", holder="someone else", ttl_s=5)
            assert turn.sync.lease.lost is None
        assert store.current_turn(rec.session_id) is None

    asyncio.run(main())


def test_an_async_turn_refuses_another_holder_and_records_its_failure(store: LogStore) -> None:
    async def main() -> str:
        rec = await AsyncRecorder.start(store, agent="harvey")
        store.acquire_turn(rec.session_id, turn_id="turn_other", holder="other", ttl_s=600)
        with pytest.raises(TurnInFlight, match="turn_other"):
            async with rec.turn(model="m"):
                pass
        store.release_turn(rec.session_id, "turn_other")
        with pytest.raises(KeyError, match="missing"):
            async with rec.turn(model="m") as turn:
                await turn.user("go")
                raise KeyError("missing")
        return rec.session_id

    session_id = asyncio.run(main())
    got = list(store.read(session_id))
    assert [e.type for e in got] == ["message", "error"]
    assert got[1].payload["message"] == "turn failed: KeyError: 'missing'"
    assert store.current_turn(session_id) is None


@pytest.mark.parametrize("fails", [False, True])
def test_leaving_async_with_closes_the_session(store: LogStore, fails: bool) -> None:
    async def main(rec: AsyncRecorder) -> None:
        async with rec:
            await rec.note("working")
            if fails:
                raise TimeoutError

    rec = AsyncRecorder(Recorder.start(store))
    if fails:
        with pytest.raises(TimeoutError):
            asyncio.run(main(rec))
    else:
        asyncio.run(main(rec))
    got = [(e.type, e.payload.get("reason")) for e in store.read(rec.session_id)]
    assert got == [
        ("annotation", None),
        ("session_end", "failed: TimeoutError" if fails else "closed"),
    ]


def test_an_async_recorder_goes_on_with_a_session(store: LogStore) -> None:
    first = Recorder.start(store, agent="harvey")
    first.note("before the restart")

    async def main() -> None:
        rec = await AsyncRecorder.open(store, first.session_id)
        await rec.error("restarted", code="E1")
        await rec.close()

    asyncio.run(main())
    got = [(e.seq, e.type, e.payload.get("code")) for e in store.read(first.session_id)]
    assert got == [(1, "annotation", None), (2, "error", "E1"), (3, "session_end", None)]
