"""The live feed's hub (``server/live.py``) when subscribers of one session come and go at
once: what ``tests/faults/test_live_drops.py`` met by chance under load, made to happen."""

from __future__ import annotations

import asyncio
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
