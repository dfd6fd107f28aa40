"""The live feed's hub (``server/live.py``) when subscribers of one session come and go at
once: what ``tests/faults/test_live_drops.py`` met by chance under load, made to happen."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agenttrail.log.store import open_store
from agenttrail.model import NewSession, events
from agenttrail.server.live import Hub


def test_a_subscriber_that_leaves_while_another_subscribes_breaks_nothing(
    tmp_path: Path,
) -> None:
    async def race(hub: Hub) -> None:
        first = asyncio.create_task(hub.subscribe("s"))
        await asyncio.sleep(0)  # the first reads the session's head in a worker thread
        second = await hub.subscribe("s")  # the session's set exists: no wait
        hub.unsubscribe(second)  # the set is empty again, and dropped
        sub = await first  # it was a KeyError, a traceback and a dead feed
        store.append("s", events.message("user", "after"))
        await hub.sync("s")
        message = sub.queue.get_nowait()
        assert (message.kind, message.seq) == ("append", 2)  # only what came after it
        assert sub.queue.empty()

    with open_store(tmp_path / "log.db") as store:
        store.create_session(NewSession("s", "s", "a", "u"))
        store.append("s", events.message("user", "before"))
        asyncio.run(race(Hub(store)))


def test_a_stream_ended_by_its_event_leaves_nothing_to_the_next(tmp_path: Path) -> None:
    # The last word of a stream is held back until more text or `done` comes (a secret may
    # go on in the next delta). A stream that ended with its final event appended, not with
    # `done`, kept it, and the next stream's first delta began with it: "HelloBye now".
    async def streams(hub: Hub) -> list[object]:
        sub = await hub.subscribe("s")
        hub.publish_partial("s", hub.partials.redact("s", {"textDelta": "Hello"}))
        store.append("s", events.message("assistant", "Hello"))
        await hub.sync("s")  # as the append's route does
        await hub.sync("s")  # as the next partial's route does, before it
        hub.publish_partial("s", hub.partials.redact("s", {"textDelta": "Bye now", "done": True}))
        got = []
        while not sub.queue.empty():
            got.append(sub.queue.get_nowait())
        return [(m.kind, json.loads(m.text).get("textDelta")) for m in got]

    with open_store(tmp_path / "log.db") as store:
        store.create_session(NewSession("s", "s", "a", "u"))
        got = asyncio.run(streams(Hub(store)))
    # "Hello" held back (its last word), then the event, then the next stream alone
    assert got == [("appendPartial", None), ("append", None), ("appendPartial", "Bye now")]
