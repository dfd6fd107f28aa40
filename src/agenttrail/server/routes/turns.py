"""``/v1/sessions/{id}/turns``: an agent turn in flight holds the session's turn lock, a lease
with an expiry, so that the user's own tool calls wait (docs/specs.md, The symmetric half)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from agenttrail.server._deps import Auth, Store, run

__all__ = ["TURN_TTL_S", "TurnBody", "router"]

TURN_TTL_S = 300.0
"""Default lease of an agent turn taken over HTTP (seconds); renew by posting again."""

router = APIRouter()


class TurnBody(BaseModel):
    """``POST …/turns``: take or renew the turn lock."""

    model_config = ConfigDict(extra="forbid")
    turn_id: str | None = None
    holder: str = "agent"
    ttl_s: float = Field(default=TURN_TTL_S, gt=0, le=3600)


@router.post("/v1/sessions/{session_id}/turns", status_code=201)
async def take_turn(session_id: str, body: TurnBody, auth: Auth, store: Store) -> dict[str, Any]:
    """Mark an agent turn in flight (or renew it): a lease with an expiry."""
    auth.require("append", session_id)
    turn_id = body.turn_id or f"turn_{uuid.uuid4().hex[:16]}"
    lease = await run(
        store.acquire_turn, session_id, turn_id=turn_id, holder=body.holder, ttl_s=body.ttl_s
    )
    return {"turn_id": lease.turn_id, "holder": lease.holder, "expires_at": lease.expires_at}


@router.delete("/v1/sessions/{session_id}/turns/{turn_id}", status_code=204)
async def end_turn(session_id: str, turn_id: str, auth: Auth, store: Store) -> Response:
    """End an agent turn: the turn lock is free again."""
    auth.require("append", session_id)
    await run(store.release_turn, session_id, turn_id)
    return Response(status_code=204)
