"""``/v1/sessions/{id}/tools``: the user's own tools, listed with their input schemas and run
through the same dispatcher as the agent's calls (docs/specs.md, The symmetric half)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter

from agenttrail.errors import InputError, ToolFailed
from agenttrail.model import NewEvent, events
from agenttrail.server._deps import Auth, Commits, HubDep, Store, Tools, run

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
    committer: Commits,
    hub: HubDep,
    registry: Tools,
) -> dict[str, Any]:
    """Run one of the user's tools through the same dispatcher the agent's calls use and
    log the call and its result as actor ``user`` events (docs/server.md).

    The call is logged before the tool runs, in a transaction that refuses it while an agent
    turn is in flight (409) or when it is above the log's payload limit (413): then nothing
    runs and nothing is logged. Once the call is logged, its result is logged whatever the
    tool does, and a failure (an error the tool gave or raised, an output the log cannot
    hold) is answered with 422 carrying ``call_seq``, ``result_seq`` and ``error``.

    Raises:
        InputError: the input does not fit the tool's schema (422, nothing logged).
        TurnInFlight: an agent turn holds the turn lock (409, nothing run or logged).
        PayloadTooLarge: the call is above the log's payload limit (413, nothing run or logged).
        ToolFailed: the tool failed; its call and its result with the error are logged (422).
    """
    auth.require("invoke", session_id)
    await run(store.get_session, session_id)
    tool = registry.get(name)
    tool.validate(body)
    call_id = f"user_{uuid.uuid4().hex[:16]}"
    call = NewEvent(events.tool_call(call_id, name, body, actor="user"))
    (called,) = await committer.append(session_id, [call], unless_turn=True)
    await hub.sync(session_id)
    # From here the call is on the log: whatever happens, its result goes there too.
    try:
        output: Any = await run(tool.dispatch, dict(body))
        result = events.tool_result(call_id, name, output=output, actor="user")
        error = None
    except InputError as e:
        result, error = _failed(call_id, name, str(e))
    except Exception as e:  # a tool from an entry point may raise anything
        result, error = _failed(call_id, name, f"tool {name!r} failed: {type(e).__name__}: {e}")
    try:
        (resulted,) = await committer.append(session_id, [NewEvent(result)])
    except InputError as e:  # the output is above the payload limit, or will not round-trip
        result, error = _failed(call_id, name, f"the output of {name!r} cannot be logged: {e}")
        (resulted,) = await committer.append(session_id, [NewEvent(result)])
    await hub.sync(session_id)
    if error is not None:
        raise ToolFailed(error, call_seq=called.seq, result_seq=resulted.seq)
    return {
        "call_seq": called.seq,
        "result_seq": resulted.seq,
        "output": result.get("output"),
        "error": None,
    }


def _failed(call_id: str, name: str, error: str) -> tuple[dict[str, Any], str]:
    """The ``tool_result`` payload of a failed call, and its error."""
    return events.tool_result(call_id, name, error=error, actor="user"), error
