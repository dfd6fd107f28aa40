"""The HTTP API: a thin ASGI layer over the library calls the CLI uses (FastAPI on uvicorn).

Every route needs a bearer token (:mod:`agenttrail.server.auth`). Errors are RFC 9457
problem details (``application/problem+json``, :mod:`agenttrail.server.problems`): 401/403
for tokens, 404 for an unknown session, 409 when an agent turn holds the turn lock, 413
naming the payload limit, 422 naming the field. The app is handed its store (the server is as
thin as the CLI); the routes, one module per resource, are in :mod:`agenttrail.server.routes`
and the viewer's in :mod:`agenttrail.server.viewer`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from agenttrail.log.store import LogStore
from agenttrail.server._deps import grant
from agenttrail.server.auth import TokenCache
from agenttrail.server.committer import Committer
from agenttrail.server.fastpath import AppendFastPath
from agenttrail.server.guard import DEFAULT_MAX_BODY_BYTES, Guard, normal_origin
from agenttrail.server.headers import SecurityHeaders
from agenttrail.server.live import Hub
from agenttrail.server.problems import add_problem_handlers
from agenttrail.server.routes import ROUTERS
from agenttrail.server.tools import ToolRegistry
from agenttrail.server.viewer import add_viewer

__all__ = ["create_app"]


def create_app(
    store: LogStore,
    *,
    secret: bytes,
    tools: ToolRegistry | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allowed_origins: Collection[str] = (),
) -> FastAPI:
    """The ASGI app over ``store``.

    Args:
        store: the log; shared by all requests (its calls run in worker threads; appends
            of concurrent requests share a commit: :mod:`agenttrail.server.committer`).
        secret: the key tokens are signed with (:func:`agenttrail.server.auth.load_secret`).
        tools: the user's tools (the symmetric half); none when ``None``.
        max_body_bytes: the largest request body read (bytes); a larger one is 413
            (:mod:`agenttrail.server.guard`, which also checks the token before the body).
        allowed_origins: browser origins (``https://app.example``) that may call the API
            (CORS) and open the live feed besides the server's own; ``*`` for any. None by
            default: same-origin only.

    Returns:
        The app: the REST API and the live feed under ``/v1``, the viewer at ``/``.
    """
    hub = Hub(store)
    tokens = TokenCache(secret)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Other processes' appends (other replicas): LISTEN on PostgreSQL, polling on SQLite.
        watcher = asyncio.create_task(hub.watch())
        try:
            yield
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    app = FastAPI(
        title="agenttrail",
        summary="A flight recorder for AI agents: sessions, events, live feed, evidence.",
        lifespan=lifespan,
    )
    # What the routes are handed (agenttrail.server._deps).
    app.state.store = store
    app.state.hub = hub
    app.state.secret = secret
    app.state.tokens = tokens  # verified once, then remembered until they expire
    committer = app.state.committer = Committer(store)  # concurrent appends: one commit
    app.state.max_body_bytes = max_body_bytes  # the OTLP receiver's decompressed limit
    app.state.tools = tools or ToolRegistry()
    add_problem_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    add_viewer(app, store, grant=grant)  # the web viewer: its page at / and its routes
    # Outermost last: the security headers go on every answer, the CORS preflight is
    # answered before the guard (a preflight carries no token), then the guard.
    app.add_middleware(
        Guard, tokens=tokens, max_body_bytes=max_body_bytes, allowed_origins=allowed_origins
    )
    app.add_middleware(
        CORSMiddleware,
        allow_origins=[normal_origin(o) for o in allowed_origins],
        allow_methods=CORS_METHODS,
        allow_headers=CORS_HEADERS,
    )
    app.add_middleware(SecurityHeaders)
    # In front of them all, the fast path of ingest: POST …/events answered as the stack
    # would, at a fraction of its cost (agenttrail.server.fastpath).
    app.add_middleware(
        AppendFastPath, tokens=tokens, committer=committer, hub=hub, max_body_bytes=max_body_bytes
    )
    return app


CORS_METHODS = ("GET", "POST", "DELETE")
"""The methods of the API's routes, which an allowed origin may use."""

CORS_HEADERS = ("Authorization", "Content-Type")
"""The request headers an allowed origin may send: the bearer token and the JSON type."""
