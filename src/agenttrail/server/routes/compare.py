"""``/v1/sessions/{a}/diff/{b}``: where two sessions part (docs/usage.md, Comparing two
sessions), the JSON ``agenttrail diff --json`` prints."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agenttrail.server._deps import Auth, Store, run
from agenttrail.views.diff import diff_sessions

__all__ = ["router"]

router = APIRouter()


@router.get("/v1/sessions/{a}/diff/{b}")
async def diff(a: str, b: str, auth: Auth, store: Store, align: bool = False) -> dict[str, Any]:
    """Two sessions aligned step by step: the first divergence and every later one; with
    ``align=true`` also ``alignment``, every block of the alignment with its steps (the
    viewer's compare view)."""
    auth.require("read", a)
    auth.require("read", b)

    def compare() -> dict[str, Any]:
        store.get_session(a)  # an unknown id is a 404, not two empty sessions alike
        store.get_session(b)
        found = diff_sessions(store.read(a), store.read(b))
        body = {"a": a, "b": b, **found.record()}
        if align:
            body["alignment"] = [block.view() for block in found.blocks]
        return body

    result: dict[str, Any] = await run(compare)
    return result
