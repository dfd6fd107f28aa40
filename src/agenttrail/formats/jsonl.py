"""agenttrail's own JSON Lines export: one event per line, chain hashes included.

Each line is one JSON object (``docs/log-format.md``, Export)::

    {"session_id": str, "seq": int, "created_at": str, "actor": str, "payload": {...},
     "hash": "<64 hex digits>", "anomalies": [str, ...]}

``actor`` is the stored actor or the derived one (it is not read back: the payload holds the
stored actor, if any). ``anomalies`` names why a tool call or result is not paired
(:class:`agenttrail.views.pairing.AnomalyKind`, ``[]`` for none), derived from the whole
session at export time; it is not read back, nor hashed. Two optional fields follow: ``key``,
the event's idempotency key when it has one, and, on the session's first line, ``session``:
``{title, agent, user, workspace, started, metadata}``. Export → import → export gives
identical bytes: the session id, seq, ``created_at``, payload, keys and session fields
survive, so every chain hash and every anomaly is reproduced, and import refuses a line whose
hash does not match, so an altered export cannot be imported as genuine (the chain covers
neither ``key`` nor ``session``). An export without them (older agenttrail) imports as before.

A session whose lines lack ``hash``, or whose ``created_at`` is RFC 3339 in another form than
the stored one (an offset, no or more fraction digits, lowercase ``t``/``z``), cannot be
reproduced: it is imported as a new, freshly chained session, times normalised, with
``metadata.rechained`` saying why and a warning. Any ``hash`` it does carry is still checked
against the lines as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from agenttrail.codec import encode_payload, json_line, normalize_timestamp
from agenttrail.errors import FormatError, InputError, InvalidTimestamp
from agenttrail.formats._common import (
    ExportedChain,
    ImportedSession,
    first_line_bytes,
    iter_jsonl,
)
from agenttrail.log.chain import GENESIS_HASH, chain_hasher
from agenttrail.log.digests import SALT_BYTES, chain_rows_v2, session_genesis
from agenttrail.model import Event, LogReader, NewEvent, NewSession, Session
from agenttrail.views.pairing import SeqPairing, anomaly_names, pair_refs, tool_refs

__all__ = [
    "NAME",
    "ExportLines",
    "event_record",
    "export_hashes",
    "jsonl_from_events",
    "jsonl_from_log",
    "read",
    "sniff",
]

NAME = "jsonl"

_REQUIRED = ("session_id", "seq", "created_at", "payload")
"""Fields every line has; ``hash`` is checked when present (module docstring)."""

_CREATED_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
"""The one ``created_at`` form the store writes (ASCII digits only: it is hashed as ASCII)."""

_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
"""RFC 3339 ``date-time`` (section 5.6, with the space its note allows): other forms a
re-chained session may carry."""


def event_record(event: Event, anomalies: Sequence[str] | None = None) -> dict[str, Any]:
    """An event as the export writes it: ``session_id``, ``seq``, ``created_at``, ``actor``
    (stored or derived), ``payload``, ``hash`` (hex), for a chain v2 event its ``salt`` (hex)
    or, erased, ``erased: true`` and its ``digest`` (hex), and, when given, ``anomalies``
    (names from :func:`agenttrail.views.pairing.anomaly_names`). The REST event JSON is the same;
    the live feed sends it without ``anomalies``, which an append alone cannot know."""
    record = {
        "session_id": event.session_id,
        "seq": event.seq,
        "created_at": event.created_at,
        "actor": event.actor,
        "payload": event.payload,
        "hash": event.hash.hex(),
    }
    if event.erased:
        record["erased"] = True
        record["digest"] = event.digest.hex() if event.digest else None
    elif event.salt is not None:
        record["salt"] = event.salt.hex()
    if anomalies is not None:
        record["anomalies"] = list(anomalies)
    return record


_SESSION_FIELDS = ("title", "agent", "user", "workspace", "started", "metadata")
"""The session's fields an export carries on its first line (``session``)."""


def jsonl_from_events(
    events: Iterable[Event],
    *,
    pairing: SeqPairing | None = None,
    session: Session | None = None,
    keys: Mapping[int, str] | None = None,
    head: tuple[int, bytes] | None = None,
) -> Iterator[str]:
    """One export line (no newline) per event, in the order given.

    Args:
        events: one session's events.
        pairing: the session's pairing, for ``anomalies``; by default ``events`` are paired
            (and held in memory to be written after).
        session: the session row; its fields go on the line of seq 1 as ``session``, with
            ``head_seq`` and ``head_hash`` (hex): the seq and hash of the export's last line,
            ``head`` (by default the last of ``events`` when they are paired here), so that
            import can tell an export cut short at a line's end.
        keys: seq → idempotency key (``LogStore.event_keys``); each goes on its line as ``key``.
    """
    if pairing is None:
        events = list(events)
        pairing = pair_refs(ref for e in events for ref in tool_refs(e))
        if head is None and events:
            head = (events[-1].seq, events[-1].hash)
    for event in events:
        record = event_record(event, anomaly_names(pairing.anomalies, event.seq))
        key = (keys or {}).get(event.seq)
        if key is not None:
            record["key"] = key
        if session is not None and event.seq == 1 and event.session_id == session.id:
            record["session"] = {name: getattr(session, name) for name in _SESSION_FIELDS}
            if head is not None:
                record["session"] |= {"head_seq": head[0], "head_hash": head[1].hex()}
        yield json_line(record)


def jsonl_from_log(
    reader: LogReader,
    session_id: str,
    *,
    session: Session | None = None,
    keys: Mapping[int, str] | None = None,
) -> Iterator[str]:
    """The export of a session read from ``reader``, without holding its events in memory.

    The session is read twice: once for its tool calls and results (pairing reads ids
    only), then again for the lines, up to the last seq the first read saw. The log is
    append-only, so seqs 1..N are the same events both times; an append in between is left
    for the next export. An empty or unknown session gives no lines. ``session`` and ``keys``
    are as in :func:`jsonl_from_events`.
    """
    refs = []
    last, last_hash = 0, b""
    for event in reader.read(session_id):
        last, last_hash = event.seq, event.hash
        refs += tool_refs(event)
    if last:
        events = reader.read(session_id, limit=last)
        pairing = pair_refs(refs)
        head = (last, last_hash)
        yield from jsonl_from_events(events, pairing=pairing, session=session, keys=keys, head=head)


def sniff(path: Path, data: bytes) -> bool:
    """True when the first line is an object with this export's fields."""
    first = first_line_bytes(data)  # not data.lstrip().split(): two copies of the file
    return first.startswith(b"{") and all(f'"{k}"'.encode() in first for k in _REQUIRED)


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read an export back into sessions (:class:`ExportLines`, line by line).

    The chain hash each line states is not computed here: the store computes every event's
    hash as it writes it, and the importer compares (:class:`ExportedChain`, kept with each
    session), so that an import computes each hash once. A re-chained session's hashes (a
    new chain) are computed and checked here, against its lines as written.

    Raises:
        FormatError: a line lacks a field, seq does not run 1, 2, 3 … per session, a
            re-chained session's hash does not match its line's contents, or a session's
            lines end elsewhere than its ``session`` field says; names the line.
    """
    lines = ExportLines(path)
    sessions: dict[str, list[NewEvent]] = {}
    for number, line in iter_jsonl(path, data):
        session_id, event = lines.event(number, line)
        sessions.setdefault(session_id, []).append(event)
    return [lines.session(sid, events) for sid, events in sessions.items()]


class ExportLines:
    """An export read one line at a time (:func:`read`; ``agenttrail.ingest.export`` writes
    a one-session export as it reads it): each line's event, checked, and what the session's
    end is checked against, its lines' hashes and numbers. The events are the caller's to
    keep (or not)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.marks: dict[str, list[tuple[int, str | None, str]]] = {}
        """Each session's lines: the line, the hash it states and its created_at as written."""
        self.headers: dict[str, NewSession] = {}
        """Each session's ``session`` field (the last line's that states one; an export
        writes it on the first), where it has one."""
        self.rechained: dict[str, set[str]] = {}
        """Why each session that cannot be reproduced is imported as a new chain."""
        self._versions: dict[str, int] = {}
        self._heads: dict[str, tuple[int, str] | None] = {}

    def event(self, number: int, line: Any) -> tuple[str, NewEvent]:
        """The session id and event of line ``number`` (parsed JSON ``line``).

        Raises:
            FormatError: the line lacks a field or holds one of the wrong type or form, or
                its seq is not the next of its session; names the line and the field.
        """
        where = self.path
        record = _record(line, where, number)
        session_id = record["session_id"]
        marks = self.marks.get(session_id)
        if marks is None:
            marks = self.marks[_checked_id(session_id, where, number)] = []
        seq = len(marks) + 1
        if record["seq"] != seq:
            raise FormatError(
                f"seq {record['seq']} where {seq} was expected for session {session_id}",
                path=where,
                line=number,
                field="seq",
            )
        try:
            stored = encode_payload(record["payload"])
        except InputError as e:
            raise FormatError(str(e), path=where, line=number, field="payload") from None
        if "session" in record:
            self.headers[session_id] = _session(record["session"], session_id, where, number)
            self._heads[session_id] = _head(record["session"], where, number)
        version = self._versions.setdefault(session_id, 2 if "salt" in record else 1)
        salt = _salt(record, version, where, number)
        created_at = _created_at(record["created_at"], where, number)
        if created_at != record["created_at"]:
            self.rechained.setdefault(session_id, set()).add("created_at in another RFC 3339 form")
        if "hash" not in record:
            self.rechained.setdefault(session_id, set()).add("lines without hash")
        marks.append((number, record.get("hash"), record["created_at"]))
        kind = record["payload"].get("type")
        return session_id, NewEvent.from_data(
            stored, created_at, record.get("key"), salt, type=kind
        )

    def header(self, session_id: str) -> NewSession:
        """The session's fields as its export states them, in its chain version."""
        header = self.headers.get(session_id, NewSession(id=session_id))
        return replace(header, chain_version=self._versions[session_id])

    def chain(self, session_id: str) -> ExportedChain:
        """The hashes the session's lines state, once its last line is read: refused when
        its lines end elsewhere than its ``session`` field says (:func:`_check_head`).

        Raises:
            FormatError: the session was cut short or made longer; names its last line.
        """
        chain = self._stated(session_id)
        _check_head(session_id, self._heads.get(session_id), chain, session_id in self.rechained)
        return chain

    def session(self, session_id: str, events: list[NewEvent]) -> ImportedSession:
        """The session whose events (all of them, in order) are ``events``: as exported, or
        as a new chain when it cannot be reproduced (its stated hashes checked here).

        Raises:
            FormatError: as :meth:`chain`, or a re-chained line's hash does not match it.
        """
        header = self.header(session_id)
        if session_id not in self.rechained:
            stated = session_id in self.headers
            chain = self.chain(session_id)
            return ImportedSession(header, events, exported=chain, session_stated=stated)
        lines = self.marks[session_id]  # a new chain; the hashes its lines state still checked
        pairs = zip(events, lines, strict=True)
        rows = cast(_Rows, [(at, e.data, e.salt) for e, (_, _, at) in pairs])
        self._stated(session_id).check(1, _hashes(session_id, header, rows))
        self.chain(session_id)
        why = "; ".join(sorted(self.rechained[session_id]))
        metadata = {**header.metadata, "rechained": why}
        keyed = [  # keys make a second import of the same file write nothing
            NewEvent(e.payload, e.created_at, e.key or f"jsonl:seq{n}", data=e.data)
            for n, e in enumerate(events, start=1)
        ]
        warning = (
            f"{self.path}: session {session_id}: {why}: imported as a new chain "
            "(metadata.rechained)"
        )
        return ImportedSession(replace(header, metadata=metadata), keyed, [warning])

    def _stated(self, session_id: str) -> ExportedChain:
        lines = self.marks[session_id]
        return ExportedChain([h for _, h, _ in lines], [n for n, _, _ in lines], self.path)


def export_hashes(imported: ImportedSession, count: int) -> list[bytes]:
    """The chain hashes of the first ``count`` events of a session :func:`read` gave as an
    export, computed from its lines as the store computes them when it writes the session
    anew. For what an import checks without writing it: the lines of a session the log
    holds already, and every session of an import of several, checked before any is written
    (:class:`ExportedChain` checks the rest against the store's own hashes)."""
    session = imported.session
    assert session.id is not None, "read gives every session its id"
    # read gives each event its created_at and its bytes
    rows = cast(_Rows, [(e.created_at, e.data, e.salt) for e in imported.events[:count]])
    return _hashes(session.id, session, rows)


_Rows = list[tuple[str, bytes, Any]]
"""A session's rows as :func:`_hashes` hashes them: ``(created_at, payload, salt)``."""


def _hashes(session_id: str, header: NewSession, rows: _Rows) -> list[bytes]:
    """The chain hashes of a session's rows ``(created_at, payload, salt)`` from seq 1, in
    its chain version (docs/log-format.md): v2 from the genesis of ``header``'s fields."""
    if header.chain_version == 2:
        return chain_rows_v2(session_id, _genesis(session_id, header), 1, rows)[1]
    hash_row, prev, hashes = chain_hasher(session_id), GENESIS_HASH, []
    for seq, (created_at, stored, _) in enumerate(rows, start=1):
        prev = hash_row(prev, seq, created_at, stored)
        hashes.append(prev)
    return hashes


def _salt(record: dict[str, Any], version: int, where: str, number: int) -> bytes | None:
    """The salt of a v2 line (``None`` for a v1 line), checked.

    Raises:
        FormatError: an erased event (its payload is gone: such a session is copied with
            ``agenttrail migrate``, not imported), a v2 line without a salt of 32 bytes, or
            a salt in a v1 session.
    """
    if record.get("erased") is True:
        raise FormatError(
            "the event was erased: an export with erased events cannot be imported "
            "(agenttrail migrate copies such a session)",
            path=where,
            line=number,
            field="erased",
        )
    value = record.get("salt")
    if version == 1:
        if value is not None:
            raise FormatError("a salt in a v1 session", path=where, line=number, field="salt")
        return None
    try:
        salt = bytes.fromhex(value) if isinstance(value, str) else b""
    except ValueError:
        salt = b""
    if len(salt) != SALT_BYTES:
        raise FormatError(
            f"expected {SALT_BYTES} bytes in hex", path=where, line=number, field="salt"
        )
    return salt


def _genesis(session_id: str, header: NewSession) -> bytes:
    """``hash_0`` of a v2 session with the fields of its export's ``session`` field."""
    fields = (header.title, header.agent, header.user, header.workspace, header.started)
    return session_genesis(session_id, (*fields, json_line(header.metadata)))


def _created_at(value: str, where: str, number: int) -> str:
    """``value`` in the stored form: as it is, or an RFC 3339 time normalised."""
    if _CREATED_AT.fullmatch(value):
        return value
    if not _RFC3339.fullmatch(value):
        raise FormatError(
            "not an RFC 3339 date-time (e.g. 2026-06-24T10:00:05.000000Z)",
            path=where,
            line=number,
            field="created_at",
        )
    try:
        return normalize_timestamp(value.upper())
    except InvalidTimestamp as e:
        raise FormatError(str(e), path=where, line=number, field="created_at") from None


def _session(value: Any, session_id: str, where: str, number: int) -> NewSession:
    """The ``session`` field of an export line: the session's fields as exported."""
    if not isinstance(value, dict):
        raise FormatError("expected an object", path=where, line=number, field="session")
    for name in _SESSION_FIELDS[:-1]:
        if value.get(name) is not None and not isinstance(value[name], str):
            raise FormatError(
                "expected a string or null", path=where, line=number, field=f"session.{name}"
            )
    metadata = value.get("metadata", {})
    if not isinstance(metadata, dict):
        raise FormatError("expected an object", path=where, line=number, field="session.metadata")
    fields: dict[str, Any] = {name: value.get(name) for name in _SESSION_FIELDS[:-1]}
    return NewSession(id=session_id, metadata=metadata, **fields)


def _head(value: dict[str, Any], where: str, number: int) -> tuple[int, str] | None:
    """``(head_seq, head_hash)`` of an export's ``session`` field, checked; ``None`` in an
    export that has neither (an older agenttrail's)."""
    if "head_seq" not in value and "head_hash" not in value:
        return None
    seq, digest = value.get("head_seq"), value.get("head_hash")
    if type(seq) is not int or seq < 1:
        raise FormatError(
            "expected a seq (1 or more)", path=where, line=number, field="session.head_seq"
        )
    if not isinstance(digest, str) or not _HEX_HASH.fullmatch(digest):
        raise FormatError(
            "expected 64 hex digits", path=where, line=number, field="session.head_hash"
        )
    return seq, digest


_HEX_HASH = re.compile("[0-9a-f]{64}")


def _check_head(
    session_id: str, head: tuple[int, str] | None, chain: ExportedChain, rechained: bool
) -> None:
    """Refuse a session whose lines end elsewhere than its ``session`` field's head says: an
    export cut short at the end of a line reads as a shorter session whose every hash
    matches, so only the count it was written with tells it was cut. The last line's hash
    is the head's (its own hash is checked as it is written: :class:`ExportedChain`)."""
    if head is None:
        return
    seq, digest = head
    count, last_line = len(chain.hashes), chain.lines[-1]
    if count != seq:
        cut = "cut short" if count < seq else "longer than it was written"
        raise FormatError(
            f"session {session_id} ends at seq {count:,} where its first line says the "
            f"export holds {seq:,} events: the file was {cut}",
            path=chain.path,
            line=last_line,
        )
    if not rechained and chain.hashes[-1] != digest:
        raise FormatError(
            f"session {session_id}: the last line's hash is not the head_hash of its first "
            "line: the export, or the log it came from, was altered",
            path=chain.path,
            line=last_line,
            field="hash",
        )


_KINDS = (("session_id", str), ("seq", int), ("created_at", str), ("payload", dict), ("hash", str))
"""The type of each field of an export line."""


def _record(line: Any, where: str, number: int) -> dict[str, Any]:
    """``line`` when it has every field an export line has, each of its type (``hash`` and
    ``key`` may be absent); else raises ``FormatError`` naming the field. Whether the session
    id is text that can be hashed is checked once a session (:func:`_checked_id`)."""
    if (  # every field as the export writes it: one look each (JSON gives exact types)
        type(line) is dict
        and type(line.get("session_id")) is str
        and type(line.get("seq")) is int
        and type(line.get("created_at")) is str
        and type(line.get("payload")) is dict
        and type(line.get("hash", "")) is str
        and type(line.get("key", "")) is str
    ):
        return line
    if not isinstance(line, dict):
        raise FormatError("expected a JSON object", path=where, line=number)
    for name in _REQUIRED:
        if name not in line:
            raise FormatError("missing", path=where, line=number, field=name)
    if "key" in line and not isinstance(line["key"], str):
        raise FormatError("expected str", path=where, line=number, field="key")
    for name, kind in _KINDS:
        if name not in line:  # only hash may be missing (_REQUIRED)
            continue
        if not isinstance(line[name], kind) or isinstance(line[name], bool):
            raise FormatError(f"expected {kind.__name__}", path=where, line=number, field=name)
    return line  # a subclass of a field's type, which JSON does not give


def _checked_id(session_id: str, where: str, number: int) -> str:
    """``session_id``, which the chain hashes as UTF-8 (:mod:`agenttrail.log.chain`)."""
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:
        raise FormatError(
            "not valid Unicode text (a lone surrogate)", path=where, line=number, field="session_id"
        ) from None
    return session_id
