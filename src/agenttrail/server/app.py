"""The HTTP API: a thin ASGI layer over the library calls the CLI uses (FastAPI on uvicorn).

Every route needs a bearer token (:mod:`agenttrail.server.auth`). Errors are RFC 9457
problem details (``application/problem+json``): 401/403 for tokens, 404 for an unknown
session, 409 when an agent turn holds the turn lock, 413 naming the payload limit, 422 naming
the field. The app is handed its store (the server is as thin as the CLI).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import Depends, FastAPI, Header, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from agenttrail.errors import (
    AgentTrailError,
    Forbidden,
    InputError,
    PayloadTooLarge,
    SessionExists,
    SessionNotFound,
    TurnInFlight,
    Unauthorized,
)
from agenttrail.evidence.audit import SessionAudit, audit
from agenttrail.evidence.traces import trace_record
from agenttrail.formats.fountain import fountain_from_events
from agenttrail.log.store import LogStore
from agenttrail.model import NewEvent, NewSession, Session, events
from agenttrail.replay import replay
from agenttrail.server.auth import Grant, check_token
from agenttrail.server.live import RESUME_CODE, Hub, Subscription, event_message
from agenttrail.server.tools import ToolRegistry
from agenttrail.server.viewer import add_viewer

__all__ = ["create_app"]

PAGE_LIMIT = 1000
"""Most events one ``GET …/events`` returns; follow ``next_after_seq`` for more."""

TURN_TTL_S = 300.0
"""Default lease of an agent turn taken over HTTP (seconds); renew by posting again."""


class NewSessionBody(BaseModel):
    """``POST /v1/sessions``."""

    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    title: str | None = None
    agent: str | None = None
    user: str | None = None
    workspace: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class EventBody(BaseModel):
    """One event to append: its payload, an optional idempotency key and time."""

    model_config = ConfigDict(extra="forbid")
    payload: dict[str, Any]
    key: str | None = None
    created_at: str | None = None


class AppendBody(BaseModel):
    """``POST …/events``: one event, or a batch under ``events`` (one transaction)."""

    model_config = ConfigDict(extra="forbid")
    events: list[EventBody] | None = None
    payload: dict[str, Any] | None = None
    key: str | None = None
    created_at: str | None = None


class TurnBody(BaseModel):
    """``POST …/turns``: take or renew the turn lock."""

    model_config = ConfigDict(extra="forbid")
    turn_id: str | None = None
    holder: str = "agent"
    ttl_s: float = Field(default=TURN_TTL_S, gt=0, le=3600)


class PartialBody(BaseModel):
    """``POST …/partials``: an ephemeral streaming patch, never stored."""

    model_config = ConfigDict(extra="forbid")
    textDelta: str | None = None
    done: bool = False
    usage: dict[str, Any] | None = None
    activity: str | None = None


def _problem(status: int, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


def _grant(request: Request, authorization: Annotated[str | None, Header()] = None) -> Grant:
    token = authorization.removeprefix("Bearer ").strip() if authorization else None
    return check_token(request.app.state.secret, token)


Auth = Annotated[Grant, Depends(_grant)]
"""The caller's grant, from its ``Authorization: Bearer`` token (401 without a valid one)."""


def create_app(store: LogStore, *, secret: bytes, tools: ToolRegistry | None = None) -> FastAPI:
    """The ASGI app over ``store``.

    Args:
        store: the log; shared by all requests (its calls run in worker threads).
        secret: the key tokens are signed with (:func:`agenttrail.server.auth.load_secret`).
        tools: the user's tools (the symmetric half); none when ``None``.
    """
    hub = Hub(store)
    registry = tools or ToolRegistry()

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
    app.state.hub = hub
    app.state.secret = secret

    @app.exception_handler(AgentTrailError)
    async def agenttrail_error(request: Request, exc: AgentTrailError) -> JSONResponse:
        if isinstance(exc, Unauthorized):
            return _problem(401, "Unauthorized", str(exc))
        if isinstance(exc, Forbidden):
            return _problem(403, "Forbidden", str(exc))
        if isinstance(exc, SessionNotFound):
            return _problem(404, "Not Found", str(exc))
        if isinstance(exc, TurnInFlight):
            return _problem(
                409, "Conflict", str(exc), turn_id=exc.turn_id, expires_at=exc.expires_at
            )
        if isinstance(exc, SessionExists):
            return _problem(409, "Conflict", str(exc))
        if isinstance(exc, PayloadTooLarge):
            return _problem(413, "Content Too Large", str(exc), limit=exc.limit)
        if isinstance(exc, InputError):
            return _problem(422, "Unprocessable Content", str(exc))
        return _problem(500, "Internal Server Error", str(exc))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        return _problem(
            422, "Unprocessable Content", f"field {where}: {first.get('msg', 'invalid')}"
        )

    async def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    @app.post("/v1/sessions", status_code=201)
    async def create_session(body: NewSessionBody, auth: Auth) -> dict[str, Any]:
        """Create a session."""
        auth.require("append", body.id)
        if auth.session != "*":
            raise Forbidden("a token scoped to one session cannot create sessions")
        new = NewSession(
            body.id, body.title, body.agent, body.user, body.workspace, None, body.metadata
        )
        session: Session = await run(store.create_session, new)
        return session.record()

    @app.get("/v1/sessions")
    async def list_sessions(auth: Auth) -> list[dict[str, Any]]:
        """Every session this token may read."""
        auth.require("read")
        sessions = await run(store.sessions)
        return [s.record() for s in sessions if auth.session in ("*", s.id)]

    @app.get("/v1/sessions/{session_id}")
    async def get_session(session_id: str, auth: Auth) -> dict[str, Any]:
        """One session."""
        auth.require("read", session_id)
        session: Session = await run(store.get_session, session_id)
        return session.record()

    @app.post("/v1/sessions/{session_id}/events", status_code=201)
    async def append(session_id: str, body: AppendBody, auth: Auth) -> dict[str, Any]:
        """Append one event or a batch (one transaction); returns each seq."""
        auth.require("append", session_id)
        if body.events is not None:
            batch = [NewEvent(e.payload, e.created_at, e.key) for e in body.events]
        elif body.payload is not None:
            batch = [NewEvent(body.payload, body.created_at, body.key)]
        else:
            raise InputError("field payload: give a payload or a list of events")
        results = await run(store.append_batch, session_id, batch)
        await hub.sync(session_id)
        return {
            "seqs": [r.seq for r in results],
            "duplicates": [r.duplicate for r in results],
            "head": results[-1].hash.hex() if results else None,
        }

    @app.get("/v1/sessions/{session_id}/events")
    async def read_events(
        session_id: str,
        auth: Auth,
        after_seq: Annotated[int, Query(alias="afterSeq", ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=PAGE_LIMIT)] = PAGE_LIMIT,
    ) -> dict[str, Any]:
        """Events after ``afterSeq`` in seq order, at most ``limit``; page with
        ``next_after_seq``."""
        auth.require("read", session_id)
        await run(store.get_session, session_id)
        page = await run(lambda: list(store.read(session_id, after_seq=after_seq, limit=limit)))
        return {
            "events": [event_message(e) for e in page],
            "next_after_seq": page[-1].seq if len(page) == limit else None,
        }

    @app.post("/v1/sessions/{session_id}/partials", status_code=202)
    async def partial(session_id: str, body: PartialBody, auth: Auth) -> dict[str, Any]:
        """Send a streaming patch to the live subscribers; it is never stored."""
        auth.require("append", session_id)
        patch = body.model_dump(exclude_none=True)
        # Appends made straight into the database first: a partial never overtakes the
        # durable events before it.
        await hub.sync(session_id)
        return {"delivered": hub.publish_partial(session_id, patch)}

    @app.get("/v1/sessions/{session_id}/traces")
    async def list_traces(session_id: str, auth: Auth) -> list[dict[str, Any]]:
        """The session's trace rows, without their envelopes (those need ``audit``)."""
        auth.require("read", session_id)
        rows = await run(store.traces, (await run(store.get_session, session_id)).id)
        return [trace_record(r, envelope=False) for r in rows]

    @app.get("/v1/traces/{trace_id}")
    async def get_trace(trace_id: int, auth: Auth) -> dict[str, Any]:
        """One trace row with its envelope verbatim (needs ``audit``)."""
        auth.require("audit")
        row = await run(store.trace, trace_id)
        auth.require("audit", row.session_id)
        return trace_record(row, envelope=True)

    @app.get("/v1/sessions/{session_id}/verify")
    async def verify_session(session_id: str, auth: Auth) -> dict[str, Any]:
        """The chain and trace-row check of one session."""
        auth.require("read", session_id)
        verdicts: list[SessionAudit] = await run(audit, store, [session_id])
        return verdicts[0].record()

    @app.get("/v1/sessions/{session_id}/fountain", response_class=PlainTextResponse)
    async def fountain(session_id: str, auth: Auth) -> str:
        """The session as a Fountain screenplay (Harvey format v1.2)."""
        auth.require("read", session_id)
        session = await run(store.get_session, session_id)
        items = await run(lambda: list(store.read(session_id)))
        return fountain_from_events(session, items)

    @app.get("/v1/sessions/{session_id}/replay")
    async def replay_session(
        session_id: str,
        auth: Auth,
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

    @app.post("/v1/sessions/{session_id}/turns", status_code=201)
    async def take_turn(session_id: str, body: TurnBody, auth: Auth) -> dict[str, Any]:
        """Mark an agent turn in flight (or renew it): a lease with an expiry."""
        auth.require("append", session_id)
        turn_id = body.turn_id or f"turn_{uuid.uuid4().hex[:16]}"
        lease = await run(
            store.acquire_turn, session_id, turn_id=turn_id, holder=body.holder, ttl_s=body.ttl_s
        )
        return {"turn_id": lease.turn_id, "holder": lease.holder, "expires_at": lease.expires_at}

    @app.delete("/v1/sessions/{session_id}/turns/{turn_id}", status_code=204)
    async def end_turn(session_id: str, turn_id: str, auth: Auth) -> Response:
        """End an agent turn: the turn lock is free again."""
        auth.require("append", session_id)
        await run(store.release_turn, session_id, turn_id)
        return Response(status_code=204)

    @app.get("/v1/sessions/{session_id}/tools")
    async def list_tools(session_id: str, auth: Auth) -> list[dict[str, Any]]:
        """The tools the user can run, with the JSON Schema of their input."""
        auth.require("read", session_id)
        await run(store.get_session, session_id)
        return [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in registry
        ]

    @app.post("/v1/sessions/{session_id}/tools/{name}/invoke", status_code=201)
    async def invoke(
        session_id: str, name: str, body: dict[str, Any], auth: Auth
    ) -> dict[str, Any]:
        """Run one of the user's tools through the same dispatcher the agent's calls use and
        log the call and its result as actor ``user`` events. 409 while an agent turn is in
        flight: nothing is run and nothing is appended."""
        auth.require("invoke", session_id)
        await run(store.get_session, session_id)
        tool = registry.get(name)
        tool.validate(body)
        lease = await run(store.current_turn, session_id)
        if lease is not None:
            raise TurnInFlight(session_id, lease.turn_id, lease.expires_at)
        call_id = f"user_{uuid.uuid4().hex[:16]}"
        try:
            output: Any = await run(tool.dispatch, dict(body))
            result = events.tool_result(call_id, name, output=output, actor="user")
        except InputError as e:
            result = events.tool_result(call_id, name, error=str(e), actor="user")
        batch = [NewEvent(events.tool_call(call_id, name, body, actor="user")), NewEvent(result)]
        appended = await run(store.append_batch, session_id, batch, unless_turn=True)
        await hub.sync(session_id)
        return {
            "call_seq": appended[0].seq,
            "result_seq": appended[1].seq,
            "output": result.get("output"),
            "error": result.get("error"),
        }

    @app.websocket("/v1/sessions/{session_id}/live")
    async def live(websocket: WebSocket, session_id: str) -> None:
        """Every durable event after ``afterSeq``, then each new append and partial."""
        await websocket.accept()
        token = websocket.query_params.get("token")
        header = websocket.headers.get("authorization")
        if not token and header:
            token = header.removeprefix("Bearer ").strip()
        try:
            check_token(secret, token).require("read", session_id)
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

    add_viewer(app, store, grant=_grant)  # the web viewer: its page at / and its routes
    return app


async def _send_feed(
    websocket: WebSocket, hub: Hub, sub: Subscription, after_seq: int, scope: anyio.CancelScope
) -> None:
    try:
        async for message in hub.feed(sub, after_seq):
            await websocket.send_json(message)
        if sub.overflowed.is_set():
            await websocket.close(code=RESUME_CODE, reason="behind: resume from your last seq")
    except (WebSocketDisconnect, RuntimeError):  # the client went away mid-send
        pass
    scope.cancel()
