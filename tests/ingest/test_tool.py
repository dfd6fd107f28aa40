"""``@agenttrail.tool`` (agenttrail/ingest/tool.py): a Python function's runs recorded as tool
calls of the current turn, sync and async, success and failure, answering the model's calls;
and refused outside every turn."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import agenttrail
from agenttrail import AsyncRecorder, Recorder
from agenttrail.errors import NoTurn
from agenttrail.log.store import LogStore
from agenttrail.model import Event
from agenttrail.replay import replay


@agenttrail.tool
def weather(city: str, unit: str = "C") -> dict[str, Any]:
    time.sleep(0.02)
    return {"city": city, "temp": 21, "unit": unit}


@agenttrail.tool(name="read_file")
def read(path: str) -> str:
    raise FileNotFoundError(f"no such file: {path}")


@agenttrail.tool
async def search(query: str, *, limit: int = 3) -> list[str]:
    await asyncio.sleep(0.02)
    return [f"{query} {i}" for i in range(limit)]


class Refused(Exception):
    pass


@agenttrail.tool
async def deploy(target: str) -> None:
    await asyncio.sleep(0)
    raise Refused(f"{target} is frozen")


def _calls_and_results(store: LogStore, session_id: str) -> list[Event]:
    return [e for e in store.read(session_id) if e.type in ("tool_call", "tool_result")]


def test_a_sync_tool_records_its_call_result_and_duration(store: LogStore) -> None:
    rec = Recorder.start(store)
    with rec.turn(model="m") as turn:
        turn.user("weather?")
        assert weather("Paris") == {"city": "Paris", "temp": 21, "unit": "C"}
        weather(city="Rome", unit="F")
    call, result, call2, result2 = _calls_and_results(store, rec.session_id)
    assert (call.payload["name"], call.payload["input"]) == ("weather", {"city": "Paris"})
    assert call2.payload["input"] == {"city": "Rome", "unit": "F"}
    assert result.payload["toolCallId"] == call.payload["id"]
    assert result.payload["output"] == {"city": "Paris", "temp": 21, "unit": "C"}
    assert result.payload["name"] == "weather" and "error" not in result.payload
    assert result.payload["meta"]["duration_ms"] >= 20  # it slept 20 ms
    assert result2.payload["toolCallId"] == call2.payload["id"] != call.payload["id"]


def test_a_sync_tool_that_raises_records_the_error_and_reraises_it(store: LogStore) -> None:
    rec = Recorder.start(store)
    with rec.turn(model="m") as turn:
        turn.user("read it")
        with pytest.raises(FileNotFoundError, match=r"no such file: a\.txt") as raised:
            read("a.txt")
        assert raised.type is FileNotFoundError  # the function's own exception, unchanged
    call, result = _calls_and_results(store, rec.session_id)
    assert (call.payload["name"], call.payload["input"]) == ("read_file", {"path": "a.txt"})
    assert result.payload["error"] == "FileNotFoundError: no such file: a.txt"
    assert agenttrail.tool_status(result.payload).ok is False
    assert [e.type for e in store.read(rec.session_id)][-1] == "tool_result"  # turn went on


def test_async_tools_record_success_and_failure(store: LogStore) -> None:
    async def main() -> str:
        rec = await AsyncRecorder.start(store)
        async with rec.turn(model="m") as turn:
            await turn.user("go")
            assert await search("cats", limit=2) == ["cats 0", "cats 1"]
            with pytest.raises(Refused, match="prod is frozen"):
                await deploy("prod")
        return rec.session_id

    session_id = asyncio.run(main())
    call, result, call2, result2 = _calls_and_results(store, session_id)
    assert call.payload["input"] == {"query": "cats", "limit": 2}
    assert result.payload["output"] == ["cats 0", "cats 1"]
    assert result.payload["meta"]["duration_ms"] >= 20
    assert call2.payload["input"] == {"target": "prod"}
    assert result2.payload["error"] == "Refused: prod is frozen"


def test_tools_answer_the_calls_the_model_asked_for(store: LogStore) -> None:
    async def main() -> tuple[str, list[str]]:
        rec = await AsyncRecorder.start(store)
        async with rec.turn(model="m", provider="anthropic") as turn:
            await turn.user("two searches")
            ids = await turn.assistant(
                tool_calls=[("search", {"query": "dogs"}), ("search", {"query": "cats"})],
                usage=agenttrail.usage(input=12, output=4),
            )
            # run in parallel, in another order than the model's
            await asyncio.gather(search("cats"), search(query="dogs"))
            await turn.reply("done")
        return rec.session_id, ids

    session_id, (dogs, cats) = asyncio.run(main())
    got = list(store.read(session_id))
    calls = [e.payload for e in got if e.type == "tool_call"]
    assert [c["id"] for c in calls] == [dogs, cats]  # no call of their own
    answered = {
        e.payload["toolCallId"]: e.payload["output"] for e in got if e.type == "tool_result"
    }
    assert answered == {dogs: ["dogs 0", "dogs 1", "dogs 2"], cats: ["cats 0", "cats 1", "cats 2"]}
    chat = replay(got, "openai")
    assert [m["role"] for m in chat.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in chat.messages[1]["tool_calls"]] == [dogs, cats]
    assert [n.kind for n in chat.notes] == []


def test_a_tool_outside_every_turn_does_not_run(store: LogStore) -> None:
    ran: list[str] = []

    @agenttrail.tool
    def touch(path: str) -> None:
        ran.append(path)

    rec = Recorder.start(store)
    with pytest.raises(NoTurn, match="tool 'touch' was called outside a recorder's turn"):
        touch("a")
    with rec.turn(model="m"):
        pass
    with pytest.raises(NoTurn):  # the turn is over
        touch("b")
    touch.__wrapped__("c")  # type: ignore[attr-defined]
    assert ran == ["c"]
    assert list(store.read(rec.session_id)) == []


def test_concurrent_turns_each_record_their_own_tools(store: LogStore) -> None:
    async def agent(n: int) -> str:
        rec = await AsyncRecorder.start(store)
        async with rec.turn(model="m"):
            await asyncio.sleep(0.01 * n)
            await search(f"q{n}", limit=1)
        return rec.session_id

    async def main() -> list[str]:
        return await asyncio.gather(*(agent(n) for n in range(3)))

    for n, session_id in enumerate(asyncio.run(main())):
        call, result = _calls_and_results(store, session_id)
        assert call.payload["input"] == {"query": f"q{n}", "limit": 1}
        assert result.payload["output"] == [f"q{n} 0"]


@dataclass
class Point:
    x: int
    y: int


class Shape:
    @agenttrail.tool
    def move(self, to: Point, *path: Path, **options: Any) -> tuple[int, float]:
        return (to.x, float("inf"))


def test_inputs_and_outputs_are_recorded_json_shaped(store: LogStore) -> None:
    rec = Recorder.start(store)
    with rec.turn(model="m"):
        Shape().move(Point(1, 2), Path("a/b"), speed=3, via={1: object})
    call, result = _calls_and_results(store, rec.session_id)
    assert call.payload["input"] == {
        "to": {"x": 1, "y": 2},
        "path": ["a/b"],
        "speed": 3,
        "via": {"1": repr(object)},
    }
    assert result.payload["output"] == [1, "inf"]
