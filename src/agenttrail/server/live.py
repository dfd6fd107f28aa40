"""Live delivery: every durable append, in seq order, to every subscriber of a session.

docs/specs.md, Live delivery: "Subscribing with afterSeq replays the gap — the sequence
number is the whole recovery protocol." A subscriber first gets every durable event after its
``afterSeq`` from the store, then each new append as it commits, and ephemeral
``appendPartial`` patches while a response streams (never stored).

How no event is lost or sent twice: the subscription is registered *before* the backlog is
read, so an append that commits meanwhile is both in the backlog and in the queue, and the
sender drops any append whose seq it has already sent. Appends reach the hub in seq order
because :meth:`Hub.sync` reads them from the store under a per-session lock (the store's
seq order is commit order: docs/log-format.md). Appends made by other processes — another
server replica, an agent writing straight into the database — are found by :meth:`Hub.watch`:
on PostgreSQL each append NOTIFYs its session id at commit and the hub LISTENs, so a replica
publishes another replica's appends as they commit; on SQLite, which has no notifications,
the hub polls the heads of watched sessions every :data:`POLL_S`.

Queues are bounded. A subscriber that falls behind is closed with :data:`RESUME_CODE`, which
tells it to reconnect with the last seq it saw; a writer never waits for a reader.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from agenttrail.codec import json_line
from agenttrail.formats.jsonl import event_record
from agenttrail.log.redact import redacting_logger
from agenttrail.log.store import LogStore
from agenttrail.model import Event
from agenttrail.server.partials import PartialRedactor

__all__ = [
    "LISTEN_WAIT_S",
    "POLL_S",
    "QUEUE_SIZE",
    "RESUME_CODE",
    "FeedMessage",
    "Hub",
    "Subscription",
    "event_message",
]

logger = redacting_logger(__name__)

QUEUE_SIZE = 2048
"""Messages a subscriber may fall behind by before it is closed with :data:`RESUME_CODE`:
a burst of a few batches, not a session's history (that comes from the store on resume)."""

POLL_S = 0.05
"""How often the heads of watched sessions are read, to find appends other processes made
straight into the database (seconds): keeps their delivery well under the 50 ms target."""

LISTEN_WAIT_S = 0.25
"""Longest one wait for notifications holds its worker thread (seconds). Appends are
published as their notifications arrive, not at this pace; it bounds how long the server
takes to stop."""

BACKLOG_PAGE = 500
"""Events read from the store per step of a subscriber's backlog."""

RESUME_CODE = 4408
"""WebSocket close code: you fell behind; reconnect with ``afterSeq`` = the last seq you saw."""


class FeedState(enum.Enum):
    """A subscriber's feed: accepting → backlog → live → closed."""

    ACCEPTING = "accepting"
    BACKLOG = "backlog"
    LIVE = "live"
    CLOSED = "closed"


def event_message(event: Event, anomalies: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``append`` message for a durable event (the export fields, plus ``type``); the
    REST event JSON gives ``anomalies`` (names of why it is not paired), the live feed not."""
    return {"type": "append", **event_record(event, anomalies)}


@dataclass(frozen=True)
class FeedMessage:
    """One message of the feed, encoded once for every subscriber it goes to."""

    kind: str
    """``append`` (a durable event) or ``appendPartial`` (an ephemeral patch)."""
    seq: int | None
    """The event's seq for an ``append``; ``None`` for a partial."""
    text: str
    """The message as one line of JSON (``agenttrail.codec.json_line``), as sent."""

    @classmethod
    def of(cls, body: dict[str, Any]) -> FeedMessage:
        """The message for a JSON-ready ``body`` with its ``type`` (and ``seq``)."""
        seq = body.get("seq") if body["type"] == "append" else None
        return cls(body["type"], seq, json_line(body))


@dataclass(eq=False)
class Subscription:
    """One subscriber's bounded queue of messages."""

    session_id: str
    queue: asyncio.Queue[FeedMessage] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    overflowed: asyncio.Event = field(default_factory=asyncio.Event)
    state: FeedState = FeedState.ACCEPTING

    def offer(self, message: FeedMessage) -> None:
        """Queue a message without waiting; a full queue marks the subscriber as behind."""
        if self.overflowed.is_set():
            return
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            self.overflowed.set()


class Hub:
    """Fans durable appends and partials out to the subscribers of each session.

    Args:
        store: the log; read from worker threads.
    """

    def __init__(self, store: LogStore) -> None:
        self.store = store
        self.partials = PartialRedactor(store.redactor)
        """Redacts each partial before it is published (``server/partials.py``)."""
        self._subscribers: dict[str, set[Subscription]] = {}
        self._published: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def subscribe(self, session_id: str) -> Subscription:
        """Register a subscriber; appends after this call reach its queue."""
        sub = Subscription(session_id)
        if session_id not in self._subscribers:
            self._subscribers[session_id] = set()
            head = await anyio.to_thread.run_sync(self.store.head, session_id)
            self._published.setdefault(session_id, head[0] if head else 0)
        # Not [session_id]: while the head was read, another subscriber of the session may
        # have come and gone, and its unsubscribe dropped the (then empty) set.
        self._subscribers.setdefault(session_id, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget a subscriber (its feed closed)."""
        sub.state = FeedState.CLOSED
        subs = self._subscribers.get(sub.session_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subscribers[sub.session_id]
                self._published.pop(sub.session_id, None)

    async def sync(self, session_id: str) -> None:
        """Publish every event committed since the last one published, in seq order."""
        if session_id not in self._subscribers:
            return
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            after = self._published.get(session_id, 0)
            fresh = await anyio.to_thread.run_sync(
                lambda: list(self.store.read(session_id, after_seq=after))
            )
            for event in fresh:
                message = FeedMessage.of(event_message(event))
                for sub in tuple(self._subscribers.get(session_id, ())):
                    sub.offer(message)
            if fresh:  # a durable event replaces the partials that streamed before it
                self.partials.end(session_id)
            if fresh and session_id in self._subscribers:
                self._published[session_id] = fresh[-1].seq

    def publish_partial(self, session_id: str, patch: dict[str, Any]) -> int:
        """Send an ephemeral ``appendPartial`` patch, redacted by :attr:`partials` first, to
        the session's subscribers; returns how many got it. Never stored."""
        subs = tuple(self._subscribers.get(session_id, ()))
        message = FeedMessage.of({"type": "appendPartial", "session_id": session_id, **patch})
        for sub in subs:
            sub.offer(message)
        return len(subs)

    async def watch(self) -> None:
        """Forever: publish the appends other processes make to watched sessions.

        Wakes on the store's notifications when it has them (:meth:`LogStore.listen`,
        PostgreSQL LISTEN/NOTIFY), so another replica's append reaches this replica's
        subscribers as it commits; polls heads (:meth:`poll`) when it has none (SQLite).
        After the listener (re)connects, every watched session is read once, since
        notifications sent while it was away are lost.
        """
        listener = await anyio.to_thread.run_sync(self.store.listen)
        if listener is None:
            await self.poll()
            return
        try:
            while True:
                woken = await anyio.to_thread.run_sync(listener.wait, LISTEN_WAIT_S)
                if woken is None:
                    targets = tuple(self._subscribers)
                else:
                    targets = tuple(s for s in dict.fromkeys(woken) if s in self._subscribers)
                for session_id in targets:
                    try:
                        await self.sync(session_id)
                    except Exception:  # a store hiccup must not stop the listener; log it
                        logger.exception("live: reading session %s failed", session_id)
        finally:
            listener.close()

    async def poll(self) -> None:
        """Forever: find appends other processes made to watched sessions, and publish them."""
        while True:
            await anyio.sleep(POLL_S)
            for session_id in tuple(self._subscribers):
                try:
                    head = await anyio.to_thread.run_sync(self.store.head, session_id)
                except Exception:  # a store hiccup must not stop the poller; log it, go on
                    logger.exception("live: reading the head of session %s failed", session_id)
                    continue
                if head is not None and head[0] > self._published.get(session_id, head[0]):
                    await self.sync(session_id)

    def _page(self, session_id: str, after_seq: int) -> list[Event]:
        return list(self.store.read(session_id, after_seq=after_seq, limit=BACKLOG_PAGE))

    async def feed(self, sub: Subscription, after_seq: int) -> AsyncIterator[FeedMessage]:
        """The messages for one subscriber: the backlog after ``after_seq``, then live.

        Stops when the subscriber falls behind (check ``sub.overflowed``)."""
        sub.state = FeedState.BACKLOG
        last = after_seq
        while True:  # the backlog, in pages, straight from the store
            page = await anyio.to_thread.run_sync(self._page, sub.session_id, last)
            for event in page:
                yield FeedMessage.of(event_message(event))
                last = event.seq
            if len(page) < BACKLOG_PAGE:
                break
        sub.state = FeedState.LIVE
        while not sub.overflowed.is_set():
            # A subscriber falls behind only when its queue is full, so a sender waiting on an
            # empty queue never misses it: checking after each message is enough.
            message = await sub.queue.get()
            if sub.overflowed.is_set():
                break
            if message.seq is not None:
                if message.seq <= last:
                    continue  # already sent from the backlog
                last = message.seq
            yield message
