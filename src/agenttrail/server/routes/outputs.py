"""``/v1/sessions/{id}/fountain`` and ``…/replay``: what a session's log is turned into, a
Fountain screenplay and the model's message list (docs/fountain-format.md, docs/replay.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse

from agenttrail.formats.fountain import fountain_from_events
from agenttrail.replay import replay
from agenttrail.server._deps import Auth, Store, run

__all__ = ["router"]

router = APIRouter()


@router.get("/v1/sessions/{session_id}/fountain", response_class=PlainTextResponse)
async def fountain(session_id: str, auth: Auth, store: Store) -> str:
    """The session as a Fountain screenplay (Harvey format v1.2)."""
    auth.require("read", session_id)
    session = await run(store.get_session, session_id)
    items = await run(lambda: list(store.read(session_id)))
    return fountain_from_events(session, items)


@router.get("/v1/sessions/{session_id}/replay")
async def replay_session(
    session_id: str,
    auth: Auth,
    store: Store,
    format: Annotated[str, Query()] = "openai",
    upto: Annotated[int | None, Query(ge=1)] = None,
) -> dict[str, Any]:
    """The model's message list rebuilt from the log, with what was left out or filled in."""
    auth.require("read", session_id)
    await run(store.get_session, session_id)
    items = await run(lambda: list(store.read(session_id)))
    result = replay(items, format, upto_seq=upto)
    return {
        **result.body(),
        "tools": list(result.tools),
        "notes": [str(n) for n in result.notes],
    }
