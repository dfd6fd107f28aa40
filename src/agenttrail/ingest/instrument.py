"""``agenttrail.instrument(client)``: record a live agent's OpenAI or Anthropic client in one line.

Both official Python clients send every request through an httpx client (``client._client``:
``httpx.Client`` or, in their newer releases, the same API as ``httpx2``). :func:`instrument`
wraps that client's transports with a recording transport: the request goes on unchanged, the
response comes back unchanged (the same object, status, headers and exceptions), and its body
reaches the caller chunk for chunk as it arrives, while a copy is kept. When the body ends,
fails or is closed early, the exchange is handed to the capture core
(:mod:`agenttrail.ingest.capture`), which writes it in its writer process. Nothing here imports
``openai`` or ``anthropic``: the client's own httpx module is found from the client.

Rules (what is recorded, how conversations are recognised, what is never stored):
docs/capture.md.
"""

from __future__ import annotations

import atexit
import sys
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from agenttrail.ingest.capture import Capture, HttpExchange, current_session
from agenttrail.log.store import LogStore
from agenttrail.model import NewSession

__all__ = ["capture_of", "instrument"]

C = TypeVar("C")

_CLIENT_PACKAGES = ("openai", "anthropic")
"""The top-level packages of the clients :func:`instrument` takes."""


def instrument(
    client: C,
    *,
    log: LogStore | str | Path | None = None,
    session: str | None = None,
) -> C:
    """Record every conversation ``client`` has with its API into the log, and return it.

    Args:
        client: an ``openai.OpenAI``, ``openai.AsyncOpenAI``, ``anthropic.Anthropic`` or
            ``anthropic.AsyncAnthropic`` (or a client of the same make: Azure, Bedrock, ...).
            Chat Completions, Responses and Messages calls are recorded, streaming or not;
            other endpoints pass through unrecorded.
        log: where to write: an open store, a path or a URL; default
            ``AGENTTRAIL_DATABASE_URL``, else ``./agenttrail.db`` (opened at the first call).
        session: a session id every exchange of this client goes to; default one session per
            conversation (or the one :func:`agenttrail.session` sets around a call).

    Returns:
        ``client`` itself, instrumented. Instrumenting it again changes nothing.

    Raises:
        TypeError: ``client`` is not an OpenAI or Anthropic client.
        InputError: a capture limit in the environment is not a positive integer.

    Example::

        client = agenttrail.instrument(openai.OpenAI())
    """
    http = getattr(client, "_client", None)
    module = _httpx_of(http)
    package = type(client).__module__.split(".")[0]
    if module is None or package not in _CLIENT_PACKAGES:
        raise TypeError(
            "agenttrail.instrument takes an openai or anthropic client (OpenAI, AsyncOpenAI, "
            f"Anthropic, AsyncAnthropic), not {type(client).__module__}.{type(client).__name__}"
        )
    if capture_of(client) is not None:
        return client
    capture = Capture(log, session=session)
    sync, asyncio_ = _transports(module)
    wrapper = asyncio_ if isinstance(http, module.AsyncClient) else sync
    http._transport = wrapper(http._transport, capture)  # type: ignore[union-attr]
    mounts = http._mounts  # type: ignore[union-attr]
    for pattern, transport in list(mounts.items()):
        if transport is not None:
            mounts[pattern] = wrapper(transport, capture)
    return client


def capture_of(client: Any) -> Capture | None:
    """The :class:`~agenttrail.ingest.capture.Capture` an instrumented client writes through
    (its ``flush()``, ``failures``, ``written``), or ``None`` if ``client`` is not instrumented."""
    transport = getattr(getattr(client, "_client", None), "_transport", None)
    return getattr(transport, "agenttrail_capture", None)


def _httpx_of(http: Any) -> ModuleType | None:
    """The httpx module (``httpx`` or ``httpx2``) whose ``Client`` or ``AsyncClient`` ``http``
    is, found from its classes (never imported here)."""
    for cls in type(http).__mro__:
        if cls.__name__ in ("Client", "AsyncClient"):
            module = sys.modules.get(cls.__module__.split(".")[0])
            if module is not None and hasattr(module, "AsyncBaseTransport"):
                return module
    return None


class _Exchange:
    """One exchange in flight: the request, the response once it came, the body so far."""

    __slots__ = (
        "__weakref__",
        "capture",
        "done",
        "parts",
        "request",
        "response",
        "session",
        "start",
        "started",
        "url",
    )

    def __init__(
        self, capture: Capture, request: Any, url: str, session: NewSession | None
    ) -> None:
        self.capture = capture
        self.request = request
        self.url = url
        self.session = session
        self.started = time.time()
        self.start = time.perf_counter()
        self.response: Any = None
        self.parts: list[bytes] = []
        self.done = False

    def answered(self, response: Any, tee: type[Any]) -> Any:
        """``response``, its body stream replaced by ``tee`` over it (same bytes, kept); a
        response its transport made already read (``httpx.MockTransport``, a transport of
        the agent's own tests) is recorded at once, its body being all there."""
        self.response = response
        if response.is_stream_consumed:  # its stream is closed: a tee would see nothing
            self.parts.append(response.content)
            self.end(complete=True)
            return response
        response.stream = tee(response.stream, self)
        _STREAMING.add(self)
        return response

    def end(self, *, complete: bool, error: BaseException | None = None) -> None:
        """Hand the exchange to the capture core, once."""
        if self.done:
            return
        self.done = True
        _STREAMING.discard(self)
        request, response, parts = self.request, self.response, self.parts
        # The response holds its stream, a tee, which holds this exchange: let go of it, so
        # that the three are freed by reference counting when the caller lets go, not left
        # for the cycle collector (whose runs, triggered by them, were half of instrument's
        # CPU per call: docs/benchmarks.md, Live capture).
        self.request = self.response = None
        self.parts = []
        try:
            exchange = HttpExchange(
                method=request.method,
                url=self.url,
                request_headers=request.headers,
                request_body=request.content,
                status=None if response is None else response.status_code,
                response_headers=() if response is None else response.headers,
                response_body=parts[0] if len(parts) == 1 else b"".join(parts),
                started=self.started,
                duration_s=time.perf_counter() - self.start,
                error=None if error is None else f"{type(error).__name__}: {error}",
                complete=complete,
            )
        except Exception:  # never the caller's problem (docs/capture.md)
            self.capture.lost(str(request.method), self.url)
            return
        self.capture.record(exchange, session=self.session)


_STREAMING: weakref.WeakSet[_Exchange] = weakref.WeakSet()
"""Exchanges whose body the caller is reading (or has left unread): at exit, those still open
are recorded as abandoned (:func:`_abandoned_at_exit`)."""


@atexit.register  # after the capture core's, so run before its flush at exit (last in, first out)
def _abandoned_at_exit() -> None:
    """Record each exchange whose body stream is still open as the interpreter exits (a stream
    the agent broke out of and never closed, held by a global): abandoned, as a stream closed
    before its end is; the capture core's own exit handler then writes it."""
    for exchange in list(_STREAMING):
        exchange.end(complete=False)


class _Kept:
    """A response body stream and the exchange its bytes are kept for (the tees below)."""

    def __init__(self, inner: Any, exchange: _Exchange) -> None:
        self.inner = inner
        self.exchange = exchange


def _begin(capture: Capture, request: Any) -> _Exchange | None:
    """The exchange to record for ``request``, or ``None`` when it is not a conversation call
    (or its body is a stream not yet read, which no conversation call is)."""
    try:
        if request.method != "POST" or not Capture.wants(url := str(request.url)):
            return None
        request.content  # noqa: B018  (raises when the body is an unread stream)
        return _Exchange(capture, request, url, current_session())
    except Exception:  # what capture cannot read it passes on untouched
        return None


@cache
def _transports(module: ModuleType) -> tuple[type[Any], type[Any]]:
    """The recording transports (sync, async) and body streams for one httpx module: the
    client checks that a response's stream is of its module's stream classes."""

    class Tee(_Kept, module.SyncByteStream):  # type: ignore[name-defined, misc]
        """The response body, passed through chunk by chunk and kept."""

        def __iter__(self) -> Iterator[bytes]:
            exchange = self.exchange
            keep = exchange.parts.append
            try:
                for chunk in self.inner:
                    keep(chunk)
                    yield chunk
            except Exception as e:  # ends the exchange as incomplete; the caller gets it as is
                exchange.end(complete=False, error=e)
                raise
            exchange.end(complete=True)

        def close(self) -> None:
            try:
                self.inner.close()
            finally:
                self.exchange.end(complete=False)  # closed before its end: abandoned

    class AsyncTee(_Kept, module.AsyncByteStream):  # type: ignore[name-defined, misc]
        """The response body of an async client, passed through chunk by chunk and kept."""

        async def __aiter__(self) -> AsyncIterator[bytes]:
            exchange = self.exchange
            keep = exchange.parts.append
            try:
                async for chunk in self.inner:
                    keep(chunk)
                    yield chunk
            except Exception as e:  # as Tee
                exchange.end(complete=False, error=e)
                raise
            exchange.end(complete=True)

        async def aclose(self) -> None:
            try:
                await self.inner.aclose()
            finally:
                self.exchange.end(complete=False)

    class RecordingTransport(module.BaseTransport):  # type: ignore[name-defined, misc]
        """Sends through ``inner`` and records conversation calls (module docstring)."""

        def __init__(self, inner: Any, capture: Capture) -> None:
            self.inner = inner
            self.agenttrail_capture = capture

        def handle_request(self, request: Any) -> Any:
            exchange = _begin(self.agenttrail_capture, request)
            if exchange is None:
                return self.inner.handle_request(request)
            try:
                response = self.inner.handle_request(request)
            except Exception as e:  # no response: recorded, and the caller gets it as is
                exchange.end(complete=False, error=e)
                raise
            return exchange.answered(response, Tee)

        def close(self) -> None:
            self.inner.close()

        def __enter__(self) -> Any:
            self.inner.__enter__()
            return self

        def __exit__(self, *exc: Any) -> None:
            self.inner.__exit__(*exc)

    class AsyncRecordingTransport(module.AsyncBaseTransport):  # type: ignore[name-defined, misc]
        """Sends through ``inner`` and records conversation calls (module docstring)."""

        def __init__(self, inner: Any, capture: Capture) -> None:
            self.inner = inner
            self.agenttrail_capture = capture

        async def handle_async_request(self, request: Any) -> Any:
            exchange = _begin(self.agenttrail_capture, request)
            if exchange is None:
                return await self.inner.handle_async_request(request)
            try:
                response = await self.inner.handle_async_request(request)
            except Exception as e:  # as RecordingTransport
                exchange.end(complete=False, error=e)
                raise
            return exchange.answered(response, AsyncTee)

        async def aclose(self) -> None:
            await self.inner.aclose()

        async def __aenter__(self) -> Any:
            await self.inner.__aenter__()
            return self

        async def __aexit__(self, *exc: Any) -> None:
            await self.inner.__aexit__(*exc)

    return RecordingTransport, AsyncRecordingTransport
