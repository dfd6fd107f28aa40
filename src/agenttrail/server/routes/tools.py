"""``/v1/sessions/{id}/tools``: the user's own tools, listed with their input schemas and run
through the same dispatcher as the agent's calls (docs/specs.md, The symmetric half)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter

from agenttrail.errors import InputError, TurnInFlight
from agenttrail.model import NewEvent, events
from agenttrail.server._deps import Auth, HubDep, Store, Tools, run

__all__ = ["router"]

router = APIRouter()


@router.get("/v1/sessions/{session_id}/tools")
async def list_tools(
    session_id: str, auth: Auth, store: Store, registry: Tools
) -> list[dict[str, Any]]:
    """The tools the user can run, with the JSON Schema of their input."""
    auth.require("read", session_id)
    await run(store.get_session, session_id)
    return [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in registry
    ]


@router.post("/v1/sessions/{session_id}/tools/{name}/invoke", status_code=201)
async def invoke(
    session_id: str,
    name: str,
    body: dict[str, Any],
    auth: Auth,
    store: Store,
    hub: HubDep,
    registry: Tools,
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
