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
import logging
import os
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import yarl
from aiohttp.http_exceptions import HttpProcessingError
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import Message, Receive, Scope, Send

from agenttrail.errors import InputError
from agenttrail.ingest.capture import Capture, HttpExchange, header_text, named
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


def upstream_url(url: str) -> yarl.URL:
    """The upstream base URL, checked: ``http`` or ``https`` with a host, no query.

    Raises:
        InputError: naming ``--upstream`` and what is wrong with it.
    """
    try:
        parsed = yarl.URL(url)
    except ValueError as e:
        raise InputError(f"--upstream {url!r}: not a URL ({e})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InputError(f"--upstream {url!r}: expected an http:// or https:// URL with a host")
    if parsed.query_string or parsed.fragment:
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


def _forwarded(
    headers: Sequence[tuple[bytes, bytes]], drop: frozenset[bytes]
) -> list[tuple[bytes, bytes]]:
    """``headers`` without the hop-by-hop ones, those ``Connection`` names, and ``drop``;
    their names in lower case, as ASGI has them (a request's are already)."""
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.split(b",")
    }
    return [
        (low, value)
        for name, value in headers
        if (low := name.lower()) not in HOP_BY_HOP and low not in named and low not in drop
    ]


_SET_AGAIN = frozenset({b"host", b"content-length"})
"""Request headers the upstream request sets for its own connection."""


_NOT_ADDED = ("Accept", "Accept-Encoding", "Content-Type", "User-Agent")
"""Request headers aiohttp adds when a request has none (a pass-through adds none of them)."""


def _text(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(n.decode("latin-1").lower(), v.decode("latin-1")) for n, v in headers]


def _sendable(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """``headers`` as aiohttp takes them: text, which it writes out as UTF-8. A value in UTF-8
    (ASCII included) goes on as its bytes came; one that is not (obs-text) is read a byte a
    character (:func:`header_text`), so its bytes above 0x7F go on re-encoded as UTF-8."""
    return [(name.decode("latin-1"), header_text(value)) for name, value in headers]


def _bounded(response: aiohttp.ClientResponse) -> bool:
    """True for a response whose body is of a length given in advance and not an event
    stream: it is sent on as it comes, without watching for the client leaving (a task per
    request); a stream, or a body of unknown length, is watched, since it may go on for
    minutes."""
    headers = response.headers
    stream = headers.get("content-type", "").startswith("text/event-stream")
    return "content-length" in headers and not stream


def _env_proxy(upstream: yarl.URL) -> str | None:
    """The forward proxy the environment names for ``upstream`` (``HTTPS_PROXY`` /
    ``HTTP_PROXY``, unless ``NO_PROXY`` covers its host; the standard library's reading of
    them), looked up once: the upstream never changes. (aiohttp's own ``trust_env`` would
    also read ``~/.netrc`` on every request, in a thread.)"""
    if upstream.host is None or urllib.request.proxy_bypass(upstream.host):
        return None
    return urllib.request.getproxies().get(upstream.scheme)


def _trusted(upstream: yarl.URL) -> ssl.SSLContext | bool:
    """The certificates an ``https`` upstream is checked against: httpx's choice, which the
    proxy made before it went to aiohttp and the SDKs make (``SSL_CERT_FILE`` or
    ``SSL_CERT_DIR`` when set, else certifi's bundle, not the system's, which some Pythons
    lack); ``True`` (aiohttp's default) for ``http``."""
    if upstream.scheme != "https":
        return True
    import httpx

    return httpx.create_ssl_context()


def _cause(e: Exception) -> str:
    """What failed, on one line: the exception's name and message, put plainly where
    aiohttp's words would mislead (a refused connection names no ``ssl:default`` for a plain
    ``http`` upstream; a body cut short shows no parser code that reads as an HTTP 400)."""
    name = type(e).__name__
    if isinstance(e, aiohttp.ClientConnectorError):
        return f"{name}: cannot connect to {e.host}:{e.port}: {e.os_error.strerror or e.os_error}"
    if isinstance(e, aiohttp.ClientPayloadError) and isinstance(e.__cause__, HttpProcessingError):
        return f"{name}: the body was cut short: {e.__cause__.message}"
    return f"{name}: {e}" if str(e) else name


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
        self._base = str(self.upstream.with_path(self.upstream.raw_path.rstrip("/"), encoded=True))
        self.capture = capture
        self.timeout_s = _timeout(timeout_s)
        self._via = _env_proxy(self.upstream)
        self._client: aiohttp.ClientSession | None = None
        self.cut = 0
        """Answers ended cut short on purpose (:class:`_CutOnPurpose`) whose server message
        is still to come."""

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The pooled upstream client, for the server's lifetime; on exit, the exchanges
        already finished are written (up to 5 s) before this returns.

        The client is aiohttp's: its C HTTP parser costs a fifth of the CPU per exchange of
        httpx's pure-Python one, and the proxy's added latency is mostly CPU
        (docs/benchmarks.md, Proxy). It keeps no cookies (they belong to the client, which
        gets them in the headers), decompresses nothing and follows no redirect."""
        timeout = aiohttp.ClientTimeout(
            total=None, connect=min(_CONNECT_S, self.timeout_s), sock_read=self.timeout_s
        )
        self._client = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=_trusted(self.upstream)),
            timeout=timeout,
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            skip_auto_headers=_NOT_ADDED,
        )
        server_log = logging.getLogger(_SERVER_LOG)
        quiet = _CutOnPurpose(self)
        server_log.addFilter(quiet)
        try:
            yield
        finally:
            server_log.removeFilter(quiet)
            await self._client.close()
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
        target = self._base + (raw_path + (b"?" + query if query else b"")).decode("latin-1")
        recorded = Capture.wants(target)
        exchange = HttpExchange(
            method=scope["method"],
            url=target,
            request_headers=_text(scope["headers"]) if recorded else (),  # decoded if kept
            request_body=bytes(body),
            started=started,
        )
        headers = _sendable(_forwarded(scope["headers"], _SET_AGAIN))
        url = yarl.URL(target, encoded=True)  # the path's bytes as the client sent them
        exchange = await self._forward(exchange, url, headers, send, receive, start, recorded)
        if recorded:
            self.capture.record(exchange)

    async def _forward(
        self,
        exchange: HttpExchange,
        url: yarl.URL,
        headers: list[tuple[str, str]],
        send: Send,
        receive: Receive,
        start: float,
        recorded: bool,
    ) -> HttpExchange:
        """Send the request upstream and its answer back; returns the exchange as it ended
        (its duration from ``start``, a ``time.perf_counter`` reading). Whether the client
        left before the end of a bounded answer is asked only when it is ``recorded``."""
        assert self._client is not None
        try:
            response = await self._client.request(
                exchange.method,
                url,
                headers=headers,
                data=exchange.request_body,
                allow_redirects=False,
                proxy=self._via,
            )
        except TimeoutError:
            limit = f"{self.timeout_s:g} s ({TIMEOUT_ENV}, --timeout)"
            detail = f"upstream {self.upstream} did not answer within {limit}"
            return await self._fail(exchange, send, 504, "Gateway Timeout", detail, start)
        except aiohttp.ClientError as e:
            detail = f"upstream {self.upstream} did not answer: {_cause(e)}"
            return await self._fail(exchange, send, 502, "Bad Gateway", detail, start)
        chunks: list[bytes] = []
        error: str | None = None
        done = gone = False

        async def relay() -> None:
            nonlocal error, done, gone
            start = {"type": "http.response.start", "status": response.status}
            start["headers"] = _forwarded(response.raw_headers, frozenset())
            await send(start)
            try:
                async for chunk in response.content.iter_any():
                    chunks.append(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except (TimeoutError, aiohttp.ClientError) as e:
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
            if done:
                response.release()  # the connection goes back to the pool
            else:
                response.close()  # an upstream request not read to its end is closed
        if gone and not Capture.ended(exchange.url, b"".join(chunks)):
            received = sum(map(len, chunks))
            error = f"the client disconnected after {received:,} bytes of the response"
        elif error is not None:  # the client's answer ends without its end, on purpose
            self.cut += 1
            _LOG.warning(
                "agenttrail proxy: %s: %s; the client's answer is cut short too",
                named(exchange),
                error,
            )
        return dataclasses.replace(
            exchange,
            status=response.status,
            response_headers=_text(response.raw_headers),
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


_SERVER_LOG = "uvicorn.error"
"""The logger of the server the proxy runs in."""

_NOT_COMPLETED = "ASGI callable returned without completing response."
"""What uvicorn logs, as an error, when an app ends a response without its last part: what
the proxy does on purpose when the upstream's answer breaks off, so that the client sees it
cut short too."""


class _CutOnPurpose(logging.Filter):
    """Drops the server's :data:`_NOT_COMPLETED` once for each answer the proxy cut on
    purpose (it logged its own line, naming the exchange and why); any other is kept: that
    would be a fault of the proxy's."""

    def __init__(self, proxy: Proxy) -> None:
        super().__init__()
        self.proxy = proxy

    def filter(self, record: logging.LogRecord) -> bool:
        if self.proxy.cut and record.getMessage() == _NOT_COMPLETED:
            self.proxy.cut -= 1
            return False
        return True


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
