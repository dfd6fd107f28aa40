"""Importing agenttrail's own export of one session as it is read.

An import reads every file whole before it writes (:mod:`agenttrail.ingest.importer`), so
it holds every event at once: as parsed, as stored and as checked, several times the file's
size (317 MB for an 80 MB export of 100,000 events). An export file of one session the log
does not hold, the common case (a session moved to another machine, a backup restored), is
instead read a block at a time and checked and appended a chunk at a time in one
transaction (:meth:`LogStore.append_chunks`), so that a refused line anywhere still leaves
nothing written; what it holds is a block and a chunk (docs/benchmarks.md, Scale, Stop 43).
Anything else (standard input, gzip, several sessions) is imported whole, as before, and so
is a file this reading refuses: the whole reading names what is wrong with it, so every
error is the one it always was.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from agenttrail.errors import (
    AgentTrailError,
    FormatError,
    InputError,
    SessionExists,
    StoreError,
)
from agenttrail.formats import open_input
from agenttrail.formats._common import iter_jsonl
from agenttrail.formats.jsonl import ExportLines
from agenttrail.ingest import traces
from agenttrail.limits import import_limit
from agenttrail.log.store import Appended, LogStore
from agenttrail.model import Event, NewEvent, NewSession, NewTrace, is_session_id

__all__ = ["CHUNK_EVENTS", "Opening", "append", "check_unredacted", "opening"]

CHUNK_EVENTS = 2_000
"""Events read, checked and appended at a time: enough that the store's work per append
(the session's head, its row) is spread thin, few enough that a chunk of 100 KiB results
is a few hundred MB at most."""

BLOCK_BYTES = 1 << 22
"""Bytes of the file read at a time (4 MiB): the file is never held whole."""

FIRST_LINE_BYTES = 1 << 20
"""How much of a file is read to tell whether it is an export this module reads: its first
line, which holds the session's fields and its first event."""


class _ReadWhole(Exception):
    """The file is not an export of one new session in chain v2: it is imported whole."""


class Opening(NamedTuple):
    """The first line of an export :func:`append` reads (:func:`opening`)."""

    session_id: str
    header: NewSession
    """The session's fields, as the line states them (its chain's genesis)."""


def opening(path: Path) -> Opening | None:
    """The first line of ``path``, when it opens an export :func:`append` reads, else
    ``None``: a regular file whose first line (at most :data:`FIRST_LINE_BYTES`) is a
    chain v2 line with its hash and the session's fields, of a session id that follows the
    id rule. Reads one line, so that a file of another format is read once, whole."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as file:
            line = file.readline(FIRST_LINE_BYTES)
        number, record = next(iter_jsonl(path, line.rstrip(b"\n")))
        if type(record) is not dict or number != 1:
            return None
        if not all(name in record for name in ("session", "salt", "hash")):
            return None
        if not is_session_id(record.get("session_id")):
            return None
        lines = ExportLines(path)
        session_id, _ = lines.event(number, record)
    except (OSError, AgentTrailError, StopIteration):
        return None
    return Opening(session_id, lines.header(session_id))


def append(
    store: LogStore, path: Path, opening: Opening, *, max_bytes: int | None = None
) -> int | None:
    """Append the session ``path`` holds a chunk at a time, in one transaction, when it holds
    that one session only and the log does not hold it.

    Args:
        store: the log to write.
        path: the file, whose first line is ``opening`` (:func:`opening`).
        max_bytes: largest file read, as :func:`agenttrail.ingest.importer.import_paths`.

    Returns:
        The events written; ``None`` when the file is not such an export (several sessions,
        a re-chained one, one the log holds) or is refused (a line altered or malformed, a
        secret the log would redact, an event over the payload limit): nothing is written,
        and the caller reads the file whole, which names what is wrong with it.

    Raises:
        StoreError: the database failed, or another writer created the session meanwhile
            (nothing written).
    """
    session_id = opening.session_id
    if store.head(session_id) is not None:
        return None  # imported before: the whole reading compares it line by line
    limit = import_limit(max_bytes)
    reading: list[_Reading] = []

    def chunks() -> Iterator[list[NewEvent]]:
        reading[:] = [_Reading(store, path, session_id)]
        return reading[0].chunks(_lines(path, limit))

    def build(appended: Sequence[Appended], session: Callable[[], list[Event]]) -> list[NewTrace]:
        return reading[0].end(appended, session)

    try:
        done = store.append_chunks(session_id, chunks, build, create=opening.header, redacted=True)
    except (_ReadWhole, InputError, SessionExists):
        return None
    traces.log_written(done.traces)
    return len(done.appended)


class _Reading:
    """One reading of the file, in one attempt of the transaction."""

    def __init__(self, store: LogStore, path: Path, session_id: str) -> None:
        self.store, self.path, self.session_id = store, path, session_id
        self.lines = ExportLines(path)
        self.envelopes = False

    def chunks(self, lines: Iterator[tuple[int, Any]]) -> Iterator[list[NewEvent]]:
        """The file's events, a chunk at a time, each checked as the whole reading checks
        them (:func:`check_unredacted`: the chain covers them as
        exported, so the store redacts none of them)."""
        chunk: list[NewEvent] = []
        count = 0
        for number, line in lines:
            session_id, event = self.lines.event(number, line)
            if session_id != self.session_id or session_id in self.lines.rechained:
                raise _ReadWhole
            if count + len(chunk) and "session" in line:  # fields stated again, later: edited
                raise _ReadWhole
            chunk.append(event)
            if len(chunk) == CHUNK_EVENTS:
                yield self._checked(chunk, count + 1)
                count += len(chunk)
                chunk = []
        if chunk:
            yield self._checked(chunk, count + 1)

    def _checked(self, chunk: list[NewEvent], first: int) -> list[NewEvent]:
        check_unredacted(self.store, self.path, chunk, first)
        self.envelopes = self.envelopes or traces.holds_envelopes(chunk)
        return chunk

    def end(
        self, appended: Sequence[Appended], session: Callable[[], list[Event]]
    ) -> list[NewTrace]:
        """Check the whole session once its last chunk is appended, before the commit: its
        lines end where its first line says, each line's hash is the one the store computed
        (:class:`agenttrail.formats._common.ExportedChain`); then the trace rows it calls
        for, which only an envelope among its results does (it is new: ``_trace_rows`` of
        :mod:`agenttrail.ingest.importer`)."""
        chain = self.lines.chain(self.session_id)
        if not appended or appended[0].seq != 1 or any(done.duplicate for done in appended):
            raise StoreError(
                f"session {self.session_id}: the export's events were not written from seq 1 "
                "as exported (another writer appended at the same time?)"
            )
        chain.check(1, [done.hash for done in appended])
        if not self.envelopes:
            return []
        return traces.rows_for(self.session_id, session())


def _lines(path: Path, limit: int) -> Iterator[tuple[int, Any]]:
    """:func:`iter_jsonl` of the file, read :data:`BLOCK_BYTES` at a time (each block ends
    at a line's end; a line never spans two), numbered as in the whole file.

    Raises:
        _ReadWhole: the file cannot be read, is not a regular file or is over ``limit``
            bytes (:func:`agenttrail.formats.open_input`), or a block but the first begins
            with a byte order mark (which only the file's start may hold): the whole reading
            refuses it, naming why.
    """
    try:
        file, _ = open_input(path, limit)
    except AgentTrailError:
        raise _ReadWhole from None
    with file:
        rest, size, number = b"", 0, 0
        while block := _read(file):
            size += len(block)
            if size > limit:
                raise _ReadWhole
            end = block.rfind(b"\n") + 1
            if not end:  # a line longer than a block
                rest += block
                continue
            lines, rest = rest + block[:end], block[end:]
            yield from _numbered(path, lines, number)
            number += lines.count(b"\n")
        if rest:
            yield from _numbered(path, rest, number)


def _read(file: BinaryIO) -> bytes:
    try:
        return file.read(BLOCK_BYTES) or b""
    except OSError:
        raise _ReadWhole from None


def _numbered(path: Path, lines: bytes, before: int) -> Iterator[tuple[int, Any]]:
    if before and lines.startswith(codecs.BOM_UTF8):
        raise _ReadWhole
    for number, value in iter_jsonl(path, lines):
        yield before + number, value


def check_unredacted(
    store: LogStore, path: Path, events: Sequence[NewEvent], first: int = 1
) -> None:
    """Refuse an export holding a secret the log would redact: its chain hashes cover the
    payloads as exported, so it cannot be stored redacted (docs/redaction.md, Import).
    ``events`` are the session's from its ``first`` (named in the error).

    Raises:
        FormatError: an event holds such a secret; names it, and the first secret's kind
            and path.
    """
    data = [event.data for event in events if event.data is not None]
    if len(data) == len(events) and not store.redactor.may_change(data):
        return  # the first look over all of them at once found no secret (most exports)
    for index, event in enumerate(events, start=first):
        if found := store.redactor.finds(event.payload, event.data)[:1]:
            raise FormatError(
                f"event {index} holds a secret ({found[0]['kind']} at {found[0]['path']}) and an "
                "export's chain hashes cover it, so it cannot be stored redacted; import with "
                "--no-redact, or drop its hash fields to import it re-chained (docs/log-format.md)",
                path=str(path),
            )
