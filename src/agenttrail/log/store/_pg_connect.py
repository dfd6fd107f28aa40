"""Connecting to PostgreSQL: URLs, one-line connection errors, and the LISTEN connection.

Split from :mod:`agenttrail.log.store.postgres`, which holds the log's SQL: this module knows
where a database is and how to say so without its password.
"""

from __future__ import annotations

import getpass
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from agenttrail.errors import InputError, StoreError
from agenttrail.log.redact import redacting_logger

__all__ = [
    "CONNECT_TIMEOUT_S",
    "DEFAULT_SCHEMA",
    "NOTIFY_CHANNEL",
    "Listener",
    "PostgresURL",
    "connect",
    "connect_kwargs",
    "first_line",
    "parse_url",
    "redact",
]

logger = redacting_logger("agenttrail.log.store.postgres")

DEFAULT_SCHEMA = "public"
"""Where the tables go without ``?schema=``."""

CONNECT_TIMEOUT_S = 10
"""libpq ``connect_timeout`` unless the URL sets one (seconds): an unreachable host fails
in seconds instead of after the operating system's TCP timeout (minutes)."""

NOTIFY_CHANNEL = "agenttrail_appends"
"""The channel every append NOTIFYs (``LISTEN agenttrail_appends``), with the payload
``<schema>/<session id>``: the channel is per database, and a database may hold several
agenttrail schemas."""

HEARTBEAT_S = 5.0
"""How often a quiet LISTEN connection is checked end to end (seconds): a listener sends
itself a notification over a connection of its own and expects it back."""

HEARTBEAT_LOST_S = 15.0
"""A heartbeat not back within this many seconds means the LISTEN connection went silent
(a half-open TCP connection raises no error); the listener reconnects (seconds)."""

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

Conn = psycopg.Connection[Any]


# -- URLs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PostgresURL:
    """A ``postgresql://`` URL taken apart: what libpq gets, and what messages may show."""

    conninfo: str = ""
    """The URL for libpq, without agenttrail's own ``schema`` parameter."""
    schema: str = DEFAULT_SCHEMA
    """The schema that holds the tables (``?schema=``)."""
    host: str = ""
    port: str = ""
    dbname: str = ""
    user: str = ""
    password: str | None = None
    """Only ever passed to libpq; never in a message or :attr:`redacted`."""
    redacted: str = ""
    """The URL without its password: safe to print and log."""

    @property
    def where(self) -> str:
        """``database 'test' on 127.0.0.1:5432``, for messages."""
        return f"PostgreSQL database {self.dbname!r} on {self.host}:{self.port}"


def parse_url(url: str) -> PostgresURL:
    """Take a ``postgresql://`` (or ``postgres://``) URL apart.

    Everything libpq understands is passed through (host, port, user, password, dbname,
    ``sslmode``, ``options`` …: https://www.postgresql.org/docs/15/libpq-connect.html
    #LIBPQ-CONNSTRING); ``schema=NAME`` names the schema that holds the tables (default
    ``public``). Missing parts take libpq's defaults (``PGHOST``, ``PGUSER`` …).

    Raises:
        InputError: the URL is malformed or the schema name is not a plain identifier.
    """
    try:
        parts = urlsplit(url)
    except ValueError as e:  # a "[" with no "]", or what is between them not an IPv6 address
        raise InputError(f"database URL: {e} (a host in [ ] is an IPv6 address)") from None
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for name, value in query if name == "schema"]
    schema = schemas[-1] if schemas else DEFAULT_SCHEMA
    if not _SCHEMA_NAME.fullmatch(schema):
        raise InputError(
            f"database URL: schema {schema!r} is not a plain identifier (letters, digits, _)"
        )
    rest = [(name, value) for name, value in query if name != "schema"]
    conninfo = urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote)))
    try:
        info = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as e:
        raise InputError(f"database URL {redact(url)!r}: {first_line(e)}") from None
    except UnicodeDecodeError:  # libpq's parser decodes each %-escape as UTF-8
        raise InputError(
            f"database URL {redact(url)!r}: a %-escape in it is not UTF-8 text"
        ) from None
    user = str(info.get("user") or os.environ.get("PGUSER") or getpass.getuser())
    return PostgresURL(
        conninfo=conninfo,
        schema=schema,
        host=str(info.get("host") or os.environ.get("PGHOST") or "localhost"),
        port=str(info.get("port") or os.environ.get("PGPORT") or "5432"),
        dbname=str(info.get("dbname") or os.environ.get("PGDATABASE") or user),
        user=user,
        password=None if info.get("password") is None else str(info["password"]),
        redacted=redact(url),
    )


def redact(url: str) -> str:
    """``url`` without its password (in the user info or a ``password=`` parameter)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}@{hosts}"
    query = [(n, v) for n, v in parse_qsl(parts.query, keep_blank_values=True) if n != "password"]
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query, quote_via=quote)))


def first_line(e: BaseException) -> str:
    """The first non-blank line of an error's message (libpq's run over several)."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


# -- connections ------------------------------------------------------------------------------


def connect_kwargs(url: PostgresURL, *, autocommit: bool) -> dict[str, Any]:
    """psycopg connection options: autocommit, ``application_name`` and a connect timeout
    (:data:`CONNECT_TIMEOUT_S`) unless the URL sets one."""
    kwargs: dict[str, Any] = {"autocommit": autocommit, "application_name": "agenttrail"}
    if "connect_timeout" not in conninfo_to_dict(url.conninfo):
        kwargs["connect_timeout"] = CONNECT_TIMEOUT_S
    return kwargs


def connect(url: PostgresURL, *, autocommit: bool = False) -> Conn:
    """A connection to ``url``.

    Raises:
        StoreError: the server cannot be reached or refuses the login: one line that names
            the host, port, database (and user), never the password.
    """
    try:
        return psycopg.connect(url.conninfo, **connect_kwargs(url, autocommit=autocommit))
    except psycopg.Error as e:
        raise StoreError(login_error(url, e)) from e


def login_error(url: PostgresURL, e: psycopg.Error) -> str:
    """The one-line message for a failed connection (libpq's runs over several lines)."""
    # libpq: 'connection to server at "127.0.0.1", port 5433 failed: Connection refused'
    # or '… failed: FATAL:  role "x" does not exist'.
    reason = first_line(e).rsplit(" failed: ", 1)[-1].strip()
    refused = "FATAL" in reason or "authentication" in reason
    reason = reason.removeprefix("FATAL:").strip()
    if url.password:
        reason = reason.replace(url.password, "***")
    if refused:
        return (
            f"PostgreSQL refused the login to database {url.dbname!r} on {url.host}:{url.port} "
            f"as {url.user!r}: {reason}"
        )
    return (
        f"PostgreSQL database {url.dbname!r} cannot be reached at {url.host}:{url.port}: {reason}"
    )


class Listener:
    """``LISTEN agenttrail_appends`` on a connection of its own (an ``AppendListener``).

    Reconnects by itself after the connection drops; :meth:`wait` then returns ``None``,
    because notifications sent meanwhile are lost (NOTIFY is not queued for a listener that
    is not connected: https://www.postgresql.org/docs/15/sql-notify.html). A connection can
    also go silent without an error (a half-open TCP connection: a NAT or firewall dropped
    it); so every ``heartbeat_s`` the listener sends itself a notification over a fresh
    connection, and reconnects when it is not back within ``lost_after_s``.

    Args:
        url: the database.
        heartbeat_s: seconds between heartbeats (:data:`HEARTBEAT_S`).
        lost_after_s: seconds after which a heartbeat counts as lost (:data:`HEARTBEAT_LOST_S`).
    """

    def __init__(
        self,
        url: PostgresURL,
        *,
        heartbeat_s: float = HEARTBEAT_S,
        lost_after_s: float = HEARTBEAT_LOST_S,
    ) -> None:
        self._url = url
        self._conn: Conn | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._heartbeat_s = heartbeat_s
        self._lost_after_s = lost_after_s
        self._beat = f"heartbeat:{os.getpid()}:{id(self):x}"
        """This listener's heartbeat payload; other listeners drop it (no schema prefix)."""
        self._beat_due = 0.0
        """``time.monotonic()`` when the next heartbeat is to be sent."""
        self._beat_sent: float | None = None
        """When the heartbeat in flight was sent, ``None`` when none is."""

    def wait(self, timeout: float) -> list[str] | None:
        """Session ids appended to within ``timeout`` seconds (may repeat, may be empty), or
        ``None`` after a (re)connect: then any watched session may have missed appends."""
        with self._lock:
            if self._closed:
                return []
            if self._conn is None or self._conn.closed:
                try:
                    conn = connect(self._url, autocommit=True)
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(NOTIFY_CHANNEL)))
                except (StoreError, psycopg.Error) as e:
                    logger.warning("postgres: LISTEN connection failed: %s", first_line(e))
                    time.sleep(timeout)
                    return []
                self._conn = conn
                self._beat_due = time.monotonic() + self._heartbeat_s
                self._beat_sent = None
                return None
            now = time.monotonic()
            if self._beat_sent is not None and now - self._beat_sent > self._lost_after_s:
                logger.warning(
                    "postgres: LISTEN connection silent: a heartbeat is %.0f s late; reconnecting",
                    now - self._beat_sent,
                )
                self._drop()
                return []
            if self._beat_sent is None and now >= self._beat_due:
                self._send_heartbeat(now)
            try:
                found = [n.payload for n in self._conn.notifies(timeout=timeout, stop_after=1)]
                if found:  # what arrived with the first, without waiting again
                    found += [n.payload for n in self._conn.notifies(timeout=0)]
            except psycopg.Error as e:
                logger.warning("postgres: LISTEN connection lost: %s", first_line(e))
                self._drop()
                return []
            if self._beat in found:
                self._beat_sent = None
                self._beat_due = time.monotonic() + self._heartbeat_s
            ours = f"{self._url.schema}/"
            return [p.removeprefix(ours) for p in found if p.startswith(ours)]

    def _send_heartbeat(self, now: float) -> None:
        """NOTIFY this listener's heartbeat over a connection of its own, which a silent
        LISTEN connection does not share. A failure to send is logged; the heartbeat then
        counts as sent, so an unreachable server also ends in a reconnect."""
        self._beat_sent = now
        try:
            with connect(self._url, autocommit=True) as conn:
                conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, self._beat))
        except (StoreError, psycopg.Error) as e:
            logger.warning("postgres: LISTEN heartbeat not sent: %s", first_line(e))

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Close the LISTEN connection (waits for a :meth:`wait` in progress)."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
