"""``/v1/sessions/{id}/events`` and ``…/partials``: append events, read them a page at a time,
send an ephemeral streaming patch to the live subscribers."""

from __future__ import annotations

import json
from typing import Annotated, Any, cast

import anyio
from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, ValidationError

from agenttrail.errors import InputError
from agenttrail.model import NewEvent
from agenttrail.server._deps import Auth, HubDep, Indexes, Store, run
from agenttrail.server.auth import Grant, TokenCache, bearer_token
from agenttrail.server.committer import Committer
from agenttrail.server.live import Hub, event_message
from agenttrail.views.pairing import anomaly_names
from agenttrail.views.transcript import TranscriptIndex

__all__ = [
    "APPEND_PATH",
    "PAGE_LIMIT",
    "AppendBody",
    "EventBody",
    "PartialBody",
    "appended",
    "batch_of",
    "router",
]

PAGE_LIMIT = 1000
"""Most events one ``GET …/events`` returns; follow ``next_after_seq`` for more."""

APPEND_PATH = "/v1/sessions/{session_id}/events"
"""The path of the append route (and of the read route)."""

router = APIRouter()


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


class PartialBody(BaseModel):
    """``POST …/partials``: an ephemeral streaming patch, never stored."""

    model_config = ConfigDict(extra="forbid")
    textDelta: str | None = None
    done: bool = False
    usage: dict[str, Any] | None = None
    activity: str | None = None


@router.post(
    APPEND_PATH,
    status_code=201,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": AppendBody.model_json_schema()}},
        }
    },
)
async def append(session_id: str, request: Request) -> Response:
    """Append one event or a batch (one transaction, shared with the appends of concurrent
    requests: group commit); returns each seq once it is durable.

    The hot path of ingest, so it takes the request itself rather than FastAPI's parameters
    (each FastAPI dependency and body parameter costs more than the append's SQL); most
    requests do not even come here but take the fast path in front of the app
    (:mod:`agenttrail.server.fastpath`), which does the same in :func:`appended`."""
    state = request.app.state
    grant = cast(TokenCache, state.tokens).check(bearer_token(request.headers.get("authorization")))
    answer = await appended(state.committer, state.hub, grant, session_id, await request.body())
    return Response(answer, status_code=201, media_type="application/json")


async def appended(
    committer: Committer, hub: Hub, grant: Grant, session_id: str, body: bytes
) -> bytes:
    """The work of ``POST …/events``: the body checked, its events appended with the next
    group commit, the live subscribers told; returns the JSON answer,
    ``{"seqs": [...], "duplicates": [...], "head": hex | null}``, once it is durable.

    Raises:
        Forbidden: the grant lacks ``append`` on the session (403).
        RequestValidationError: the body is not JSON of :class:`AppendBody`'s shape (422, the
            same text FastAPI's body parameter gives).
        InputError: neither ``payload`` nor ``events`` (422).
        AgentTrailError: what the store refuses this batch with (``SessionNotFound`` …).
    """
    grant.require("append", session_id)
    results = await committer.append(session_id, batch_of(body))
    await hub.sync(session_id)
    answer = {
        "seqs": [r.seq for r in results],
        "duplicates": [r.duplicate for r in results],
        "head": results[-1].hash.hex() if results else None,
    }
    return json.dumps(answer).encode()


def batch_of(body: bytes) -> list[NewEvent]:
    """The events of an append's body (one event, or a batch under ``events``).

    Parsed by pydantic's JSON parser, which is about twice as fast as ``json.loads`` and
    gives the same values for every body it accepts; a body it refuses is parsed again with
    ``json.loads``, which accepts a few it does not (a byte order mark, lone surrogates) and
    words the errors of the others as FastAPI does.

    Raises:
        RequestValidationError: not JSON, or not of :class:`AppendBody`'s shape.
        InputError: neither ``payload`` nor ``events``, or both (one event's fields beside a
            batch).
    """
    try:
        parsed = AppendBody.model_validate_json(body)
    except ValidationError:
        try:
            parsed = AppendBody.model_validate(json.loads(body))
        except ValueError as e:  # not JSON (json.JSONDecodeError), or not of the shape
            errors = e.errors() if isinstance(e, ValidationError) else [_not_json(e)]
            raise RequestValidationError(errors) from None
    if parsed.events is not None:
        single = [n for n in ("payload", "created_at", "key") if getattr(parsed, n) is not None]
        if single:  # one event's fields beside a batch: which was meant is not ours to guess
            raise InputError(
                f"field {single[0]}: give one event (payload, created_at, key) or a list of "
                "events, not both"
            )
        return [NewEvent(e.payload, e.created_at, e.key) for e in parsed.events]
    if parsed.payload is not None:
        return [NewEvent(parsed.payload, parsed.created_at, parsed.key)]
    raise InputError("field payload: give a payload or a list of events")


def _not_json(e: ValueError) -> dict[str, Any]:
    """The validation error of a body that is not JSON, as FastAPI words it."""
    return {"type": "json_invalid", "loc": ("body",), "msg": f"JSON decode error: {e}"}


@router.get(APPEND_PATH)
async def read_events(
    session_id: str,
    auth: Auth,
    store: Store,
    indexes: Indexes,
    after_seq: Annotated[int, Query(alias="afterSeq", ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=PAGE_LIMIT)] = PAGE_LIMIT,
) -> dict[str, Any]:
    """Events after ``afterSeq`` in seq order, at most ``limit``, each with ``anomalies``
    (why a tool call or result is not paired, over the session up to the page's end); page
    with ``next_after_seq``.

    The page is read up to the head of the session's transcript index (the viewer's, kept up
    to date), so that every event on it is paired against the same events."""
    auth.require("read", session_id)

    def page_of(index: TranscriptIndex) -> list[dict[str, Any]]:
        span = min(limit, index.head - after_seq)
        page = list(store.read(session_id, after_seq=after_seq, limit=span)) if span > 0 else []
        anomalies = index.pairing.anomalies
        return [event_message(e, anomaly_names(anomalies, e.seq)) for e in page]

    events = await run(indexes.use, store, session_id, page_of)
    return {
        "events": events,
        "next_after_seq": events[-1]["seq"] if len(events) == limit else None,
    }


@router.post("/v1/sessions/{session_id}/partials", status_code=202)
async def partial(session_id: str, body: PartialBody, auth: Auth, hub: HubDep) -> dict[str, Any]:
    """Send a streaming patch to the live subscribers; it is never stored."""
    auth.require("append", session_id)
    # Appends made straight into the database first: a partial never overtakes the
    # durable events before it, and one of them ends the stream it follows.
    await hub.sync(session_id)
    # Redacted before any subscriber sees it (server/partials.py), off the event loop: the
    # first secret reads the log's key.
    patch = await anyio.to_thread.run_sync(
        hub.partials.redact, session_id, body.model_dump(exclude_none=True)
    )
    return {"delivered": hub.publish_partial(session_id, patch)}
