"""A recording reverse proxy for OpenAI- and Anthropic-compatible APIs (``agenttrail proxy``).

An agent in any language is recorded by pointing its base URL at the proxy
(``OPENAI_BASE_URL=http://127.0.0.1:8788/v1``, ``ANTHROPIC_BASE_URL=http://127.0.0.1:8788``).
Each request goes on to ``upstream`` and its answer comes back, both unchanged::

    client ──request──▶ proxy ──request──▶ upstream          body and headers as sent, minus
    client ◀─response── proxy ◀─response── upstream          the hop-by-hop headers (RFC 9110
                          │                                   §7.6.1); the body as raw bytes,
                          └──▶ Exchange ──▶ record (a thread)  each chunk sent on as it arrives

Nothing on the way through parses a body: a stream keeps its bytes and its chunk timing, and a
response the log cannot make sense of still reaches the client as the upstream sent it. When
the exchange is over (finished, failed or abandoned by the client), it is handed to
``record`` on one writer thread, in order, so that the log never slows the agent down; a full
backlog (:data:`BACKLOG_ENV`) makes new exchanges wait rather than be lost.

What the client sees when something fails:

- upstream unreachable, refusing, or answering something that is not HTTP before its status
  line: 502 Bad Gateway, an RFC 9457 problem naming the upstream and the cause
  (:mod:`agenttrail.server.problems`); no answer in time (:data:`TIMEOUT_ENV`): 504;
- upstream failing after its status line: the connection is closed without ending the body,
  which is how HTTP/1.1 says "truncated" (RFC 9112 §8), so the client's own library raises;
- the client going away mid-stream: the upstream request is closed at once.

Each of these is recorded too, with its ``error`` and ``complete=False``.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import logging
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import Message, Receive, Scope, Send

from agenttrail.codec import now_timestamp
from agenttrail.errors import InputError
from agenttrail.ingest._proxy_record import record_to
from agenttrail.log.store import LogStore

__all__ = [
    "BACKLOG_ENV",
    "DEFAULT_BACKLOG",
    "DEFAULT_TIMEOUT_S",
    "HOP_BY_HOP",
    "TIMEOUT_ENV",
    "Exchange",
    "Proxy",
    "Record",
    "create_proxy",
    "proxy_server",
    "record_to",
    "serve_proxy",
    "upstream_url",
]

logger = logging.getLogger("agenttrail.proxy")

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
"""Headers that describe one connection, not the message (RFC 9110 §7.6.1), so a proxy never
forwards them; nor those a ``Connection`` header names. ``host`` and ``content-length`` of a
request are set again for the upstream connection."""

DEFAULT_TIMEOUT_S = 600.0
"""Seconds the upstream may take to connect, to answer and between two chunks of a stream: a
model thinking through a long answer can be silent for minutes."""
TIMEOUT_ENV = "AGENTTRAIL_PROXY_TIMEOUT"

DEFAULT_BACKLOG = 1024
"""Exchanges waiting for the writer thread before new ones wait for room: enough for bursts of
parallel tool calls, bounded so that a stalled database cannot take all the memory."""
BACKLOG_ENV = "AGENTTRAIL_PROXY_BACKLOG"

_CONNECT_S = 10.0
"""Seconds to open a connection to the upstream: a reachable host answers in far less, and an
agent should hear of a dead one quickly."""


@dataclass(frozen=True)
class Exchange:
    """One HTTP exchange through the proxy, as the client and the upstream saw it."""

    method: str
    """The request method (``POST``)."""
    url: str
    """The upstream URL the request went to."""
    request_headers: list[tuple[str, str]]
    """The client's request headers as received (credentials included: the recorder must
    drop them), in order, names in lower case."""
    request_body: bytes
    """The request body as sent."""
    started_at: str
    """When the request arrived (``created_at`` form)."""
    status: int | None = None
    """The upstream's status code; ``None`` when it never answered."""
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    """The upstream's response headers, names in lower case."""
    response_body: bytes = b""
    """The response body as it came off the wire (still compressed if the upstream compressed
    it: ``content-encoding`` says)."""
    error: str | None = None
    """What went wrong, if anything: the upstream unreachable or failing, the client gone."""
    complete: bool = True
    """False when the body was cut short (by the upstream or the client)."""
    first_byte_ms: float | None = None
    """Milliseconds from the request's arrival to the upstream's status line."""
    elapsed_ms: float = 0.0
    """Milliseconds from the request's arrival to the end of the exchange."""


Record = Callable[[Exchange], None]
"""Writes one exchange to the log; runs on the proxy's writer thread, one exchange at a time."""


def upstream_url(url: str) -> httpx.URL:
    """The upstream base URL, checked: ``http`` or ``https`` with a host, no query.

    Raises:
        InputError: naming ``--upstream`` and what is wrong with it.
    """
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as e:
        raise InputError(f"--upstream {url!r}: not a URL ({e})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InputError(f"--upstream {url!r}: expected an http:// or https:// URL with a host")
    if parsed.query or parsed.fragment:
        raise InputError(f"--upstream {url!r}: a base URL has no query or fragment")
    return parsed


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise InputError(f"{name}={raw!r}: expected a positive number")
    return value


class _Writer:
    """One thread that hands exchanges to ``record`` in arrival order; a failing ``record``
    is logged and the next exchange is written all the same."""

    _STOP = object()

    def __init__(self, record: Record, backlog: int) -> None:
        self._record = record
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=backlog)
        self._thread = threading.Thread(target=self._run, name="agenttrail-proxy-writer")
        self._thread.start()

    async def put(self, exchange: Exchange) -> None:
        try:
            self._queue.put_nowait(exchange)
        except queue.Full:  # wait for room (in a thread, not blocking the event loop)
            await anyio.to_thread.run_sync(self._queue.put, exchange)

    def close(self) -> None:
        """Write what is waiting, then stop the thread."""
        self._queue.put(self._STOP)
        self._thread.join()

    def _run(self) -> None:
        while (exchange := self._queue.get()) is not self._STOP:
            try:
                self._record(exchange)
            except Exception:  # the proxy keeps serving; the log of the failure says why
                logger.exception("could not record %s %s", exchange.method, exchange.url)


def _forwarded(
    headers: list[tuple[bytes, bytes]], drop: frozenset[bytes]
) -> list[tuple[bytes, bytes]]:
    """``headers`` without the hop-by-hop ones, those ``Connection`` names, and ``drop``."""
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.split(b",")
    }
    return [
        (name, value)
        for name, value in headers
        if (low := name.lower()) not in HOP_BY_HOP and low not in named and low not in drop
    ]


def _text(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(n.decode("latin-1").lower(), v.decode("latin-1")) for n, v in headers]


def _cause(e: Exception) -> str:
    return str(e) or type(e).__name__


class Proxy:
    """The proxy as an ASGI app: forwards every request under its root to ``upstream``.

    Args:
        upstream: the base URL requests go to; the request's path and query are appended to
            its path (``https://api.openai.com`` + ``/v1/chat/completions``).
        record: writes one finished exchange to the log (on the writer thread).
        timeout_s: seconds the upstream may take (:data:`DEFAULT_TIMEOUT_S`, else
            ``$AGENTTRAIL_PROXY_TIMEOUT``).
        backlog: exchanges waiting to be written before new ones wait (:data:`DEFAULT_BACKLOG`,
            else ``$AGENTTRAIL_PROXY_BACKLOG``).

    Raises:
        InputError: a bad upstream URL, timeout or backlog, naming it.
    """

    def __init__(
        self,
        upstream: str,
        record: Record,
        *,
        timeout_s: float | None = None,
        backlog: int | None = None,
    ) -> None:
        self.upstream = upstream_url(upstream)
        self._prefix = self.upstream.raw_path.rstrip(b"/")
        self._record = record
        self.timeout_s = timeout_s or _env_number(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)
        self.backlog = backlog or int(_env_number(BACKLOG_ENV, DEFAULT_BACKLOG))
        self._client: httpx.AsyncClient | None = None
        self._writer: _Writer | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The pooled upstream client and the writer thread, for the server's lifetime; on
        exit, every exchange already finished is written before this returns."""
        # Cookies the upstream sets belong to the client, which gets them in the response
        # headers; a jar that refuses all keeps the proxy from holding on to any.
        jar = http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        timeout = httpx.Timeout(self.timeout_s, connect=min(_CONNECT_S, self.timeout_s))
        self._client = httpx.AsyncClient(timeout=timeout, cookies=jar, follow_redirects=False)
        self._writer = _Writer(self._record, self.backlog)
        try:
            yield
        finally:
            await self._client.aclose()
            await anyio.to_thread.run_sync(self._writer.close)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http", scope["type"]  # Starlette routes only http here
        assert self._client is not None and self._writer is not None, "not running"
        start = time.perf_counter()
        started_at = now_timestamp()
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left before it finished its request: nothing was sent
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        raw_path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string", b"")
        url = self.upstream.copy_with(
            raw_path=self._prefix + raw_path + (b"?" + query if query else b"")
        )
        headers = _forwarded(scope["headers"], frozenset({b"host", b"content-length"}))
        exchange = Exchange(
            method=scope["method"],
            url=str(url),
            request_headers=_text(scope["headers"]),
            request_body=bytes(body),
            started_at=started_at,
        )
        exchange = await self._forward(exchange, headers, send, receive, start)
        await self._writer.put(exchange)

    async def _forward(
        self,
        exchange: Exchange,
        headers: list[tuple[bytes, bytes]],
        send: Send,
        receive: Receive,
        start: float,
    ) -> Exchange:
        """Send the request upstream and its answer back; returns the exchange as it ended."""
        assert self._client is not None
        request = httpx.Request(
            exchange.method, exchange.url, headers=headers, content=exchange.request_body
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TimeoutException as e:
            return await self._fail(exchange, send, start, 504, "Gateway Timeout", e)
        except httpx.HTTPError as e:
            return await self._fail(exchange, send, start, 502, "Bad Gateway", e)
        first_byte_ms = (time.perf_counter() - start) * 1000
        out_headers = _forwarded(response.headers.raw, frozenset())
        chunks: list[bytes] = []
        error: str | None = None
        state = {"done": False, "gone": False}
        try:
            async with anyio.create_task_group() as tasks:

                async def watch() -> None:
                    # uvicorn's send() is silent once the client has gone, and a stream
                    # may be idle for minutes: only receive() hears of the disconnect.
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    if not state["done"]:
                        state["gone"] = True
                        tasks.cancel_scope.cancel()

                tasks.start_soon(watch)
                await send(
                    {
                        "type": "http.response.start",
                        "status": response.status_code,
                        "headers": out_headers,
                    }
                )
                try:
                    async for chunk in response.aiter_raw():
                        chunks.append(chunk)
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except httpx.HTTPError as e:
                    error = f"upstream {self.upstream} failed mid-response: {_cause(e)}"
                else:
                    state["done"] = True
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                tasks.cancel_scope.cancel()
        finally:
            await response.aclose()
        received = sum(map(len, chunks))
        if state["gone"]:
            error = f"client disconnected after {received:,} bytes of the response"
        return _ended(
            exchange,
            start,
            status=response.status_code,
            response_headers=_text(response.headers.raw),
            response_body=b"".join(chunks),
            error=error,
            complete=error is None,
            first_byte_ms=first_byte_ms,
        )

    async def _fail(
        self, exchange: Exchange, send: Send, start: float, status: int, title: str, e: Exception
    ) -> Exchange:
        from agenttrail.server.problems import problem

        detail = f"upstream {self.upstream} did not answer: {_cause(e)}"
        if status == 504:
            limit = f"{self.timeout_s:g} s ({TIMEOUT_ENV}, --timeout)"
            detail = f"upstream {self.upstream} did not answer within {limit}"
        response = problem(status, title, detail)
        await response({"type": "http"}, _no_receive, send)
        return _ended(exchange, start, error=detail, complete=False)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


def _ended(exchange: Exchange, start: float, **fields: Any) -> Exchange:
    elapsed_ms = (time.perf_counter() - start) * 1000
    return Exchange(**{**exchange.__dict__, **fields, "elapsed_ms": elapsed_ms})


def create_proxy(
    upstream: str,
    record: Record,
    *,
    timeout_s: float | None = None,
    backlog: int | None = None,
) -> Starlette:
    """The proxy's ASGI app: every path and method forwarded to ``upstream`` (:class:`Proxy`
    gives the arguments and errors)."""
    proxy = Proxy(upstream, record, timeout_s=timeout_s, backlog=backlog)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with proxy.running():
            yield

    app = Starlette(routes=[Mount("/", app=proxy)], lifespan=lifespan)
    app.state.proxy = proxy
    return app


def proxy_server(app: Starlette, *, host: str, port: int) -> Any:
    """A ``uvicorn.Server`` for the proxy's app. uvicorn adds no ``server`` or ``date`` header
    of its own, so that the upstream's reach the client as they were."""
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        server_header=False,
        date_header=False,
        lifespan="on",
    )
    return uvicorn.Server(config)


def serve_proxy(
    store: LogStore,
    upstream: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8788,
    timeout_s: float | None = None,
) -> None:
    """Run the proxy until interrupted, recording every exchange in ``store``.

    Args:
        store: the log the exchanges are written to.
        upstream: the provider's base URL (``https://api.openai.com``).
        host, port: the address to listen on (loopback by default).
        timeout_s: seconds the upstream may take (:data:`DEFAULT_TIMEOUT_S`).

    Raises:
        InputError: a bad upstream URL or limit, naming it.
    """
    app = create_proxy(upstream, record_to(store), timeout_s=timeout_s)
    proxy_server(app, host=host, port=port).run()
