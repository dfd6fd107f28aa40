"""``/v1/sessions/{id}/traces``, ``/v1/traces/{id}`` and ``…/verify``: the evidence kept
beside a session's log and the one audit verdict on it (docs/evidence.md)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agenttrail.errors import InputError
from agenttrail.evidence.audit import SessionAudit, audit
from agenttrail.evidence.traces import trace_record
from agenttrail.server._deps import Auth, Store, run

__all__ = ["router"]

router = APIRouter()


@router.get("/v1/sessions/{session_id}/traces")
async def list_traces(session_id: str, auth: Auth, store: Store) -> list[dict[str, Any]]:
    """The session's trace rows, without their envelopes (those need ``audit``)."""
    auth.require("read", session_id)
    rows = await run(store.traces, (await run(store.get_session, session_id)).id)
    return [trace_record(r, envelope=False) for r in rows]


@router.get("/v1/traces/{trace_id}")
async def get_trace(trace_id: int, auth: Auth, store: Store) -> dict[str, Any]:
    """One trace row with its envelope verbatim (needs ``audit``).

    A trace of a session outside the token's scope is answered as one that does not exist
    (422, ``no trace row N``), so a scoped token cannot learn which trace ids are taken."""
    auth.require("audit")
    row = await run(store.trace, trace_id)  # InputError "no trace row N" when there is none
    if not auth.covers(row.session_id):
        raise InputError(f"no trace row {trace_id}")  # the store's words for a missing one
    return trace_record(row, envelope=True)


@router.get("/v1/sessions/{session_id}/verify")
async def verify_session(session_id: str, auth: Auth, store: Store) -> dict[str, Any]:
    """The chain and trace-row check of one session."""
    auth.require("read", session_id)
    verdicts: list[SessionAudit] = await run(audit, store, [session_id])
    return verdicts[0].record()
