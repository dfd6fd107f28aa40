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
conversation it continues (:mod:`._recognition`) and appends only what is new
(:mod:`._appender`), the exchanges waiting together in one transaction. A failure (a log that
cannot be written, a body that does not read) goes to the ``agenttrail.capture`` logger and
to :attr:`Capture.failures`, never to the caller. :meth:`Capture.write` does the same at once
and raises instead (for callers that want to know).

Sessions: one per conversation, unless one is given: ``Capture(session=…)``,
``record(…, session=…)``, or :func:`session`, a context manager read at the time of the
request. What is recorded and never stored: docs/capture.md.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Any

from agenttrail.errors import InputError
from agenttrail.ingest.capture._appender import Appender, Queued, reader_for
from agenttrail.ingest.capture._http import HttpExchange, header_text, named, redacted_url
from agenttrail.ingest.capture._recognition import conversations_limit
from agenttrail.ingest.capture._writer import WRITER_ENV, ProcessWriter, Writer
from agenttrail.limits import count_limit
from agenttrail.log.redact import redacting_logger
from agenttrail.log.store import Appended, LogStore
from agenttrail.model import NewSession

__all__ = [
    "DEFAULT_QUEUE",
    "QUEUE_ENV",
    "WRITER_ENV",
    "Capture",
    "HttpExchange",
    "Writer",
    "current_session",
    "header_text",
    "named",
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
        store = None if isinstance(log, str | Path | None) else log
        where = log if isinstance(log, str | Path) else None
        self.session = _as_session(session)
        limit = conversations_limit(conversations)
        self._appender = Appender(store, where, self.session, limit)
        size = count_limit(
            queue, QUEUE_ENV, DEFAULT_QUEUE, f"capture queue ({QUEUE_ENV})", unit="exchanges"
        )
        self._writer: Writer | ProcessWriter
        if _writer_kind(writer, own_log=store is None) == "process":
            config = {
                "log": None if where is None else str(where),
                "session": self.session,
                "conversations": limit,
            }
            self._writer = ProcessWriter(config, size=size, exit_wait_s=exit_wait_s)
        else:
            self._writer = Writer(self.write_group, size=size, exit_wait_s=exit_wait_s)
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
        return _wanted(url)

    @staticmethod
    def ended(url: str, body: bytes) -> bool:
        """True when ``body``, a response stream to ``url`` as far as it came, holds the
        stream's last event (``data: [DONE]``, ``response.completed``, ``message_stop``, an
        ``error``): a client that goes away there has its whole answer, as the official
        clients, which close the stream at that event, do (docs/capture.md, What is
        recorded)."""
        reader = reader_for(url)
        return reader is not None and reader.ended(body.decode("utf-8", "replace"))

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
            _LOG.warning("agenttrail capture: queue full; %s not recorded", named(exchange))
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
        self._appender.close()

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc: object) -> None:
        """:meth:`close`, waiting for what is queued."""
        self.close()

    def write_group(self, items: Sequence[Queued]) -> list[str | None]:
        """Write exchanges :meth:`record` queued, in one transaction (the writer's handler;
        :meth:`._appender.Appender.write_group`); never raises.

        Returns:
            One per item: why it was not recorded (one line), or ``None`` once it is durable.
        """
        return self._appender.write_group(items)

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
        return self._appender.write(exchange, _as_session(session))


@lru_cache(maxsize=256)
def _wanted(url: str) -> bool:
    """:meth:`Capture.wants`, remembered: a client calls the same few URLs again and again,
    and parsing one is a few microseconds on the agent's path."""
    return reader_for(url) is not None


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
