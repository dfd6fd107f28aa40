"""Errors as RFC 9457 problem details (``application/problem+json``).

Each :class:`~agenttrail.errors.AgentTrailError` becomes one status, the first class in
:data:`STATUS` that it is an instance of (so a subclass is listed before its parent), with
the error's message as ``detail`` and, for some, a field that says more: the turn that holds
the lock, the payload limit, the seqs of a failed tool's logged call and result. A request
that does not fit a route's shape is 422 naming the field. The table of statuses is in
docs/server.md.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from agenttrail.errors import (
    AgentTrailError,
    BodyTooLarge,
    Forbidden,
    InputError,
    MalformedBody,
    PayloadTooLarge,
    SessionExists,
    SessionNotFound,
    ToolFailed,
    TurnInFlight,
    Unauthorized,
    UnsupportedMediaType,
)

__all__ = ["STATUS", "add_problem_handlers", "problem", "problem_of", "validation_problem"]

STATUS: tuple[tuple[type[AgentTrailError], int, str], ...] = (
    (Unauthorized, 401, "Unauthorized"),
    (Forbidden, 403, "Forbidden"),
    (SessionNotFound, 404, "Not Found"),
    (TurnInFlight, 409, "Conflict"),
    (SessionExists, 409, "Conflict"),
    (PayloadTooLarge, 413, "Content Too Large"),
    (BodyTooLarge, 413, "Content Too Large"),
    (UnsupportedMediaType, 415, "Unsupported Media Type"),
    (MalformedBody, 400, "Bad Request"),
    (InputError, 422, "Unprocessable Content"),
)
"""``(error class, HTTP status, title)``, most specific first; any other agenttrail error is
500 Internal Server Error."""


def problem(status: int, title: str, detail: str, **extra: Any) -> JSONResponse:
    """A problem-details response: ``{type, title, status, detail, **extra}``.

    Args:
        status: the HTTP status.
        title: its reason phrase (RFC 9110).
        detail: what went wrong, naming the session, field or limit.
        extra: members that say more (RFC 9457 §3.2 extension members).
    """
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


def problem_of(exc: AgentTrailError) -> JSONResponse:
    """The problem-details response for an agenttrail error (statuses in :data:`STATUS`); an
    error caused by a payload above the limit (the importer's, naming the event) is that
    payload's 413."""
    extra: dict[str, Any] = {}
    if isinstance(exc.__cause__, PayloadTooLarge):
        return problem(413, "Content Too Large", str(exc), limit=exc.__cause__.limit)
    if isinstance(exc, TurnInFlight):
        extra = {"turn_id": exc.turn_id, "expires_at": exc.expires_at}
    elif isinstance(exc, (PayloadTooLarge, BodyTooLarge)):
        extra = {"limit": exc.limit}
    elif isinstance(exc, ToolFailed):
        # The members of a tool call's answer, so that a client finds the logged events.
        extra = {
            "call_seq": exc.call_seq,
            "result_seq": exc.result_seq,
            "output": None,
            "error": str(exc),
        }
    for kind, status, title in STATUS:
        if isinstance(exc, kind):
            return problem(status, title, str(exc), **extra)
    return problem(500, "Internal Server Error", str(exc))


def add_problem_handlers(app: FastAPI) -> None:
    """Answer every agenttrail error and every request that does not fit a route's shape with
    a problem-details response."""

    @app.exception_handler(AgentTrailError)
    async def agenttrail_error(request: Request, exc: AgentTrailError) -> JSONResponse:
        return problem_of(exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_problem(exc)


def validation_problem(exc: RequestValidationError) -> JSONResponse:
    """The 422 of a request that does not fit a route's shape, naming the first field that
    does not (``field events.0.payload: Input should be a valid dictionary``)."""
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    return problem(422, "Unprocessable Content", f"field {where}: {first.get('msg', 'invalid')}")
