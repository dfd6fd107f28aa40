"""What every route is handed: the caller's grant, the store, the live hub, the user's tools.

The app keeps the store, the hub and the tool registry in ``app.state`` (set once by
:func:`agenttrail.server.app.create_app`); the routes take them as FastAPI dependencies, so a
route module is plain functions over the library, with no closure over the app (docs/server.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import Depends, Header, Request

from agenttrail.log.store import LogStore
from agenttrail.server.auth import Grant, TokenCache, bearer_token
from agenttrail.server.committer import Committer
from agenttrail.server.live import Hub
from agenttrail.server.tools import ToolRegistry
from agenttrail.views.transcript import IndexCache

__all__ = ["Auth", "Commits", "HubDep", "Indexes", "Store", "Tools", "grant", "run"]

T = TypeVar("T")


# The dependencies are coroutines: FastAPI runs a plain function in a worker thread, a hop
# that costs more than the function.


async def grant(request: Request, authorization: Annotated[str | None, Header()] = None) -> Grant:
    """The caller's grant, from its ``Authorization: Bearer`` token (verified once, then
    found in the app's :class:`~agenttrail.server.auth.TokenCache` until it expires).

    Raises:
        Unauthorized: no token, or one that is forged or expired (HTTP 401).
    """
    tokens: TokenCache = request.app.state.tokens
    return tokens.check(bearer_token(authorization))


async def _store(request: Request) -> LogStore:
    store: LogStore = request.app.state.store
    return store


async def _hub(request: Request) -> Hub:
    hub: Hub = request.app.state.hub
    return hub


async def _indexes(request: Request) -> IndexCache:
    indexes: IndexCache = request.app.state.transcript_indexes
    return indexes


async def _tools(request: Request) -> ToolRegistry:
    tools: ToolRegistry = request.app.state.tools
    return tools


async def _committer(request: Request) -> Committer:
    committer: Committer = request.app.state.committer
    return committer


Auth = Annotated[Grant, Depends(grant)]
"""The caller's grant, from its ``Authorization: Bearer`` token (401 without a valid one)."""

Store = Annotated[LogStore, Depends(_store)]
"""The log the app was handed; shared by all requests (its calls run in worker threads)."""

HubDep = Annotated[Hub, Depends(_hub)]
"""The live hub: publishes appends and partials to the session's subscribers."""

Indexes = Annotated[IndexCache, Depends(_indexes)]
"""The sessions' transcript indexes (the viewer's): each session's pairing, kept up to date."""

Tools = Annotated[ToolRegistry, Depends(_tools)]
"""The user's tools (the symmetric half)."""

Commits = Annotated[Committer, Depends(_committer)]
"""Appends: each request's batch joins the next group commit
(:mod:`agenttrail.server.committer`)."""


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a worker thread: store calls block, the event loop must not."""
    return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
