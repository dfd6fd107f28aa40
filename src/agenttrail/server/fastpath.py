"""The fast path of ingest: ``POST /v1/sessions/{id}/events`` answered in front of the app.

An append request through the whole ASGI stack (the security headers, CORS, the guard,
Starlette's and FastAPI's error handling, routing and exit stacks) costs more server CPU
than the append itself (docs/benchmarks.md, The server). :class:`AppendFastPath` sits in
front of that stack and answers the one request that carries ingest, a ``POST`` to the
append route, itself, doing what the stack would do and nothing else:

- the guard's token before the body and its cap on the body
  (:func:`agenttrail.server.guard.capped_body`), refused as the guard refuses (with
  ``Connection: close``);
- the route's work, shared with the route (:func:`agenttrail.server.routes.events.appended`):
  the same grant, validation, group commit and live notification, and its problems
  (:mod:`agenttrail.server.problems`);
- the headers the stack adds: CORS's ``Vary: Origin`` and the security headers of a JSON
  answer (:mod:`agenttrail.server.headers`).

It runs inside Starlette's outermost layer, which answers an error that is not agenttrail's
with a bare 500, for this path as for the others.

A request with an ``Origin`` header (a browser's, which CORS concerns) and every other
request go through the whole stack. ``tests/server/test_fastpath.py`` checks that both
answer alike, byte for byte.
"""

from __future__ import annotations

from fastapi.exceptions import RequestValidationError
from starlette.responses import Response
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from agenttrail.errors import AgentTrailError
from agenttrail.server.auth import TokenCache, bearer_token
from agenttrail.server.committer import Committer
from agenttrail.server.guard import capped_body
from agenttrail.server.headers import security_headers
from agenttrail.server.live import Hub
from agenttrail.server.problems import problem_of, validation_problem
from agenttrail.server.routes.events import APPEND_PATH, appended

__all__ = ["AppendFastPath"]

_ROUTE = compile_path(APPEND_PATH)[0]
"""The route's path, matched as Starlette's router matches it."""

_CREATED = {"type": "http.response.start", "status": 201}


class AppendFastPath:
    """ASGI middleware, outermost: answers ``POST /v1/sessions/{id}/events`` without the
    app's stack, and hands every other request to it.

    Args:
        app: the app with its whole stack.
        tokens: the tokens verified so far (the guard's and the routes' cache).
        committer: the group committer the route appends through.
        hub: the live hub the route notifies.
        max_body_bytes: the guard's cap on a body (bytes).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: TokenCache,
        committer: Committer,
        hub: Hub,
        max_body_bytes: int,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.committer = committer
        self.hub = hub
        self.max_body_bytes = max_body_bytes
        # What the stack adds to every answer of the route: CORS's ``Vary: Origin`` (to a
        # request without an Origin, as to one from an origin not allowed), then the
        # security headers, with the policy of a response that is data.
        self.added = [(b"vary", b"Origin")] + [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in security_headers(APPEND_PATH, "").items()
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            await self.app(scope, receive, send)
            return
        match = _ROUTE.match(scope["path"])
        if match is None:
            await self.app(scope, receive, send)
            return
        authorization: str | None = None
        declared: str | None = None
        for name, value in scope["headers"]:  # the first of each, as Starlette's Headers
            if name == b"origin":  # a browser's request: CORS answers it, in the stack
                await self.app(scope, receive, send)
                return
            if name == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
            elif name == b"content-length" and declared is None:
                declared = value.decode("latin-1")
        try:
            grant = self.tokens.check(bearer_token(authorization))
            body = await capped_body(receive, self.max_body_bytes, declared or "")
        except AgentTrailError as e:  # the guard's refusal
            refused = problem_of(e)
            refused.headers["Connection"] = "close"  # the rest of the body stays unread
            await self._answer(refused, send)
            return
        if body is None:  # the client left before its body was in
            return
        try:
            answer = await appended(self.committer, self.hub, grant, match["session_id"], body)
        except RequestValidationError as e:
            await self._answer(validation_problem(e), send)
        except AgentTrailError as e:
            await self._answer(problem_of(e), send)
        else:
            length = str(len(answer)).encode("latin-1")
            headers = [(b"content-length", length), (b"content-type", b"application/json")]
            await send({**_CREATED, "headers": headers + self.added})
            await send({"type": "http.response.body", "body": answer})

    async def _answer(self, response: Response, send: Send) -> None:
        """Send a problem response with the headers the stack adds, as the stack would."""
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": response.raw_headers + self.added,
            }
        )
        await send({"type": "http.response.body", "body": response.body})
