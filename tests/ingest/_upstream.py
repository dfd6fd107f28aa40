"""A loopback stand-in for the OpenAI and Anthropic APIs: a real Starlette app on uvicorn that
answers each request with the next recorded response, as the provider sent it (status,
headers, body; a stream sent event by event).

The recordings are read in place from ``../shared/realdata`` (tests/formats/_recordings.py cites
their SOURCES.md rows). Faults are scripted replies: a status, a delay longer than the client
waits, a stream whose connection drops after some events.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agenttrail.model import Event
from tests.conftest import serving
from tests.formats._recordings import CASSETTES

__all__ = [
    "KEY",
    "TOOL_LOOP",
    "Recorded",
    "Reply",
    "Upstream",
    "payloads",
    "recorded",
    "sse_reply",
    "upstream",
]

KEY = "sk-test-7f3a9c1e5b2d4f60a8e1c3b5d7f9a2c4"
"""The API key the tests' clients send: it must never be found in a database file."""

TOOL_LOOP = CASSETTES / "test_chat_completion_tool_calls_with_content.yaml"
"""Two Chat Completions calls: two tool calls asked for, then the answer to their results."""

_DROPPED = {"content-length", "content-encoding", "transfer-encoding", "connection", "date"}
"""Recorded response headers not replayed: the server sets its own framing and date."""


@dataclass
class Reply:
    """One scripted response."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})
    events: list[bytes] | None = None
    """For a stream: the body in server-sent events, sent one by one."""
    delay_s: float = 0.0
    """Wait this long before answering (a timeout test)."""
    cut_after: int | None = None
    """Drop the connection after this many events of a stream."""
    event_gap_s: float = 0.0
    """Wait this long between two events of a stream."""


@dataclass
class Recorded:
    """One recorded exchange: what the client sends, and the reply the provider gave."""

    path: str
    """The request's path and query (``/v1/chat/completions``)."""
    body: dict[str, Any]
    """The request body, as keyword arguments of the client's ``create``."""
    reply: Reply


def sse_reply(text: str, headers: dict[str, str] | None = None, **options: Any) -> Reply:
    """A stream reply: ``text`` (server-sent events) cut into its events."""
    events = [part.encode() + b"\n\n" for part in text.split("\n\n") if part.strip()]
    wanted = {"content-type": "text/event-stream", **(headers or {})}
    return Reply(200, b"".join(events), wanted, events=events, **options)


def _reply(status: int, headers: dict[str, Any], body: Any) -> Reply:
    flat = {
        k.lower(): (v[0] if isinstance(v, list) else v)
        for k, v in headers.items()
        if k.lower() not in _DROPPED
    }
    text = body if isinstance(body, str) else json.dumps(body)
    if text.lstrip().startswith(("data:", "event:")):
        return sse_reply(text, flat)
    flat.setdefault("content-type", "application/json")
    return Reply(status, text.encode(), flat)


def payloads(events: list[Event]) -> list[dict[str, Any]]:
    """Payloads with the capture's own timing taken out (times are not compared)."""
    found = []
    for event in events:
        payload = dict(event.payload)
        if isinstance(payload.get("meta"), dict):
            payload["meta"] = {**payload["meta"], "duration_ms": None}
        found.append(payload)
    return found


def recorded(path: Path) -> list[Recorded]:
    """The exchanges of a vcrpy cassette (YAML) or of ``{request, response}`` records (JSON)."""
    found = []
    if path.suffix == ".yaml":
        for interaction in yaml.safe_load(path.read_text())["interactions"]:
            request, response = interaction["request"], interaction["response"]
            url = request["uri"].split("://", 1)[1]
            reply = _reply(
                response["status"]["code"], response["headers"], response["body"]["string"]
            )
            found.append(Recorded(url[url.index("/") :], json.loads(request["body"]), reply))
    else:
        for record in json.loads(path.read_text()):
            request, response = record["request"], record["response"]
            url = request["url"].split("://", 1)[1]
            reply = _reply(response["status_code"], response["headers"], response["body"])
            found.append(Recorded(url[url.index("/") :], request["body"], reply))
    return found


class Upstream:
    """The app: replies in the order scripted; every request it got, in :attr:`requests`."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        """``(path and query, headers, body)`` of each request."""
        self.app = Starlette(routes=[Route("/{path:path}", self.answer, methods=["POST", "GET"])])
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with ``replies``, in order."""
        self.replies.extend(replies)

    async def answer(self, request: Request) -> Response:
        body = await request.body()
        url = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        self.requests.append((url, dict(request.headers), body))
        if not self.replies:
            return Response(b'{"error": {"message": "nothing scripted"}}', 599)
        reply = self.replies.popleft()
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.events is None:
            return Response(reply.body, reply.status, headers=reply.headers)
        return StreamingResponse(_events(reply), reply.status, headers=reply.headers)


async def _events(reply: Reply) -> AsyncIterator[bytes]:
    for n, event in enumerate(reply.events or []):
        if reply.cut_after is not None and n == reply.cut_after:
            raise ConnectionAbortedError("the upstream drops the stream (scripted)")
        if n and reply.event_gap_s:
            await asyncio.sleep(reply.event_gap_s)
        yield event


def upstream() -> Iterator[Upstream]:
    """An :class:`Upstream` served on loopback (a generator for a fixture)."""
    app = Upstream()
    with serving(app.app) as port:
        app.port = port
        yield app
