"""``/v1/sessions/{id}/events`` and ``…/partials``: append events, read them a page at a time,
send an ephemeral streaming patch to the live subscribers."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict

from agenttrail.errors import InputError
from agenttrail.model import NewEvent
from agenttrail.server._deps import Auth, HubDep, Indexes, Store, run
from agenttrail.server.live import event_message
from agenttrail.views.pairing import anomaly_names
from agenttrail.views.transcript import TranscriptIndex

__all__ = ["PAGE_LIMIT", "AppendBody", "EventBody", "PartialBody", "router"]

PAGE_LIMIT = 1000
"""Most events one ``GET …/events`` returns; follow ``next_after_seq`` for more."""

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


@router.post("/v1/sessions/{session_id}/events", status_code=201)
async def append(
    session_id: str, body: AppendBody, auth: Auth, store: Store, hub: HubDep
) -> dict[str, Any]:
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


@router.get("/v1/sessions/{session_id}/events")
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
    # Redacted before any subscriber sees it (server/partials.py), off the event loop: the
    # first secret reads the log's key.
    patch = await anyio.to_thread.run_sync(
        hub.partials.redact, session_id, body.model_dump(exclude_none=True)
    )
    # Appends made straight into the database first: a partial never overtakes the
    # durable events before it.
    await hub.sync(session_id)
    return {"delivered": hub.publish_partial(session_id, patch)}
