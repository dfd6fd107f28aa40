"""Security headers on every response of the server (docs/server.md, Browsers).

Every response says: do not guess a content type (``X-Content-Type-Options: nosniff``), send
no ``Referer`` from our pages (``Referrer-Policy: no-referrer``), and do not frame us
(``X-Frame-Options: DENY`` and CSP ``frame-ancestors 'none'``). Each carries a
Content-Security-Policy chosen by what it is:

- the viewer's page (``/``): only our own scripts, styles and the live WebSocket of the host
  it was loaded from (the page builds nodes with ``textContent``; this is the second line);
- the API docs (``/docs``, ``/redoc``): FastAPI's pages, which load Swagger UI and ReDoc
  from their CDN and start them with an inline script;
- everything else (JSON, static files): nothing at all may run or load.
"""

from __future__ import annotations

import re

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "API_CSP",
    "DOCS_CSP",
    "DOCS_PATHS",
    "SecurityHeaders",
    "content_security_policy",
    "security_headers",
]

API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
"""The policy of a response that is data, not a page."""

DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    "font-src https://fonts.gstatic.com; img-src 'self' data: https://fastapi.tiangolo.com "
    "https://cdn.redoc.ly; worker-src blob:; connect-src 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'"
)
"""The policy of FastAPI's API docs (``fastapi.openapi.docs``: Swagger UI and ReDoc)."""

DOCS_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc"})

_HOST = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]+)?|\[[0-9A-Fa-f:.]+\](:[0-9]+)?")
"""A Host header fit to name in the page's policy (a name or an address, and a port)."""


def content_security_policy(path: str, host: str) -> str:
    """The Content-Security-Policy for a response to ``path``, asked of ``host``."""
    if path == "/":
        live = f" ws://{host} wss://{host}" if _HOST.fullmatch(host) else ""
        return (
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            f"connect-src 'self'{live}; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
    if path in DOCS_PATHS:
        return DOCS_CSP
    return API_CSP


def security_headers(path: str, host: str) -> dict[str, str]:
    """The headers above for a response to ``path``, asked of ``host``, by name."""
    return {
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Content-Security-Policy": content_security_policy(path, host),
    }


class SecurityHeaders:
    """ASGI middleware: the headers above on every HTTP response (a header the response set
    itself is kept).

    Args:
        app: the app whose responses get them.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        fixed = security_headers(scope["path"], Headers(scope=scope).get("host", ""))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in fixed.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)
