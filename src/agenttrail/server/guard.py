"""The guard: what the server checks before a request reaches a route (docs/server.md).

- **Token before body.** A request to the API (``/v1/…``) must carry a valid token before one
  byte of its body is read: a caller without one cannot make the server read, hold or parse
  anything (401, whatever the body). FastAPI reads and parses a route's body before it runs
  the route's dependencies, so this check cannot be a dependency.
- **A cap on bodies.** A body is counted while it streams in, with or without a
  ``Content-Length`` (chunked), and refused with 413 as soon as it passes
  ``max_body_bytes``; a declared length above the cap is refused before reading. The server
  so holds at most ``max_body_bytes`` of each request, however large the body sent.
- **WebSockets from other origins.** A browser sends ``Origin`` with every WebSocket
  handshake (RFC 6455 §4.1, §10.2) and, unlike ``fetch``, enforces no same-origin policy on
  it; a handshake from a page of another origin is refused (HTTP 403) unless that origin is
  allowed. Clients that are not browsers send no ``Origin`` and are let through; the feed
  checks their token itself.

An early refusal is a problem-details response (:mod:`agenttrail.server.problems`) with
``Connection: close``: the rest of the body is never read.
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agenttrail.errors import AgentTrailError, BodyTooLarge
from agenttrail.server.auth import TokenCache, bearer_token
from agenttrail.server.problems import problem_of

__all__ = [
    "API_PREFIX",
    "DEFAULT_MAX_BODY_BYTES",
    "Guard",
    "allowed_origin",
    "capped_body",
    "normal_origin",
]

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
"""Largest request body the server reads (bytes): twice the store's default payload limit
(``agenttrail.log.store.DEFAULT_MAX_PAYLOAD_BYTES``), so one payload at that limit fits in
its JSON form, escapes and all."""

API_PREFIX = "/v1/"
"""Paths that need a token; the viewer's page, its static files and the API docs do not."""


def normal_origin(origin: str) -> str:
    """An origin as compared: lower case, no trailing slash (RFC 6454 §6.2 serialisation)."""
    return origin.strip().rstrip("/").lower()


def allowed_origin(origin: str | None, host: str | None, allowed: Collection[str]) -> bool:
    """Whether a WebSocket handshake with this ``Origin`` may go on.

    Args:
        origin: the ``Origin`` header; ``None`` for a client that is not a browser.
        host: the ``Host`` header the handshake was sent to.
        allowed: origins allowed besides the server's own (normalised), or ``*`` for any.

    Returns:
        True without an ``Origin``, for the server's own origin (same host and port), and
        for an allowed one.
    """
    if origin is None or "*" in allowed or normal_origin(origin) in allowed:
        return True
    parts = urlsplit(normal_origin(origin))
    return parts.scheme in ("http", "https") and host is not None and parts.netloc == host.lower()


class Guard:
    """ASGI middleware: the token before the body, the body cap, the WebSocket origin check.

    Args:
        app: the app it guards.
        tokens: the tokens verified so far, and the key they are signed with.
        max_body_bytes: the largest request body read, in bytes.
        allowed_origins: browser origins allowed besides the server's own (``*`` for any).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: TokenCache,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        allowed_origins: Collection[str] = (),
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.max_body_bytes = max_body_bytes
        self.allowed_origins = frozenset(normal_origin(o) for o in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            headers = Headers(scope=scope)
            if not allowed_origin(headers.get("origin"), headers.get("host"), self.allowed_origins):
                # Refused before the handshake completes: uvicorn answers HTTP 403.
                await send({"type": "websocket.close", "code": 4403, "reason": "origin refused"})
                return
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            body = await self._admit(scope, receive)
        except AgentTrailError as e:
            response = problem_of(e)
            response.headers["Connection"] = "close"  # the rest of the body stays unread
            await response(scope, receive, send)
            return
        if body is None:  # the client left before its body was in
            return
        await self.app(scope, _replayed(body, receive), send)

    async def _admit(self, scope: Scope, receive: Receive) -> bytes | None:
        """The request's body, once its token (for the API) and its size pass; ``None`` when
        the client went away first.

        Raises:
            Unauthorized: an API request without a valid token (before any body is read).
            BodyTooLarge: a body, declared or read so far, above the cap.
        """
        headers = Headers(scope=scope)
        if scope["path"].startswith(API_PREFIX):
            self.tokens.check(bearer_token(headers.get("authorization")))
        return await capped_body(receive, self.max_body_bytes, headers.get("content-length", ""))


async def capped_body(receive: Receive, limit: int, declared: str) -> bytes | None:
    """A request's body, read while it streams in, refused as soon as it passes ``limit``
    bytes; ``None`` when the client went away first.

    Args:
        receive: the request's ASGI ``receive``.
        limit: the largest body read (bytes).
        declared: its ``Content-Length`` header (``""`` without one).

    Raises:
        BodyTooLarge: a body, declared or read so far, above ``limit``.
    """
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit, int(declared))
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replayed(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body already read, then whatever the client sends next
    (its disconnect)."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
