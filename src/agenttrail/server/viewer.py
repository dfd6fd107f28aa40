"""The web viewer: its static page at ``/`` and the JSON routes it reads.

The page (``static/``: HTML, CSS and ES modules, no build step, nothing from a CDN) holds no
data and is served without a token; it sends the token it was opened with as a bearer header
and as ``?token=`` on the live WebSocket. The routes here are thin: rows come from
:mod:`agenttrail.views.transcript`, search from :mod:`agenttrail.views.search` (``docs/viewer.md``).
"""

# No ``from __future__ import annotations``: FastAPI reads the route signatures below, whose
# ``Auth`` is local to add_viewer, so the annotations must be evaluated where they are written.
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import anyio
from fastapi import Depends, FastAPI, Query
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from agenttrail.errors import InputError
from agenttrail.log.store import SNAPSHOT_EVENTS, SNAPSHOT_SESSIONS, LogStore
from agenttrail.model import Session
from agenttrail.model.search import SearchFilter
from agenttrail.server.auth import Grant
from agenttrail.views.search import narrows_events, search
from agenttrail.views.session_list import checked_range
from agenttrail.views.transcript import IndexCache
from agenttrail.views.usage import usage_totals_of

__all__ = ["STATIC_DIR", "TRANSCRIPT_PAGE_LIMIT", "add_viewer"]

STATIC_DIR = Path(__file__).with_name("static")
"""The page's files, shipped inside the package (``pyproject.toml`` package-data)."""

TRANSCRIPT_PAGE_LIMIT = 1000
"""Most rows one ``GET …/transcript`` returns: the page asks for 100 at a time, 500 when it
catches up with the live tail."""


def add_viewer(app: FastAPI, store: LogStore, *, grant: Callable[..., Awaitable[Grant]]) -> None:
    """Add the viewer's page and routes to ``app``.

    Args:
        app: the API app (its problem-details handlers cover these routes too).
        store: the log.
        grant: the dependency that checks the bearer token (``agenttrail.server._deps``).
    """
    indexes = IndexCache()
    app.state.transcript_indexes = indexes
    Auth = Annotated[Grant, Depends(grant)]

    async def run(fn: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(fn)

    @app.get("/v1/sessions/{session_id}/transcript")
    async def transcript(
        session_id: str,
        auth: Auth,
        after_seq: Annotated[int, Query(alias="afterSeq", ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=TRANSCRIPT_PAGE_LIMIT)] = 200,
        full: bool = False,
    ) -> dict[str, Any]:
        """Transcript rows after ``afterSeq``: tool calls paired with their results, run
        cards, anomalies, meta; plus ``updates`` to earlier rows these events changed."""
        auth.require("read", session_id)
        page = await run(
            lambda: indexes.page(store, session_id, after_seq=after_seq, limit=limit, full=full)
        )
        body: dict[str, Any] = page.body()
        return body

    @app.get("/v1/sessions/{session_id}/runs/{agent_id}")
    async def run_rows(
        session_id: str, agent_id: str, auth: Auth, full: bool = False
    ) -> dict[str, Any]:
        """The rows inside a finished run's card: the subagent's own events."""
        auth.require("read", session_id)
        try:
            rows = await run(lambda: indexes.run_rows(store, session_id, agent_id, full=full))
        except KeyError:
            raise InputError(f"no finished run {agent_id!r} in session {session_id!r}") from None
        return {"rows": rows}

    @app.get("/v1/sessions/{session_id}/summary")
    async def summary(session_id: str, auth: Auth) -> dict[str, Any]:
        """Counts for the sessions list (events, tool calls, runs, anomalies by kind), the
        chain status, verified now, and ``usage``: tokens and cost (docs/usage.md)."""
        auth.require("read", session_id)
        result: dict[str, Any] = await run(lambda: indexes.overview(store, session_id))
        session = await run(lambda: store.get_session(session_id))
        result["usage"] = await run(lambda: usage_totals_of(store.read(session.id)).record())
        return result

    @app.get("/v1/summaries")
    async def summaries(auth: Auth) -> dict[str, Any]:
        """The summary of every session this token may read, as ``/summary`` gives one:
        ``{"summaries": [{"id": …, "events": …, "chain": …, "usage": …}, …]}`` in the sessions'
        order."""
        auth.require("read")
        sessions = [s for s in await run(store.sessions) if auth.session in ("*", s.id)]
        return {"summaries": await run(lambda: summaries_of(store, indexes, sessions))}

    @app.get("/v1/search")
    async def search_sessions(
        auth: Auth,
        q: Annotated[str, Query(max_length=200)] = "",
        hits: Annotated[int, Query(ge=1, le=50)] = 5,
        tool: str | None = None,
        errors: bool = False,
        agent: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> dict[str, Any]:
        """Sessions whose fields or events contain ``q`` (case and accents ignored), with
        snippets, through the search index; ``tool``, ``errors``, ``agent``, ``since`` and
        ``until`` narrow the events as ``agenttrail search`` does, and without ``q`` the
        events ``tool``, ``errors``, ``since`` or ``until`` pick are found (docs/server.md).
        A blank ``q`` with none of those is a 422 problem."""
        auth.require("read")
        since, until = checked_range(since, until)
        one = None if auth.session == "*" else [auth.session]
        where = SearchFilter(one, tool, errors, agent, since, until)
        if not q.strip() and not narrows_events(where):
            raise InputError("q is blank: give the text to find, or tool, errors, since or until")
        sessions = [s for s in await run(store.sessions) if auth.session in ("*", s.id)]
        found = await run(lambda: search(store, q, sessions, where=where, hits_per_session=hits))
        return {"query": q, "sessions": [m.body() for m in found]}

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        """The viewer's page; it holds no data, so it needs no token."""
        # Its Content-Security-Policy is set with every response's security headers
        # (agenttrail.server.headers).
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")


def summaries_of(
    store: LogStore, indexes: IndexCache, sessions: list[Session]
) -> list[dict[str, Any]]:
    """The summary of each session, as ``…/summary`` gives it, with its ``id``, in order.

    Read a page of sessions at a time from a snapshot
    (:meth:`~agenttrail.log.store.LogStore.snapshot`): six statements a page where the store
    would run about sixteen a session. A page holds at most
    :data:`~agenttrail.log.store.SNAPSHOT_SESSIONS` sessions and
    :data:`~agenttrail.log.store.SNAPSHOT_EVENTS` events (the snapshot holds its rows in
    memory); a session longer than that is read from the store.

    Raises:
        StoreError: the rows cannot be read.
    """
    found: list[dict[str, Any]] = []
    for page in _pages(sessions):
        ids = [s.id for s in page]
        long = len(page) == 1 and page[0].head_seq > SNAPSHOT_EVENTS
        reader = store if long else store.snapshot(ids)
        overviews = indexes.overviews(reader, ids)
        for session, overview in zip(page, overviews, strict=True):
            usage = usage_totals_of(reader.read(session.id)).record()
            found.append({"id": session.id, **overview, "usage": usage})
    return found


def _pages(sessions: list[Session]) -> Iterator[list[Session]]:
    """``sessions`` in order, in pages of at most ``SNAPSHOT_SESSIONS`` sessions and
    ``SNAPSHOT_EVENTS`` events; a session longer than that is a page of its own."""
    page: list[Session] = []
    events = 0
    for session in sessions:
        if page and (len(page) == SNAPSHOT_SESSIONS or events + session.head_seq > SNAPSHOT_EVENTS):
            yield page
            page, events = [], 0
        page.append(session)
        events += session.head_seq
    if page:
        yield page
