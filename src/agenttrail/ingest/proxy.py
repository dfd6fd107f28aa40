"""A recording reverse proxy for OpenAI- and Anthropic-compatible APIs (``agenttrail proxy``).

An agent in any language is recorded by pointing its base URL at the proxy
(``OPENAI_BASE_URL=http://127.0.0.1:8788/v1``, ``ANTHROPIC_BASE_URL=http://127.0.0.1:8788``).
Each request goes on to ``upstream`` and its answer comes back, both unchanged::

    client ──request──▶ proxy ──request──▶ upstream          body and headers as sent, minus
    client ◀─response── proxy ◀─response── upstream          the hop-by-hop headers (RFC 9110
                          │                                   §7.6.1); the body as raw bytes,
                          └──▶ HttpExchange ──▶ Capture         each chunk sent on as it arrives

Nothing on the way through parses a body: a stream keeps its bytes and its chunk timing, and a
response the log cannot make sense of still reaches the client as the upstream sent it. When
the exchange is over (finished, failed or abandoned by the client), it is handed to the capture
core (:class:`agenttrail.ingest.capture.Capture`: history recognised, tool results paired by
id, credentials never stored), whose writer process appends it, so that the log never slows
the agent down. A response whose body does not read as its API's is written as a failed
exchange, with an ``error`` event saying why.

What the client sees when something fails:

- upstream unreachable, refusing, or answering something that is not HTTP before its status
  line: 502 Bad Gateway, an RFC 9457 problem naming the upstream and the cause
  (:mod:`agenttrail.server.problems`); no answer in time (:data:`TIMEOUT_ENV`): 504;
- upstream failing after its status line: the connection is closed without ending the body,
  which is how HTTP/1.1 says "truncated" (RFC 9112 §8), so the client's own library raises;
- the client going away mid-stream: the upstream request is closed at once.

Each of these is recorded too, as an ``error`` event in the conversation's session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.cookiejar
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import Message, Receive, Scope, Send

from agenttrail.errors import InputError
from agenttrail.ingest.capture import Capture, HttpExchange
from agenttrail.log.redact import redacting_logger
from agenttrail.server.listen import bound_socket, url_of

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "HOP_BY_HOP",
    "TIMEOUT_ENV",
    "Proxy",
    "create_proxy",
    "proxy_server",
    "serve_proxy",
    "upstream_url",
]

_LOG = redacting_logger("agenttrail.proxy")

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

_CONNECT_S = 10.0
"""Seconds to open a connection to the upstream: a reachable host answers in far less, and an
agent should hear of a dead one quickly."""

_EXIT_WAIT_S = 5.0
"""Seconds a stopping proxy waits for exchanges still queued, as capture does at exit."""


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


def _timeout(value: float | None) -> float:
    """``value``, else ``$AGENTTRAIL_PROXY_TIMEOUT``, else :data:`DEFAULT_TIMEOUT_S`.

    Raises:
        InputError: not a positive number of seconds; names the variable or flag.
    """
    where = f"--timeout {value:g}" if value is not None else ""
    if value is None:
        raw = os.environ.get(TIMEOUT_ENV)
        if raw is None or not raw.strip():
            return DEFAULT_TIMEOUT_S
        where = f"{TIMEOUT_ENV}={raw!r}"
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
    if not value > 0:
        raise InputError(f"{where}: the proxy's timeout must be a positive number of seconds")
    return value


class _NoCookies(http.cookiejar.CookieJar):
    """A cookie jar that keeps nothing: cookies the upstream sets belong to the client, which
    gets them in the response headers. (httpx reads every response's cookies into its
    client's jar, through the standard library's parsing, a third of a millisecond a
    response; this jar skips that work too.)"""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


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


_SET_AGAIN = frozenset({b"host", b"content-length"})
"""Request headers the upstream request sets for its own connection."""


def _text(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(n.decode("latin-1").lower(), v.decode("latin-1")) for n, v in headers]


def _bounded(response: httpx.Response) -> bool:
    """True for a response whose body is of a length given in advance and not an event
    stream: it is sent on as it comes, without watching for the client leaving (a task per
    request); a stream, or a body of unknown length, is watched, since it may go on for
    minutes."""
    headers = response.headers
    stream = headers.get("content-type", "").startswith("text/event-stream")
    return "content-length" in headers and not stream


def _cause(e: Exception) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


class Proxy:
    """The proxy as an ASGI app: forwards every request under its root to ``upstream``.

    Args:
        upstream: the base URL requests go to; the request's path and query are appended to
            its path (``https://api.openai.com`` + ``/v1/chat/completions``).
        capture: writes each exchange to the log (its session, recognition, its writer and
            the limit of what may wait for it).
        timeout_s: seconds the upstream may take (:data:`DEFAULT_TIMEOUT_S`, else
            ``$AGENTTRAIL_PROXY_TIMEOUT``).

    Raises:
        InputError: a bad upstream URL or timeout, naming it.
    """

    def __init__(self, upstream: str, capture: Capture, *, timeout_s: float | None = None) -> None:
        self.upstream = upstream_url(upstream)
        self._prefix = self.upstream.raw_path.rstrip(b"/")
        self.capture = capture
        self.timeout_s = _timeout(timeout_s)
        self._client: httpx.AsyncClient | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The pooled upstream client, for the server's lifetime; on exit, the exchanges
        already finished are written (up to 5 s) before this returns."""
        jar = _NoCookies()
        timeout = httpx.Timeout(self.timeout_s, connect=min(_CONNECT_S, self.timeout_s))
        self._client = httpx.AsyncClient(timeout=timeout, cookies=jar, follow_redirects=False)
        try:
            yield
        finally:
            await self._client.aclose()
            await anyio.to_thread.run_sync(self.capture.flush, _EXIT_WAIT_S)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http", scope["type"]  # Starlette routes only http here
        assert self._client is not None, "not running"
        start, started = time.perf_counter(), time.time()
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
        recorded = Capture.wants(target := str(url))
        exchange = HttpExchange(
            method=scope["method"],
            url=target,
            request_headers=_text(scope["headers"]) if recorded else (),  # decoded if kept
            request_body=bytes(body),
            started=started,
        )
        headers = _forwarded(scope["headers"], _SET_AGAIN)
        exchange = await self._forward(exchange, url, headers, send, receive, start, recorded)
        if recorded:
            self.capture.record(exchange)

    async def _forward(
        self,
        exchange: HttpExchange,
        url: httpx.URL,
        headers: list[tuple[bytes, bytes]],
        send: Send,
        receive: Receive,
        start: float,
        recorded: bool,
    ) -> HttpExchange:
        """Send the request upstream and its answer back; returns the exchange as it ended
        (its duration from ``start``, a ``time.perf_counter`` reading). Whether the client
        left before the end of a bounded answer is asked only when it is ``recorded``."""
        assert self._client is not None
        request = httpx.Request(
            exchange.method, url, headers=headers, content=exchange.request_body
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TimeoutException:
            limit = f"{self.timeout_s:g} s ({TIMEOUT_ENV}, --timeout)"
            detail = f"upstream {self.upstream} did not answer within {limit}"
            return await self._fail(exchange, send, 504, "Gateway Timeout", detail, start)
        except httpx.HTTPError as e:
            detail = f"upstream {self.upstream} did not answer: {_cause(e)}"
            return await self._fail(exchange, send, 502, "Bad Gateway", detail, start)
        chunks: list[bytes] = []
        error: str | None = None
        done = gone = False

        async def relay() -> None:
            nonlocal error, done, gone
            start = {"type": "http.response.start", "status": response.status_code}
            start["headers"] = _forwarded(response.headers.raw, frozenset())
            await send(start)
            try:
                async for chunk in response.aiter_raw():
                    chunks.append(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except httpx.HTTPError as e:
                error = f"upstream {self.upstream} failed mid-response: {_cause(e)}"
            else:
                done = True
                if bounded and recorded and await _left(receive):
                    gone = True  # uvicorn's send() is silent once the client has gone
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        bounded = _bounded(response)
        try:
            if bounded:
                await relay()
            else:
                async with anyio.create_task_group() as tasks:

                    async def watch() -> None:
                        nonlocal gone
                        # uvicorn's send() is silent once the client has gone, and a stream
                        # may be idle for minutes: only receive() hears of the disconnect.
                        while (await receive())["type"] != "http.disconnect":
                            pass
                        if not done:
                            gone = True
                            tasks.cancel_scope.cancel()

                    tasks.start_soon(watch)
                    await relay()
                    tasks.cancel_scope.cancel()
        finally:
            await response.aclose()
        if gone:
            received = sum(map(len, chunks))
            error = f"the client disconnected after {received:,} bytes of the response"
        return dataclasses.replace(
            exchange,
            status=response.status_code,
            response_headers=_text(response.headers.raw),
            response_body=b"".join(chunks),
            duration_s=time.perf_counter() - start,
            error=error,
            complete=error is None,
        )

    async def _fail(
        self,
        exchange: HttpExchange,
        send: Send,
        status: int,
        title: str,
        detail: str,
        start: float,
    ) -> HttpExchange:
        from agenttrail.server.problems import problem  # the server's RFC 9457 shape

        await problem(status, title, detail)({"type": "http"}, _no_receive, send)
        duration_s = time.perf_counter() - start
        return dataclasses.replace(exchange, duration_s=duration_s, error=detail, complete=False)


async def _left(receive: Receive) -> bool:
    """True when the client has disconnected, asked without waiting: the request has been
    read, so ``receive()`` answers at once only with the disconnect (uvicorn's ``send()``
    says nothing of it). What a bounded answer checks before its end, instead of a task
    watching all along (docs/benchmarks.md, Proxy)."""
    with anyio.move_on_after(0):
        message = await receive()
        return bool(message["type"] == "http.disconnect")
    return False


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


def create_proxy(upstream: str, capture: Capture, *, timeout_s: float | None = None) -> Starlette:
    """The proxy's ASGI app: every path and method forwarded to ``upstream``, each exchange
    written through ``capture`` (:class:`Proxy` gives the arguments and errors)."""
    proxy = Proxy(upstream, capture, timeout_s=timeout_s)

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
    log: str | Path | None,
    upstream: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8788,
    timeout_s: float | None = None,
    listening: Callable[[str], None] | None = None,
) -> None:
    """Run the proxy until interrupted, recording every exchange in ``log``.

    Args:
        log: where the log is (a path or URL; default ``AGENTTRAIL_DATABASE_URL``, else
            ``./agenttrail.db``): capture's writer process opens it (one session per
            conversation).
        upstream: the provider's base URL (``https://api.openai.com``).
        host, port: the address to listen on (loopback by default).
        timeout_s: seconds the upstream may take (:data:`DEFAULT_TIMEOUT_S`).
        listening: called with the proxy's own base URL once its port is bound.

    Raises:
        InputError: a bad upstream URL or limit, or an address it cannot listen on (a port
            in use), naming it.
    """
    with Capture(log) as capture:
        app = create_proxy(upstream, capture, timeout_s=timeout_s)
        sock = bound_socket(host, port)
        with sock:
            if listening is not None:
                listening(url_of(sock, host))
            proxy_server(app, host=host, port=port).run(sockets=[sock])
