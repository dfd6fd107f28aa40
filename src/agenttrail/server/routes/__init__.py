"""The REST API and the live feed, one module per resource.

Each module has a ``router``; :data:`ROUTERS` is the order the app includes them in, which is
the order of the paths in the OpenAPI document. The viewer's own routes are
:mod:`agenttrail.server.viewer`.
"""

from fastapi import APIRouter

from agenttrail.server.routes import events, evidence, live, otlp, outputs, sessions, tools, turns

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (
    sessions.router,
    events.router,
    evidence.router,
    outputs.router,
    turns.router,
    tools.router,
    live.router,
    otlp.router,
)
"""Every API router, in the order they are included."""
