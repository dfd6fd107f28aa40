"""The recorder for asyncio agents: :class:`AsyncRecorder` and :class:`AsyncTurn`.

The same API as :class:`~agenttrail.Recorder` and :class:`~agenttrail.Turn`, with ``async``
methods. Each store call runs in a worker thread (``asyncio.to_thread``, the loop's default
executor), so the event loop never waits on the database and concurrent tasks record
concurrently; the store is safe to share between threads (SQLite serialises its writers,
PostgreSQL pools connections). Example::

    async with await agenttrail.AsyncRecorder.start(log, title="t", agent="a") as rec:
        async with rec.turn(model="m", provider="openai", location="remote") as turn:
            await turn.user("hi")
            ids = await turn.assistant(tool_calls=[("search", {"q": "x"})], usage=...)
            await turn.tool_result(ids[0], "found")
            await turn.reply("done")

A turn's lease on the turn lock is renewed by the lease keeper's own thread
(:mod:`agenttrail.ingest.turn_lease`), whatever the event loop is doing; taking it and giving
it back run in worker threads like the rest. ``async with rec.turn()`` makes the turn the
current turn of the task that entered it (and of tasks it starts), where ``@agenttrail.tool``
functions record; concurrent tasks each in a turn of their own never see each other's.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from agenttrail.ingest.recorder import Recorder
from agenttrail.ingest.turn import Turn
from agenttrail.log.store import Appended, LogStore

__all__ = ["AsyncRecorder", "AsyncTurn"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def _threaded(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """An ``async`` method that runs the synchronous ``method`` of the wrapped object
    (``self.sync``) in a worker thread; its docstring is the synchronous one."""

    async def run(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self.sync, *args, **kwargs)

    return cast(Callable[Concatenate[Any, P], Coroutine[Any, Any, R]], functools.wraps(method)(run))


class AsyncRecorder:
    """:class:`~agenttrail.Recorder` for asyncio: ``await`` each method (see the module).

    Make one with ``await AsyncRecorder.start(store, …)`` (a new session) or ``await
    AsyncRecorder.open(store, session_id, …)`` (a session to go on with), or around a
    recorder: ``AsyncRecorder(recorder)``. As an async context manager it closes the session
    on exit, as ``with Recorder`` does.
    """

    def __init__(self, recorder: Recorder) -> None:
        self.sync = recorder
        """The synchronous recorder every call runs on."""

    @property
    def session_id(self) -> str:
        """The session being recorded."""
        return self.sync.session_id

    @classmethod
    async def start(cls, store: LogStore, **options: Any) -> AsyncRecorder:
        """Create a session and return its recorder (the keywords of
        :meth:`agenttrail.Recorder.start`).

        Raises:
            SessionExists: the id is taken.
            InputError: ``lease_s`` is out of its limits (nothing created).
        """
        start = functools.partial(Recorder.start, store, **options)
        return cls(await asyncio.to_thread(start))

    @classmethod
    async def open(cls, store: LogStore, session_id: str, **options: Any) -> AsyncRecorder:
        """The recorder of an existing session (the arguments of :class:`agenttrail.Recorder`).

        Raises:
            SessionNotFound: no such session.
        """
        opened = functools.partial(Recorder, store, session_id, **options)
        return cls(await asyncio.to_thread(opened))

    async def __aenter__(self) -> AsyncRecorder:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the session as :meth:`agenttrail.Recorder.__exit__` does."""
        await asyncio.to_thread(self.sync.__exit__, kind, exc, tb)

    append = _threaded(Recorder.append)
    recall = _threaded(Recorder.recall)
    shell = _threaded(Recorder.shell)
    note = _threaded(Recorder.note)

    async def error(self, message: str, *, created_at: str | None = None, **extra: Any) -> Appended:
        """Record an error the runtime hit (actor ``system``; :meth:`Recorder.error`)."""
        return await asyncio.to_thread(
            functools.partial(self.sync.error, message, created_at=created_at, **extra)
        )

    close = _threaded(Recorder.close)

    def turn(
        self,
        *,
        model: str | None = None,
        provider: str | None = None,
        location: str = "local",
        character: str | None = None,
    ) -> AsyncTurn:
        """Open a turn (the arguments of :meth:`agenttrail.Recorder.turn`); use it with
        ``async with``."""
        return AsyncTurn(
            self.sync.turn(model=model, provider=provider, location=location, character=character)
        )


class AsyncTurn:
    """:class:`~agenttrail.Turn` for asyncio, from :meth:`AsyncRecorder.turn`: ``async
    with`` it, ``await`` each method.

    Entering takes the turn lock (``TurnInFlight`` when another holder's turn has it) and
    makes the turn current in the entering task; an exception in the block is recorded as an
    ``error`` event and re-raised, as for a synchronous turn.
    """

    def __init__(self, turn: Turn) -> None:
        self.sync = turn
        """The synchronous turn every call runs on (what :func:`agenttrail.tool` records in)."""

    @property
    def turn_id(self) -> str:
        """Names this turn's lease on the session's turn lock."""
        return self.sync.turn_id

    async def __aenter__(self) -> AsyncTurn:
        await asyncio.to_thread(self.sync.lease.take)
        self.sync.bind()  # in this task's context, not the worker thread's copy
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.sync.unbind()
        await asyncio.to_thread(self.sync.finish, exc)

    user = _threaded(Turn.user)
    rag = _threaded(Turn.rag)
    assistant = _threaded(Turn.assistant)
    tool_call = _threaded(Turn.tool_call)
    call_for = _threaded(Turn.call_for)
    tool_result = _threaded(Turn.tool_result)
    partial = _threaded(Turn.partial)
    reply = _threaded(Turn.reply)
