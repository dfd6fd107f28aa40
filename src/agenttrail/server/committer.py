"""Group commit: the appends of concurrent requests share one transaction and one fsync.

An append request hands its batch to the app's :class:`Committer` and waits. While no group
is being written, the batch goes at once, alone; while one is, the batches that arrive
meanwhile wait and then go together as the next group, in one transaction
(:meth:`agenttrail.log.store.EventLog.append_group`): one commit, so one fsync on SQLite
(``synchronous = FULL``), for all of them. A request is answered only when the commit that
holds its batch has returned, so an acknowledged append is on disk (docs/server.md, Group
commit). Each batch is still refused alone: an unknown session, a payload above the limit or
an agent turn in flight fails its own request and no other.

The group is written on one worker thread (the store blocks; the event loop must not), so a
request costs no thread hop of its own: one hop per group, whatever its size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import anyio

from agenttrail.log.store import Appended, EventLog
from agenttrail.model import NewEvent

__all__ = ["Committer"]


@dataclass(frozen=True)
class _Waiting:
    """A batch waiting for the next group, and the future its request awaits."""

    session_id: str
    events: Sequence[NewEvent]
    unless_turn: bool
    done: asyncio.Future[list[Appended]]


class Committer:
    """Writes the appends of concurrent requests in groups, one commit each.

    Args:
        store: the log; its calls run on a worker thread, one group at a time.

    Use from the event loop only (not thread-safe: the loop is its lock).
    """

    def __init__(self, store: EventLog) -> None:
        self.store = store
        self.requests = 0
        """Batches written so far (refused ones included)."""
        self.commits = 0
        """Groups written so far: ``requests / commits`` is the mean group size."""
        self._waiting: list[_Waiting] = []
        self._writer: asyncio.Task[None] | None = None

    async def append(
        self, session_id: str, events: Sequence[NewEvent], *, unless_turn: bool = False
    ) -> list[Appended]:
        """Append ``events`` to ``session_id`` with the next group; returns once it committed.

        Returns:
            One :class:`~agenttrail.log.store.Appended` per event, as ``append_batch`` does.

        Raises:
            What ``append_batch`` raises for this batch alone (``SessionNotFound``,
            ``PayloadTooLarge``, ``TurnInFlight`` with ``unless_turn``, ``StoreError`` …).
        """
        done: asyncio.Future[list[Appended]] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(session_id, events, unless_turn, done))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write())
        # Shielded: a request whose client leaves does not cancel the write under way; its
        # batch is committed (or refused) like the others, and nobody reads the answer.
        return await asyncio.shield(done)

    async def _write(self) -> None:
        """Write groups until nothing waits; each group is what arrived during the last."""
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                batches = [(w.session_id, w.events, w.unless_turn) for w in group]
                try:
                    outcomes: Sequence[object] = await anyio.to_thread.run_sync(
                        self.store.append_group, batches
                    )
                except Exception as e:  # not a refusal: the store itself broke
                    outcomes = [e] * len(group)
                except BaseException as e:  # the server stops: nothing more is written
                    for waiting in (*group, *self._waiting):
                        _settle(waiting.done, e)
                    self._waiting = []
                    raise
                self.requests += len(group)
                self.commits += 1
                for waiting, outcome in zip(group, outcomes, strict=True):
                    _settle(waiting.done, outcome)
        finally:
            self._writer = None


def _settle(done: asyncio.Future[list[Appended]], outcome: object) -> None:
    """Answer a waiting request: its seqs, or the error of its batch (a refusal is an
    :class:`~agenttrail.errors.AgentTrailError` in ``outcome``'s place)."""
    if done.done():  # its request's task was cancelled and nobody awaits it
        return
    if isinstance(outcome, asyncio.CancelledError):
        done.cancel()
    elif isinstance(outcome, BaseException):
        done.set_exception(outcome)
    else:
        done.set_result(cast(list[Appended], outcome))
