"""``/v1/sessions``: create a session, list the sessions a token may read, get one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from agenttrail.errors import Forbidden
from agenttrail.model import NewSession, Session
from agenttrail.server._deps import Auth, Store, run

__all__ = ["NewSessionBody", "router"]

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


@router.get("/v1/sessions")
async def list_sessions(auth: Auth, store: Store) -> list[dict[str, Any]]:
    """Every session this token may read."""
    auth.require("read")
    sessions = await run(store.sessions)
    return [s.record() for s in sessions if auth.session in ("*", s.id)]


@router.get("/v1/sessions/{session_id}")
async def get_session(session_id: str, auth: Auth, store: Store) -> dict[str, Any]:
    """One session."""
    auth.require("read", session_id)
    session: Session = await run(store.get_session, session_id)
    return session.record()
