"""How the proxy writes an exchange to the log until the capture core takes over.

The provider's importer (:mod:`agenttrail.formats.openai`, :mod:`agenttrail.formats.anthropic`)
reads the exchanges of this proxy run so far, as ``{request, response}`` records, into events;
the store's idempotency keys make the events already written duplicates, so only the new
ones are appended. One session per provider per run. Request headers are not kept (they carry
the credentials); nor is the URL's query.
"""

from __future__ import annotations

import json
import threading
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from agenttrail.codec import now_timestamp
from agenttrail.errors import AgentTrailError
from agenttrail.formats import anthropic, openai
from agenttrail.log.store import LogStore
from agenttrail.model import NewEvent, NewSession, events

if TYPE_CHECKING:
    from agenttrail.ingest.proxy import Exchange

__all__ = ["record_to"]


def record_to(store: LogStore) -> Callable[[Exchange], None]:
    """A :data:`~agenttrail.ingest.proxy.Record` that appends each exchange to ``store``."""
    records: dict[str, list[dict[str, Any]]] = {}
    sessions: dict[str, str] = {}
    lock = threading.Lock()

    def record(exchange: Exchange) -> None:
        provider = "anthropic" if urlsplit(exchange.url).path.endswith("/messages") else "openai"
        with lock:
            session_id = sessions.setdefault(provider, f"proxy-{uuid.uuid4()}")
            create = NewSession(
                session_id,
                None,
                None,
                None,
                None,
                exchange.started_at,
                {"source": "agenttrail proxy", "provider": provider},
            )
            problems: list[NewEvent] = []
            if exchange.error is not None:
                problems.append(_error(exchange, exchange.error))
            if exchange.status is not None and exchange.complete:
                kept = records.setdefault(provider, [])
                kept.append(_as_record(exchange))
                module = anthropic if provider == "anthropic" else openai
                try:
                    [imported] = module.read(Path(exchange.url), json.dumps(kept).encode())
                except AgentTrailError as e:
                    kept.pop()
                    problems.append(_error(exchange, f"response not recorded: {e}"))
                else:
                    store.append_batch(session_id, imported.events, create=create)
            if problems:
                store.append_batch(session_id, problems, create=create)

    return record


def _as_record(exchange: Exchange) -> dict[str, Any]:
    parts = urlsplit(exchange.url)
    body = _decoded(exchange)
    try:
        response: Any = json.loads(body)
    except ValueError:
        response = body.decode("utf-8", "replace")
    try:
        request: Any = json.loads(exchange.request_body)
    except ValueError:
        request = None
    agent = dict(exchange.request_headers).get("user-agent")
    return {
        "request": {
            "method": exchange.method,
            "url": urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")),
            "headers": {"user-agent": agent} if agent else {},
            "body": request,
        },
        "response": {
            "status_code": exchange.status,
            "headers": {"date": dict(exchange.response_headers).get("date", "")},
            "body": response,
        },
    }


def _decoded(exchange: Exchange) -> bytes:
    coding = dict(exchange.response_headers).get("content-encoding", "").strip().lower()
    if coding in ("gzip", "deflate"):
        try:
            return zlib.decompress(exchange.response_body, 47)  # gzip or zlib header
        except zlib.error:
            return exchange.response_body
    return exchange.response_body


def _error(exchange: Exchange, message: str) -> NewEvent:
    parts = urlsplit(exchange.url)
    where = f"{exchange.method} {parts.path}"
    return NewEvent(events.error(f"{where}: {message}", code=exchange.status), now_timestamp())
