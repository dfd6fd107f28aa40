"""``/v1/sessions/{id}/live``: the WebSocket feed, every durable event after ``afterSeq`` and
then each new append and partial (how no event is lost: :mod:`agenttrail.server.live`).

A WebSocket has no problem details: a refused subscription is closed with a code that
mirrors the HTTP status (4401, 4403, 4404, 4422; docs/server.md).
"""

from __future__ import annotations

import contextlib

import anyio
import anyio.lowlevel
from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from agenttrail.errors import Forbidden, SessionNotFound, Unauthorized
from agenttrail.log.store import LogStore
from agenttrail.server._deps import run
from agenttrail.server.auth import TokenCache, bearer_token
from agenttrail.server.live import RESUME_CODE, Hub, Subscription

__all__ = ["router"]

router = APIRouter()


@router.websocket("/v1/sessions/{session_id}/live")
async def live(websocket: WebSocket, session_id: str) -> None:
    """Every durable event after ``afterSeq``, then each new append and partial."""
    state = websocket.app.state
    store: LogStore = state.store
    hub: Hub = state.hub
    await websocket.accept()
    token = websocket.query_params.get("token") or bearer_token(
        websocket.headers.get("authorization")
    )
    try:
        tokens: TokenCache = state.tokens
        tokens.check(token).require("read", session_id)
        after_seq = int(websocket.query_params.get("afterSeq", "0"))
        await run(store.get_session, session_id)
    except Unauthorized as e:
        await websocket.close(code=4401, reason=str(e)[:120])
        return
    except Forbidden as e:
        await websocket.close(code=4403, reason=str(e)[:120])
        return
    except SessionNotFound as e:
        await websocket.close(code=4404, reason=str(e)[:120])
        return
    except ValueError:
        await websocket.close(code=4422, reason="afterSeq must be an integer")
        return
    sub = await hub.subscribe(session_id)
    try:
        async with anyio.create_task_group() as group:
            # The client sends nothing; its receive ends when it goes away, and then the
            # sender, which may be waiting for the next append, is cancelled with it.
            group.start_soon(_send_feed, websocket, hub, sub, after_seq, group.cancel_scope)
            with contextlib.suppress(WebSocketDisconnect):
                while True:
                    message = await websocket.receive()
                    if message["type"] == "websocket.disconnect":
                        break
            group.cancel_scope.cancel()
    finally:
        hub.unsubscribe(sub)


async def _send_feed(
    websocket: WebSocket, hub: Hub, sub: Subscription, after_seq: int, scope: anyio.CancelScope
) -> None:
    try:
        async for message in hub.feed(sub, after_seq):
            await websocket.send_text(message.text)
            # A send that fits the socket's buffer does not wait, so a page of the backlog
            # would go out in one stretch: yield after each message, so that the event loop
            # sees a client that vanished (its connection lost) before the next send, and so
            # that other clients are served meanwhile.
            await anyio.lowlevel.checkpoint()
        if sub.overflowed.is_set():
            await websocket.close(code=RESUME_CODE, reason="behind: resume from your last seq")
    except (WebSocketDisconnect, RuntimeError, OSError):  # the client went away mid-send
        pass
    scope.cancel()
