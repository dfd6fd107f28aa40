"""The appender: captured exchanges read into events and appended to the log, several in one
transaction.

Each exchange is read with its format's conversation reader
(:class:`agenttrail.formats.openai.Conversation`,
:class:`agenttrail.formats.anthropic.Conversation`: the code import runs), its conversation
recognised (:mod:`._recognition`), and only what is new to it appended. The exchanges a writer
finds waiting together are appended in one transaction (``append_sessions``: one durable
commit, one fsync, for them all), and each is reported written only once that commit is done.
A failure of the shared transaction leaves nothing of it in the log; each exchange is then
written alone, so that one exchange that cannot be written loses only itself.
"""

from __future__ import annotations

import secrets
import threading
import uuid
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agenttrail.codec import normalize_timestamp
from agenttrail.errors import FormatError
from agenttrail.formats import anthropic, openai
from agenttrail.ingest.capture._http import HttpExchange, named, record_of
from agenttrail.ingest.capture._recognition import (
    Followed,
    Index,
    LiveConversation,
    Resumable,
    event_key,
    last_number,
)
from agenttrail.log.redact import redacting_logger
from agenttrail.log.store import Appended, LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events

__all__ = ["READERS", "Appender", "Queued", "reader_for"]

_LOG = redacting_logger("agenttrail.capture")

READERS: tuple[type[LiveConversation], ...] = (openai.Conversation, anthropic.Conversation)
"""The conversation readers, asked in turn which URL is theirs."""


def reader_for(url: str) -> type[LiveConversation] | None:
    """The reader of the API ``url`` calls (:data:`READERS`), ``None`` for an endpoint
    capture does not record."""
    return next((r for r in READERS if r.accepts(url)), None)


_SOURCE = Path("capture")
"""How captured exchanges are named in the readers' warnings and errors."""

Queued = tuple[HttpExchange, NewSession | None]
"""An exchange as queued for a writer, with the session chosen for it (``None``: its
conversation's own)."""


@dataclass(frozen=True)
class _Pending:
    """An exchange read and recognised, its append not yet done."""

    followed: Followed
    batch: tuple[str, list[NewEvent], NewSession | None]
    """``(session_id, events, create)``, as ``append_sessions`` takes them."""


class Appender:
    """Reads exchanges and appends them to one log (the capture's writing side).

    Args:
        store: an open store, or ``None`` to open ``where`` at the first write.
        where: the log's path or URL (``None``: ``AGENTTRAIL_DATABASE_URL``, else
            ``./agenttrail.db``).
        session: the session every exchange goes to when none is chosen for it.
        conversations: how many conversations are followed at once.
    """

    def __init__(
        self,
        store: LogStore | None,
        where: str | Path | None,
        session: NewSession | None,
        conversations: int,
    ) -> None:
        self._store = store
        self._owned = store is None
        self._where = where
        self.session = session
        self._index = Index(conversations)
        self._lock = threading.Lock()
        self._scratch = {reader: reader(_SOURCE) for reader in READERS}
        self._numbers: dict[str, int] = {}

    def close(self) -> None:
        """Close the store if this appender opened it (a later write opens it again)."""
        with self._lock:
            if self._owned and self._store is not None:
                self._store.close()
                self._store = None

    def write_group(self, items: Sequence[Queued]) -> list[str | None]:
        """Write exchanges queued by :meth:`agenttrail.ingest.capture.Capture.record` (a
        writer's handler), all in one transaction (one durable commit for them all); never
        raises.

        A response that does not read as its API's (the caller got it as it was) is recorded
        as what it is to the log: the request, then an ``error`` saying why its answer is not
        there, in the conversation's session. When the shared transaction fails, nothing of
        it is in the log: each exchange is then written alone, so that one that cannot be
        written does not take the others with it (their conversations are read back from the
        log first, as after a restart).

        Returns:
            One per item, in order: why it was not recorded (one line, for the
            ``agenttrail.capture`` logger), or ``None`` when it was (and is durable).
        """
        with self._lock:
            reasons: list[str | None] = [None] * len(items)
            pending: list[tuple[int, _Pending]] = []
            for i, item in enumerate(items):
                try:
                    prepared = self._prepare_readable(item[0], item[1] or self.session)
                except Exception as e:
                    reasons[i] = _unrecorded(item[0], e)
                else:
                    if prepared is not None:
                        pending.append((i, prepared))
            if not pending:
                return reasons
            try:
                self._open().append_sessions([p.batch for _, p in pending])
            except Exception as e:
                self._undo([p.followed for _, p in pending])
                if len(pending) == 1:
                    reasons[pending[0][0]] = _unrecorded(items[pending[0][0]][0], e)
                    return reasons
                self._index.recovered = False  # read the tips back from what the log holds
                for i, _ in pending:
                    reasons[i] = self._write_alone(items[i])
            return reasons

    def _write_alone(self, item: Queued) -> str | None:
        """:meth:`write_group` of one item (the caller holds the lock)."""
        try:
            prepared = self._prepare_readable(item[0], item[1] or self.session)
            if prepared is not None:
                try:
                    self._open().append_sessions([prepared.batch])
                except BaseException:
                    self._undo([prepared.followed])
                    raise
        except Exception as e:
            return _unrecorded(item[0], e)
        return None

    def _prepare_readable(
        self, exchange: HttpExchange, chosen: NewSession | None
    ) -> _Pending | None:
        """:meth:`_prepare`; an answer unreadable as its API's is prepared as a failed
        exchange (docstring of :meth:`write_group`)."""
        try:
            return self._prepare(exchange, chosen)
        except (FormatError, ValueError) as e:
            if exchange.status is None:
                raise
            why = f"upstream answered HTTP {exchange.status}, unreadable as its API's: {e}"
            failed = replace(
                exchange, status=None, response_headers=(), response_body=b"", error=why
            )
            return self._prepare(failed, chosen)

    def write(self, exchange: HttpExchange, session: NewSession | None) -> list[Appended]:
        """Write ``exchange`` now, alone, in its own transaction
        (:meth:`agenttrail.ingest.capture.Capture.write` gives what and what it raises)."""
        with self._lock:
            prepared = self._prepare(exchange, session or self.session)
            if prepared is None:
                return []
            session_id, found, create = prepared.batch
            try:
                return self._open().append_batch(session_id, found, create=create)
            except BaseException:
                self._undo([prepared.followed])
                raise

    def _open(self) -> LogStore:
        if self._store is None:
            self._store = open_store(self._where)
        return self._store

    def _prepare(self, exchange: HttpExchange, chosen: NewSession | None) -> _Pending | None:
        """Read ``exchange`` into the events to append (``None``: an endpoint capture does
        not record) and move its conversation's state past it, as if appended: a failed
        append is undone with :meth:`_undo`."""
        reader = reader_for(exchange.url)
        if reader is None:
            return None
        record, request = record_of(exchange)
        store = self._open()
        # what identifies the request's messages: to recognise the conversation, and after
        # an answer cut short to let the same request, sent again, continue it
        scratch = self._scratch[reader]
        prints = scratch.prints(record)
        scratch.take_warnings()  # the exchange's own reading says them
        followed = self._recognise(store, reader, prints, request, chosen)
        try:
            return self._events(store, followed, exchange, record, prints, chosen)
        except BaseException:
            self._undo([followed])
            raise

    def _undo(self, followed: Sequence[Followed]) -> None:
        """Forget the conversations of appends that failed: their state may be ahead of the
        log now (a conversation continued later is read back from the log's keys)."""
        for f in followed:
            self._index.forget(f)
            self._numbers.pop(f.session_id, None)

    def _recognise(
        self,
        store: LogStore,
        reader: type[LiveConversation],
        prints: list[Hashable],
        request: dict[str, Any],
        chosen: NewSession | None,
    ) -> Followed:
        """The conversation a request whose messages have ``prints`` (and whose body is
        ``request``) continues, or a new one (docs/capture.md, How conversations are
        recognised)."""
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

    def _events(
        self,
        store: LogStore,
        followed: Followed,
        exchange: HttpExchange,
        record: dict[str, Any],
        prints: list[Hashable],
        chosen: NewSession | None,
    ) -> _Pending:
        session_id = followed.session_id
        if session_id not in self._numbers:
            self._numbers[session_id] = last_number(store.event_keys(session_id))
        number = self._numbers[session_id] + 1
        conversation = followed.conversation
        found = conversation.add_record(record, number)
        for warning in conversation.take_warnings():
            _LOG.debug("agenttrail capture: %s: %s", named(exchange), warning)
        found += _failure(exchange, record, conversation, number)
        response_ids = []
        for event in found:
            payload = event.payload
            if isinstance(payload.get("meta"), dict) and payload.get("role") == "assistant":
                payload["meta"] = {**payload["meta"], "duration_ms": exchange.duration_s * 1000}
                if isinstance(payload.get("responseId"), str):
                    response_ids.append(payload["responseId"])
        cut = any(e.payload.get("type") == "error" and e.payload.get("incomplete") for e in found)
        retried = prints if cut else None
        tip = self._index.follow(followed, conversation.provider, response_ids, retried)
        # Only the exchange's last event carries a key: the tip after it, read back after a
        # restart (._recognition). A nonce keeps it unique; the others need none (an exchange
        # is written once), and each key costs the append a lookup.
        keyed = [NewEvent(e.payload, e.created_at) for e in found]
        if keyed:
            last = found[-1]
            nonce = secrets.token_hex(4)
            keyed[-1] = NewEvent(last.payload, last.created_at, event_key(last.key, nonce, tip))
        create = _new_session(followed, exchange, record, chosen)
        # the session's last exchange number, most recent last; as many sessions are kept as
        # conversations are followed (one forgotten is read back from its keys if it returns)
        self._numbers.pop(session_id, None)
        self._numbers[session_id] = number
        while len(self._numbers) > self._index.limit:
            del self._numbers[next(iter(self._numbers))]
        return _Pending(followed, (session_id, keyed, create))


def _unrecorded(exchange: HttpExchange, error: Exception) -> str:
    """Why ``exchange`` was not recorded, in one line."""
    return f"{named(exchange)} not recorded: {type(error).__name__}: {error}"


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
