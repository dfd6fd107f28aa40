"""agenttrail's own JSON Lines export: one event per line, chain hashes included.

Each line is one JSON object (``docs/log-format.md``, Export)::

    {"session_id": str, "seq": int, "created_at": str, "actor": str, "payload": {...},
     "hash": "<64 hex digits>", "anomalies": [str, ...]}

``actor`` is the stored actor or the derived one (it is not read back: the payload holds the
stored actor, if any). ``anomalies`` names why a tool call or result is not paired
(:class:`agenttrail.views.pairing.AnomalyKind`, ``[]`` for none), derived from the whole
session at export time; it is not read back either, nor hashed. Export → import → export
gives identical bytes: the session id, seq, ``created_at`` and payload survive, so every chain
hash and every anomaly is reproduced, and import refuses a line whose hash does not match, so
an altered export cannot be imported as genuine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from agenttrail.codec import encode_payload, json_line
from agenttrail.errors import FormatError, InputError
from agenttrail.formats._common import ImportedSession, iter_jsonl
from agenttrail.log.chain import GENESIS_HASH, ChainHasher, chain_hasher
from agenttrail.model import Event, LogReader, NewEvent, NewSession
from agenttrail.views.pairing import SeqPairing, anomaly_names, pair_refs, tool_ref

__all__ = ["NAME", "event_record", "jsonl_from_events", "jsonl_from_log", "read", "sniff"]

NAME = "jsonl"

_REQUIRED = ("session_id", "seq", "created_at", "payload", "hash")

_CREATED_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
"""The one ``created_at`` form the store writes (ASCII digits only: it is hashed as ASCII)."""


def event_record(event: Event, anomalies: Sequence[str] | None = None) -> dict[str, Any]:
    """An event as the export writes it: ``session_id``, ``seq``, ``created_at``, ``actor``
    (stored or derived), ``payload``, ``hash`` (hex) and, when given, ``anomalies`` (names
    from :func:`agenttrail.views.pairing.anomaly_names`). The REST event JSON is the same;
    the live feed sends it without ``anomalies``, which an append alone cannot know."""
    record = {
        "session_id": event.session_id,
        "seq": event.seq,
        "created_at": event.created_at,
        "actor": event.actor,
        "payload": event.payload,
        "hash": event.hash.hex(),
    }
    if anomalies is not None:
        record["anomalies"] = list(anomalies)
    return record


def jsonl_from_events(
    events: Iterable[Event], *, pairing: SeqPairing | None = None
) -> Iterator[str]:
    """One export line (no newline) per event, in the order given.

    Args:
        events: one session's events.
        pairing: the session's pairing, for ``anomalies``; by default ``events`` are paired
            (and held in memory to be written after).
    """
    if pairing is None:
        events = list(events)
        pairing = pair_refs(ref for e in events if (ref := tool_ref(e)) is not None)
    for event in events:
        yield json_line(event_record(event, anomaly_names(pairing.anomalies, event.seq)))


def jsonl_from_log(reader: LogReader, session_id: str) -> Iterator[str]:
    """The export of a session read from ``reader``, without holding its events in memory.

    The session is read twice: once for its tool calls and results (pairing reads ids
    only), then again for the lines, up to the last seq the first read saw. The log is
    append-only, so seqs 1..N are the same events both times; an append in between is left
    for the next export. An empty or unknown session gives no lines.
    """
    refs = []
    last = 0
    for event in reader.read(session_id):
        last = event.seq
        ref = tool_ref(event)
        if ref is not None:
            refs.append(ref)
    if last:
        yield from jsonl_from_events(reader.read(session_id, limit=last), pairing=pair_refs(refs))


def sniff(path: Path, data: bytes) -> bool:
    """True when the first line is an object with this export's fields."""
    first = data.lstrip().split(b"\n", 1)[0]
    return first.startswith(b"{") and all(f'"{k}"'.encode() in first for k in _REQUIRED)


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read an export back into sessions, checking every line's chain hash.

    Raises:
        FormatError: a line lacks a field, seq does not run 1, 2, 3 … per session, or a hash
            does not match the line's contents; names the line.
    """
    sessions: dict[str, tuple[list[NewEvent], list[bytes]]] = {}
    hashers: dict[str, ChainHasher] = {}
    where = str(path)
    for number, line in iter_jsonl(path, data):
        record = _record(line, where, number)
        session_id = record["session_id"]
        events, hashes = sessions.setdefault(session_id, ([], []))
        seq = len(events) + 1
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
        prev = hashes[-1] if hashes else GENESIS_HASH
        hash_row = hashers.get(session_id) or hashers.setdefault(
            session_id, chain_hasher(session_id)
        )
        digest = hash_row(prev, seq, record["created_at"], stored)
        if digest.hex() != record["hash"]:
            raise FormatError(
                "hash does not match the line's contents: the export was altered",
                path=where,
                line=number,
                field="hash",
            )
        events.append(NewEvent(record["payload"], record["created_at"]))
        hashes.append(digest)
    return [
        ImportedSession(NewSession(id=sid), events, exported_hashes=hashes)
        for sid, (events, hashes) in sessions.items()
    ]


def _record(line: Any, where: str, number: int) -> dict[str, Any]:
    if not isinstance(line, dict):
        raise FormatError("expected a JSON object", path=where, line=number)
    for name in _REQUIRED:
        if name not in line:
            raise FormatError("missing", path=where, line=number, field=name)
    kinds = {"session_id": str, "seq": int, "created_at": str, "payload": dict, "hash": str}
    for name, kind in kinds.items():
        if not isinstance(line[name], kind) or isinstance(line[name], bool):
            raise FormatError(f"expected {kind.__name__}", path=where, line=number, field=name)
    if not _CREATED_AT.fullmatch(line["created_at"]):
        raise FormatError(
            "not YYYY-MM-DDTHH:MM:SS.ffffffZ", path=where, line=number, field="created_at"
        )
    try:
        line["session_id"].encode("utf-8")  # hashed as UTF-8 (agenttrail.log.chain)
    except UnicodeEncodeError:
        raise FormatError(
            "not valid Unicode text (a lone surrogate)", path=where, line=number, field="session_id"
        ) from None
    return line
