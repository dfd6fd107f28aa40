"""Live capture: HTTP exchanges with the OpenAI and Anthropic APIs, appended to the log as they
happen, with the reading that import gives the same traffic recorded.

How to hand it one exchange (what :func:`agenttrail.instrument` and a recording proxy do)::

    from agenttrail.ingest.capture import Capture, HttpExchange

    capture = Capture("agenttrail.db")              # or an open store; None: the usual database
    capture.record(HttpExchange(
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        request_headers=[("content-type", "application/json"), ("authorization", "Bearer …")],
        request_body=b'{"model": "gpt-4o", "messages": [...]}',
        status=200,                                  # None: no response (timeout, refused …)
        response_headers=[("content-type", "application/json"), ("date", "…")],
        response_body=b'{"id": "chatcmpl-…", ...}',  # as sent (Content-Encoding undone here);
                                                     # a stream's bytes once it ended
        started=time.time(),                         # Unix seconds when the request was sent
        duration_s=0.42,                             # until the body ended (or the error)
        error=None,                                  # "ReadTimeout: …" when it failed
        complete=True,                               # False: a stream cut or abandoned
    ))                                               # returns at once; never raises
    capture.flush()                                  # wait until it is written (tests, exit)

:meth:`Capture.record` queues the exchange and returns; a writer (a process of its own, or a
thread: :mod:`._writer`) reads it with the format's conversation reader
(:class:`agenttrail.formats.openai.Conversation`,
:class:`agenttrail.formats.anthropic.Conversation`: the code import runs), recognises the
conversation it continues (:mod:`._recognition`) and appends only what is new, in one
transaction. A failure (a log that cannot be written, a body that does not read) goes to the
``agenttrail.capture`` logger and to :attr:`Capture.failures`, never to the caller.
:meth:`Capture.write` does the same at once and raises instead (for callers that want to know).

Sessions: one per conversation, unless one is given: ``Capture(session=…)``,
``record(…, session=…)``, or :func:`session`, a context manager read at the time of the
request. What is recorded and never stored: docs/capture.md.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agenttrail.codec import normalize_timestamp
from agenttrail.errors import FormatError, InputError
from agenttrail.formats import anthropic, openai
from agenttrail.ingest.capture._http import Headers, decoded, kept_headers, redacted_url
from agenttrail.ingest.capture._recognition import (
    Followed,
    Index,
    LiveConversation,
    Resumable,
    conversations_limit,
    event_key,
    last_number,
)
from agenttrail.ingest.capture._writer import WRITER_ENV, ProcessWriter, Writer
from agenttrail.limits import count_limit
from agenttrail.log.redact import redacting_logger
from agenttrail.log.store import Appended, LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events

__all__ = [
    "DEFAULT_QUEUE",
    "QUEUE_ENV",
    "WRITER_ENV",
    "Capture",
    "HttpExchange",
    "Writer",
    "current_session",
    "redacted_url",
    "session",
]

_LOG = redacting_logger("agenttrail.capture")

QUEUE_ENV = "AGENTTRAIL_CAPTURE_QUEUE"
"""The environment variable of the queue limit (exchanges waiting to be written)."""

DEFAULT_QUEUE = 10_000
"""Most exchanges waiting to be written (besides the one being written): far more than an
agent makes while one append runs,
and a bound on the memory a log that has stopped answering can make capture hold. Beyond it an
exchange is dropped (logged, counted in :attr:`Capture.failures`), never waited for."""

_READERS: tuple[type[LiveConversation], ...] = (openai.Conversation, anthropic.Conversation)
"""The conversation readers, asked in turn which URL is theirs."""

_SOURCE = Path("capture")
"""How captured exchanges are named in the readers' warnings and errors."""


@dataclass(frozen=True)
class HttpExchange:
    """One HTTP exchange with a provider's API, as it happened."""

    method: str
    """``POST``."""
    url: str
    """The full request URL (user, password and credential query parameters are dropped
    before anything is stored)."""
    request_headers: Headers
    """As sent; only the few the readers use are kept (never a credential)."""
    request_body: bytes
    """The request body as sent (JSON)."""
    status: int | None = None
    """The response's HTTP status; ``None`` when no response came (see :attr:`error`)."""
    response_headers: Headers = ()
    """As received (``Content-Encoding`` says how to decode the body)."""
    response_body: bytes = b""
    """The body as received, all of it or, for a stream cut short, what arrived."""
    started: float = 0.0
    """When the request was sent: Unix seconds."""
    duration_s: float = 0.0
    """Seconds from sending to the end of the response body (or to the failure)."""
    error: str | None = None
    """Why the exchange did not end normally (``ReadTimeout: timed out``, ``ConnectError: …``,
    a stream's ``RemoteProtocolError: …``); ``None`` when it did, or when the caller closed a
    stream early."""
    complete: bool = True
    """False when the response body was cut short: a stream interrupted, or abandoned by the
    caller before its end."""


_SESSION: ContextVar[NewSession | None] = ContextVar("agenttrail_session", default=None)


@contextmanager
def session(
    session_id: str | None = None,
    *,
    title: str | None = None,
    agent: str | None = None,
    user: str | None = None,
    workspace: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Iterator[str]:
    """Capture every exchange made inside the block (this thread or task, and the tasks it
    starts) into one session, created at the first exchange if it does not exist.

    Args:
        session_id: the session; default a new id.
        title: its title if created (default: the first prompt, as import titles it).
        agent, user, workspace, metadata: its fields if created.

    Yields:
        The session id.

    Example::

        with agenttrail.session(title="Nightly triage") as session_id:
            client.chat.completions.create(...)
    """
    new = NewSession(
        session_id or str(uuid.uuid4()), title, agent, user, workspace, None, metadata or {}
    )
    token = _SESSION.set(new)
    try:
        yield new.id or ""
    finally:
        _SESSION.reset(token)


def current_session() -> NewSession | None:
    """The session :func:`session` set for this context, or ``None``."""
    return _SESSION.get()


class Capture:
    """Writes captured exchanges to a log (module docstring: how to hand it one).

    Args:
        log: an open store, or where it is (a path or URL, opened at the first write); default
            ``AGENTTRAIL_DATABASE_URL``, else ``./agenttrail.db``.
        session: the session every exchange goes to (an id, or the :class:`NewSession` to
            create); default one session per conversation.
        conversations: how many conversations are followed at once (default
            ``AGENTTRAIL_CAPTURE_CONVERSATIONS``, else 1000).
        queue: most exchanges waiting to be written (default ``AGENTTRAIL_CAPTURE_QUEUE``,
            else :data:`DEFAULT_QUEUE`).
        exit_wait_s: how long the interpreter's exit waits for exchanges still queued
            (seconds).
        writer: ``process`` or ``thread`` (:mod:`._writer`); default ``AGENTTRAIL_CAPTURE_WRITER``,
            else a process for a log given by its location and a thread for an open store.

    Raises:
        InputError: a limit that is not a positive integer, or a writer that is neither
            (names its variable).
    """

    def __init__(
        self,
        log: LogStore | str | Path | None = None,
        *,
        session: str | NewSession | None = None,
        conversations: int | None = None,
        queue: int | None = None,
        exit_wait_s: float = 5.0,
        writer: str | None = None,
    ) -> None:
        self._store: LogStore | None = None if isinstance(log, str | Path | None) else log
        self._owned = self._store is None
        self._where = log if isinstance(log, str | Path) else None
        self.session = _as_session(session)
        self._index = Index(conversations_limit(conversations))
        size = count_limit(
            queue, QUEUE_ENV, DEFAULT_QUEUE, f"capture queue ({QUEUE_ENV})", unit="exchanges"
        )
        self._writer: Writer | ProcessWriter
        if _writer_kind(writer, own_log=self._owned) == "process":
            where = None if self._where is None else str(self._where)
            config = {"log": where, "session": self.session, "conversations": self._index.limit}
            self._writer = ProcessWriter(config, size=size, exit_wait_s=exit_wait_s)
        else:
            self._writer = Writer(self.write_queued, size=size, exit_wait_s=exit_wait_s)
        self._lock = threading.Lock()
        self._scratch = {reader: reader(_SOURCE) for reader in _READERS}
        self._numbers: dict[str, int] = {}
        self._failed = 0

    @property
    def written(self) -> int:
        """Exchanges :meth:`record` handed over that were written to the log."""
        return self._writer.written

    @property
    def failures(self) -> int:
        """Exchanges that could not be recorded: the log failed, a body did not read, or the
        queue was full (each is logged on ``agenttrail.capture``)."""
        w = self._writer
        return self._failed + w.failed + w.dropped + w.crashed

    @staticmethod
    def wants(url: str) -> bool:
        """True when ``url`` is an endpoint capture records (Chat Completions, Responses,
        Messages); other exchanges (embeddings, files, token counting) are not recorded."""
        return any(reader.accepts(url) for reader in _READERS)

    def record(self, exchange: HttpExchange, *, session: str | NewSession | None = None) -> bool:
        """Queue ``exchange`` to be written and return at once; never raises.

        Args:
            exchange: the exchange, finished (its whole body, or all of a stream that came).
            session: its session; default the one :func:`session` set in the caller's context,
                else the capture's, else the conversation's own.

        Returns:
            False when it was not queued (the queue is full: counted and logged).
        """
        try:
            chosen = _as_session(session) or current_session() or self.session
            if self._writer.put((exchange, chosen)):
                return True
            _LOG.warning("agenttrail capture: queue full; %s not recorded", _named(exchange))
        except Exception:
            self.lost(exchange.method, exchange.url)
        return False

    def lost(self, method: str, url: str) -> None:
        """Count and log (with the current exception, URL without credentials) an exchange
        that could not even be handed over: a failure on the caller's side, never raised."""
        self._failed += 1
        _LOG.exception("agenttrail capture: %s %s not recorded", method, redacted_url(url))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued exchange is written (or has failed); False when ``timeout``
        seconds passed first."""
        return self._writer.flush(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Write what is queued (up to ``timeout`` seconds), stop the writer, and close
        the store if the capture opened it."""
        self._writer.close(timeout)
        with self._lock:
            if self._owned and self._store is not None:
                self._store.close()
                self._store = None

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc: object) -> None:
        """:meth:`close`, waiting for what is queued."""
        self.close()

    def write_queued(self, item: tuple[HttpExchange, NewSession | None]) -> str | None:
        """Write one exchange :meth:`record` queued (the writer's handler); never raises.

        A response that does not read as its API's (the caller got it as it was) is recorded
        as what it is to the log: the request, then an ``error`` saying why its answer is not
        there, in the conversation's session.

        Returns:
            Why it was not recorded (one line, for the ``agenttrail.capture`` logger), or
            ``None`` when it was.
        """
        exchange, chosen = item
        try:
            try:
                self.write(exchange, session=chosen)
            except (FormatError, ValueError) as e:
                if exchange.status is None:
                    raise
                why = f"upstream answered HTTP {exchange.status}, unreadable as its API's: {e}"
                failed = replace(
                    exchange, status=None, response_headers=(), response_body=b"", error=why
                )
                self.write(failed, session=chosen)
        except Exception as e:
            return f"{_named(exchange)} not recorded: {type(e).__name__}: {e}"
        return None

    def write(
        self, exchange: HttpExchange, *, session: str | NewSession | None = None
    ) -> list[Appended]:
        """Write ``exchange`` now, in the caller's thread: the request's messages that are new
        to its conversation, then the response (its assistant message with ``meta.duration_ms``
        and tool calls), its error, or an ``error`` event for a response that never came or a
        stream cut short (``errorType`` ``transport_error`` / ``incomplete_stream``).

        Args:
            exchange: the exchange.
            session: as :meth:`record` (the context's session is *not* read here).

        Returns:
            What the append did, one per event (empty for an endpoint capture does not record).

        Raises:
            FormatError: a body that does not read as its API's.
            AgentTrailError: the log could not be opened or written (``StoreError``, ...).
            ValueError: a body whose ``Content-Encoding`` cannot be undone.
        """
        reader = next((r for r in _READERS if r.accepts(exchange.url)), None)
        if reader is None:
            return []
        record, request = _record(exchange)
        with self._lock:
            store = self._open()
            chosen = _as_session(session) or self.session
            followed = self._recognise(store, reader, record, request, chosen)
            try:
                return self._append(store, followed, exchange, record, chosen)
            except BaseException:
                self._index.forget(followed)  # its state may be ahead of the log now
                raise

    def _open(self) -> LogStore:
        if self._store is None:
            self._store = open_store(self._where)
        return self._store

    def _recognise(
        self,
        store: LogStore,
        reader: type[LiveConversation],
        record: dict[str, Any],
        request: dict[str, Any],
        chosen: NewSession | None,
    ) -> Followed:
        """The conversation ``record`` (whose request body is ``request``) continues, or a new
        one (docs/capture.md, How conversations are recognised)."""
        scratch = self._scratch[reader]
        prints = scratch.prints(record)
        scratch.take_warnings()
        scope = chosen.id if chosen is not None else None
        previous = request.get("previous_response_id")
        if isinstance(previous, str):
            followed = self._index.by_response.get(previous)
            if followed is not None and followed.scope == scope:
                return followed
        found, k = self._index.find(scope, reader.provider, prints)
        if found is None and not self._index.recovered:
            for session_id, number in self._index.recover(store).items():
                self._numbers.setdefault(session_id, number)
            found, k = self._index.find(scope, reader.provider, prints)
        if isinstance(found, Followed):
            return found
        conversation = reader(_SOURCE)
        if isinstance(found, Resumable):
            conversation.resume(prints[:k], request)
            return Followed(conversation, found.session_id, scope)
        if scope is not None:
            return Followed(conversation, scope, scope)
        session_id = str(uuid.uuid4())
        self._numbers[session_id] = 0  # a new session: no keys to look up
        return Followed(conversation, session_id, scope)

    def _append(
        self,
        store: LogStore,
        followed: Followed,
        exchange: HttpExchange,
        record: dict[str, Any],
        chosen: NewSession | None,
    ) -> list[Appended]:
        session_id = followed.session_id
        if session_id not in self._numbers:
            self._numbers[session_id] = last_number(store.event_keys(session_id))
        number = self._numbers[session_id] + 1
        conversation = followed.conversation
        found = conversation.add_record(record, number)
        for warning in conversation.take_warnings():
            _LOG.debug("agenttrail capture: %s: %s", _named(exchange), warning)
        found += _failure(exchange, record, conversation, number)
        response_ids = []
        for event in found:
            payload = event.payload
            if isinstance(payload.get("meta"), dict) and payload.get("role") == "assistant":
                payload["meta"] = {**payload["meta"], "duration_ms": exchange.duration_s * 1000}
                if isinstance(payload.get("responseId"), str):
                    response_ids.append(payload["responseId"])
        tip = self._index.follow(followed, conversation.provider, response_ids)
        # Only the exchange's last event carries a key: the tip after it, read back after a
        # restart (._recognition). A nonce keeps it unique; the others need none (an exchange
        # is written once), and each key costs the append a lookup.
        keyed = [NewEvent(e.payload, e.created_at) for e in found]
        if keyed:
            last = found[-1]
            nonce = secrets.token_hex(4)
            keyed[-1] = NewEvent(last.payload, last.created_at, event_key(last.key, nonce, tip))
        appended = store.append_batch(
            session_id, keyed, create=_new_session(followed, exchange, record, chosen)
        )
        # the session's last exchange number, most recent last; as many sessions are kept as
        # conversations are followed (one forgotten is read back from its keys if it returns)
        self._numbers.pop(session_id, None)
        self._numbers[session_id] = number
        while len(self._numbers) > self._index.limit:
            del self._numbers[next(iter(self._numbers))]
        return appended


def _writer_kind(chosen: str | None, *, own_log: bool) -> str:
    """``process`` or ``thread``: ``chosen``, else ``$AGENTTRAIL_CAPTURE_WRITER``, else a
    process when the capture opens its own log (an open store cannot cross to a process) and
    the interpreter can start one of itself."""
    kind = chosen or os.environ.get(WRITER_ENV) or ""
    if kind not in ("", "process", "thread"):
        where = "writer" if chosen else WRITER_ENV
        raise InputError(f"capture {where}={kind!r} is neither 'process' nor 'thread'")
    if chosen == "process" and not own_log:
        raise InputError("capture writer='process' needs a log given by path or URL, not a store")
    if kind == "thread" or not own_log or not sys.executable:
        return "thread"
    return "process"


def _as_session(value: str | NewSession | None) -> NewSession | None:
    if value is None or isinstance(value, NewSession):
        return value
    return NewSession(value)


def _named(exchange: HttpExchange) -> str:
    """An exchange as named in log messages (its URL without credentials)."""
    return f"{exchange.method} {redacted_url(exchange.url)}"


def _record(exchange: HttpExchange) -> tuple[dict[str, Any], dict[str, Any]]:
    """The exchange as the importers read recorded traffic (``{request, response}``), with
    nothing secret kept (:mod:`._http`), and its request body parsed (``{}`` when it is not a
    JSON object) for recognition."""
    request_text = exchange.request_body.decode("utf-8", "replace")
    try:
        parsed = json.loads(request_text)
    except ValueError:
        parsed = None
    response: dict[str, Any] = {"status_code": exchange.status, "headers": {}, "body": None}
    if exchange.status is not None:
        body = decoded(exchange.response_body, exchange.response_headers)
        response["headers"] = kept_headers(exchange.response_headers)
        response["body"] = body.decode("utf-8", "replace")
    request = {
        "method": exchange.method,
        "url": redacted_url(exchange.url),
        "headers": kept_headers(exchange.request_headers),
        "body": parsed if isinstance(parsed, dict) else request_text,  # parsed once
    }
    return {"request": request, "response": response}, parsed if isinstance(parsed, dict) else {}


def _failure(
    exchange: HttpExchange, record: dict[str, Any], reader: LiveConversation, number: int
) -> list[NewEvent]:
    """The ``error`` event of an exchange that did not end normally (none when it did). A
    stream the caller closed after its last event (the official clients close at ``[DONE]``,
    before the body's end) ended normally."""
    key = f"x{number}:capture"
    if exchange.status is None:
        message = exchange.error or "no response"
        payload = events.error(f"no response: {message}", errorType="transport_error")
        return [NewEvent(payload, None, key)]
    body = record["response"]["body"]
    if not exchange.complete and not (exchange.error is None and reader.ended(body or "")):
        why = exchange.error or "the caller closed it before its end"
        payload = events.error(
            f"the response stream was cut short: {why}",
            errorType="incomplete_stream",
            incomplete=True,
        )
        return [NewEvent(payload, None, key)]
    return []


def _new_session(
    followed: Followed, exchange: HttpExchange, record: dict[str, Any], chosen: NewSession | None
) -> NewSession:
    """The session to create if it does not exist yet: titled as import titles it; its
    metadata names the format, the source (``capture``), the URL (credentials removed) and
    the model asked for."""
    details = followed.conversation.details()
    metadata: dict[str, Any] = {
        "format": followed.conversation.provider,
        "source": "capture",
        "url": record["request"]["url"],
    }
    if details.get("model") is not None:
        metadata["model"] = details["model"]
    new = chosen or NewSession()
    return replace(
        new,
        id=followed.session_id,
        title=new.title or details.get("title"),
        agent=new.agent or details.get("agent"),
        started=new.started or normalize_timestamp(exchange.started or 0.0),
        metadata={**new.metadata, **metadata},
    )
