"""``/v1/sessions``: create a session, list the sessions a token may read, get one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from agenttrail.errors import Forbidden
from agenttrail.model import NewSession, Session
from agenttrail.server._deps import Auth, Store, run
from agenttrail.views.session_list import SessionFilter
from agenttrail.views.session_list import list_sessions as page_of

__all__ = ["PAGE_DEFAULT", "PAGE_MAX", "NewSessionBody", "router"]

router = APIRouter()


class NewSessionBody(BaseModel):
    """``POST /v1/sessions``."""

    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    title: str | None = None
    agent: str | None = None
    user: str | None = None
    workspace: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


@router.post("/v1/sessions", status_code=201)
async def create_session(body: NewSessionBody, auth: Auth, store: Store) -> dict[str, Any]:
    """Create a session."""
    auth.require("append", body.id)
    if auth.session != "*":
        raise Forbidden("a token scoped to one session cannot create sessions")
    new = NewSession(
        body.id, body.title, body.agent, body.user, body.workspace, None, body.metadata
    )
    session: Session = await run(store.create_session, new)
    return session.record()


PAGE_DEFAULT = 100
"""Sessions per page when ``limit`` is not given."""

PAGE_MAX = 1000
"""The largest ``limit`` a request may ask for."""


@router.get("/v1/sessions")
async def list_sessions(
    request: Request,
    response: Response,
    auth: Auth,
    store: Store,
    agent: str | None = None,
    user: str | None = None,
    since: str | None = None,
    until: str | None = None,
    model: str | None = None,
    errors: bool = False,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = PAGE_DEFAULT,
    after: str | None = None,
) -> list[dict[str, Any]]:
    """The sessions this token may read, in the order they were created, filtered and paged
    (docs/server.md, Sessions): a page of ``limit``, and a ``Link: <…>; rel="next"`` header
    (RFC 8288) to the next page while there is one."""
    auth.require("read")
    where = SessionFilter(agent, user, since, until, model, errors, limit, after)
    visible = [s for s in await run(store.sessions) if auth.session in ("*", s.id)]
    page = await run(lambda: page_of(store, visible, where))
    if page.next_after is not None:
        following = request.url.include_query_params(after=page.next_after, limit=limit)
        response.headers["Link"] = f'<{following.path}?{following.query}>; rel="next"'
    return [s.record() for s in page.sessions]


@router.get("/v1/sessions/{session_id}")
async def get_session(session_id: str, auth: Auth, store: Store) -> dict[str, Any]:
    """One session."""
    auth.require("read", session_id)
    session: Session = await run(store.get_session, session_id)
    return session.record()
