"""Write sessions read from files into the log: every file is parsed before anything is written.

Bad input (a missing file, a device or FIFO, a file over the import limit, malformed JSON, an
unknown format, a payload over the limit) raises before the first write, so the database is
exactly as before. Each session is then written in one transaction, its events with the trace
rows they call for. Importing the same file again writes nothing new: every imported event
carries an idempotency key, and agenttrail's own export is matched by its chain hashes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from agenttrail.codec import encode_payload
from agenttrail.errors import (
    FormatError,
    InputError,
    NotATranscript,
    PayloadTooLarge,
    SessionExists,
    SessionNotFound,
    StoreError,
)
from agenttrail.formats import (
    DEFAULT_MAX_IMPORT_BYTES,
    ImportedSession,
    read_data,
    read_file,
    read_stream,
)
from agenttrail.formats._common import content_session_id, title_from
from agenttrail.formats.jsonl import export_hashes
from agenttrail.ingest import export, reimport, traces
from agenttrail.ingest.export import Opening
from agenttrail.limits import import_limit
from agenttrail.log.store import Appended, LogStore, TraceBuilder
from agenttrail.model import (
    SESSION_ID_RULE,
    UNDATED,
    UNDATED_NOTE,
    Event,
    NewEvent,
    NewSession,
    NewTrace,
    is_session_id,
)

__all__ = [
    "DEFAULT_MAX_IMPORT_BYTES",
    "STDIN",
    "ImportReport",
    "fitting_id",
    "import_export",
    "import_paths",
    "import_sessions",
    "read_paths",
    "write_sessions",
    "write_together",
]


STDIN = Path("-")
"""The path that stands for standard input in :func:`read_paths` (``agenttrail import -``)."""

STDIN_NAME = "<stdin>"
"""What errors, reports and content-derived ids call standard input."""


@dataclass(frozen=True)
class ImportReport:
    """What importing one session did."""

    path: Path
    """The file the session came from."""
    session_id: str
    """The session written to (new or existing)."""
    written: int
    """Events appended."""
    skipped: int
    """Events already in the log (same idempotency key or same chain hash)."""
    warnings: list[str] = field(default_factory=list)
    """Problems in the source that did not stop the import."""


def import_paths(
    store: LogStore,
    paths: Iterable[Path],
    *,
    format: str | None = None,
    max_bytes: int | None = None,
) -> list[ImportReport]:
    """Import files into the log, one transaction per session (an export of one new
    session: read as it is written, :func:`import_export`).

    Args:
        store: the log to write.
        paths: regular files to read; each may hold one or more sessions.
        format: a format name (``agenttrail.formats.FORMATS``) or ``None`` to detect.
        max_bytes: largest file read, in bytes; ``None`` for ``AGENTTRAIL_MAX_IMPORT_BYTES``,
            else :data:`DEFAULT_MAX_IMPORT_BYTES`.

    Returns:
        One report per session, in file order.

    Raises:
        FormatError: a file is missing, not a regular file, over the import limit, empty, of
            unknown format or malformed, or holds a payload that cannot be stored; raised
            before anything is written.
        InputError: an export's session already exists with different events, or the import
            limit is not a positive integer.
    """
    paths = list(paths)
    if len(paths) == 1 and paths[0] != STDIN and format in (None, "jsonl"):
        report = import_export(store, paths[0], max_bytes=max_bytes)
        if report is not None:
            return [report]
    parsed = read_paths(
        paths, format=format, max_payload_bytes=store.max_payload_bytes, max_bytes=max_bytes
    )
    return write_sessions(store, parsed)


def import_export(
    store: LogStore, path: Path, *, max_bytes: int | None = None, opening: Opening | None = None
) -> ImportReport | None:
    """Import ``path`` as it is read, in one transaction, when it is agenttrail's export of
    one session the log does not hold (:mod:`.export`; ``opening``: its first line, if read);
    ``None`` when it is not, or is refused: nothing is written, and :func:`import_paths`
    reads it whole, which names what is wrong with it. Raises ``StoreError``."""
    opening = opening or export.opening(path)
    if opening is None:
        return None
    written = export.append(store, path, opening, max_bytes=max_bytes)
    return None if written is None else ImportReport(path, opening.session_id, written, 0)


def import_sessions(
    store: LogStore, path: Path, sessions: Iterable[ImportedSession]
) -> list[ImportReport]:
    """Import sessions a format already read from ``path``'s bytes (as :func:`import_paths`
    does once it has read the file): for a reader that chose the bytes itself, such as
    :mod:`agenttrail.ingest.watch`, which reads a growing file up to its last newline.

    Raises:
        FormatError: a payload cannot be stored (over ``store.max_payload_bytes``, or not
            encodable); raised before anything is written.
        InputError, StoreError: as :func:`write_sessions` and the store's append.
    """
    parsed = [_encoded(store.max_payload_bytes, path, imported) for imported in sessions]
    return write_sessions(store, [(path, imported) for imported in parsed])


def read_paths(
    paths: Iterable[Path],
    *,
    format: str | None = None,
    max_payload_bytes: int,
    max_bytes: int | None = None,
    stdin: BinaryIO | None = None,
    on_read: Callable[[Path], None] | None = None,
    walked: Collection[Path] = (),
    on_skipped: Callable[[NotATranscript], None] | None = None,
) -> list[tuple[Path, ImportedSession]]:
    """Read and check every file without touching a store: ``(path, session)`` pairs.

    Args:
        paths: files to read; :data:`STDIN` reads ``stdin`` (gzip input is decompressed,
            :func:`agenttrail.formats.read_data`).
        stdin: the stream :data:`STDIN` stands for; ``None`` for ``sys.stdin.buffer``.
        on_read: called with each path once it is read and checked (a progress display).
        walked: those of ``paths`` found by walking a folder (:mod:`.folders`): one of
            them that is empty or of no format agenttrail reads (:class:`NotATranscript`) is
            skipped, and ``on_skipped`` called with why (without ``on_skipped``, refused as a
            file named by the user is). A malformed file is refused either way.

    Raises:
        FormatError: as :func:`import_paths`; every file is checked against the import limit
            (``max_bytes``, as in :func:`import_paths`) before it is read, and every payload against
            ``max_payload_bytes`` (bytes of CBOR), so a later write cannot fail on it.
        InputError: the import limit is not a positive integer, or :data:`STDIN` is in
            ``paths`` more than once (standard input is read once).
    """
    limit = import_limit(max_bytes)
    paths = list(paths)
    if paths.count(STDIN) > 1:
        raise InputError(f"- is named {paths.count(STDIN)} times: standard input is read once")
    parsed: list[tuple[Path, ImportedSession]] = []
    for path in paths:
        if path == STDIN:
            path = Path(STDIN_NAME)
            data = read_stream(stdin or sys.stdin.buffer, limit, STDIN_NAME)
            sessions = read_data(path, data, format, max_bytes=limit)
        else:
            try:
                sessions = read_file(path, format, max_bytes=limit)
            except NotATranscript as e:
                if path not in walked or on_skipped is None:  # never skipped unsaid
                    raise
                on_skipped(e)
                sessions = []
        for imported in sessions:
            parsed.append((path, _encoded(max_payload_bytes, path, imported)))
        if on_read is not None:
            on_read(path)
    return parsed


def write_sessions(
    store: LogStore,
    parsed: Iterable[tuple[Path, ImportedSession]],
    *,
    on_written: Callable[[ImportReport], None] | None = None,
) -> list[ImportReport]:
    """Write sessions read by :func:`read_paths`, one transaction each: a session's events
    and its trace rows (:func:`agenttrail.ingest.traces.rows_for`) commit together.

    A session whose source id does not follow the id rule (``agenttrail.model.SESSION_ID_RULE``)
    is written under an id derived from it (:func:`fitting_id`), the same on every import;
    the source's id is kept in its metadata as ``sourceSessionId``.

    Raises:
        FormatError: an export's session id does not follow the id rule and the session is
            not in the log yet (its chain hashes cover the id, so it cannot be changed);
            raised before anything is written.

    ``on_written`` is called with each session's report once it is committed.
    """
    sessions = list(parsed)
    placed = [(path, _placed(store, path, imported)) for path, imported in sessions]
    _check_exports_first([imported for _, imported in placed])
    reports = []
    for path, imported in placed:
        reports.append(_write(store, path, imported))
        if on_written is not None:
            on_written(reports[-1])
    return reports


def write_together(
    store: LogStore, path: Path, sessions: Iterable[ImportedSession]
) -> list[ImportReport]:
    """:func:`import_sessions` with one transaction, so one commit, for every session but an
    export (the OTLP receiver: a request spans many sessions, and a commit each cost it most
    of its time, docs/benchmarks.md). Each session's trace rows are written in that
    transaction as :func:`write_sessions` writes them (:func:`_trace_rows`); an export gets
    a transaction of its own (its hashes are checked against the log first), and so does a
    re-chained export.

    Raises:
        FormatError, InputError, StoreError: as :func:`import_sessions`; the sessions written
            together are all written or none.
    """
    parsed = [_encoded(store.max_payload_bytes, path, imported) for imported in sessions]
    placed = [_placed(store, path, imported) for imported in parsed]
    _check_exports_first(placed)
    plain = [
        i
        for i, imported in enumerate(placed)
        if imported.exported is None and "rechained" not in imported.session.metadata
    ]
    for i in plain:  # as an import of a file does (_write_session)
        sid = placed[i].session.id or ""
        _check_namespace(store, path, sid, placed[i].events, received=True)
    reports: dict[int, ImportReport] = {}
    batches = [(placed[i].session.id or "", placed[i].events, _filled(placed[i])) for i in plain]
    builders = [_trace_rows(session_id, events) for session_id, events, _ in batches]
    for i, done in zip(plain, store.append_sessions(batches, traces=builders), strict=True):
        traces.log_written(done.traces)
        written = sum(not r.duplicate for r in done.appended)
        imported = placed[i]
        reports[i] = ImportReport(
            path,
            imported.session.id or "",
            written,
            len(done.appended) - written,
            imported.warnings,
        )
    for i, imported in enumerate(placed):
        if i not in reports:
            reports[i] = _write(store, path, imported)
    return [reports[i] for i in range(len(placed))]


def fitting_id(source_id: str) -> str:
    """The id a session whose source id does not follow the id rule is imported under: a
    UUID derived from the source id alone, so that importing the file again finds it."""
    return content_session_id("session-id", source_id.encode("utf-8", "surrogatepass"))


def _placed(store: LogStore, path: Path, imported: ImportedSession) -> ImportedSession:
    """``imported`` under the id it is written to: its own when it follows the id rule or is
    in the log already (imported before the rule), else :func:`fitting_id`'s."""
    source_id = imported.session.id
    assert source_id is not None, "read_file gives every session an id"
    if imported.exported is not None:
        export.check_unredacted(store, path, imported.events)
    if is_session_id(source_id) or store.head(source_id) is not None:
        return imported
    if imported.exported is not None:
        raise FormatError(
            f"session id {source_id!r} does not follow the id rule: {SESSION_ID_RULE} (an "
            "export's chain hashes cover its session id, so it cannot be imported under another)",
            path=str(path),
            field="session_id",
        )
    metadata = {**imported.session.metadata, "sourceSessionId": source_id}
    return replace(
        imported, session=replace(imported.session, id=fitting_id(source_id), metadata=metadata)
    )


def _encoded(limit: int, path: Path, imported: ImportedSession) -> ImportedSession:
    """``imported`` with each event's payload encoded (:attr:`NewEvent.data`) and checked
    against the payload limit, so that the store stores these bytes without encoding again;
    and with a time for each event its source gives none: that of the last event before it
    that has one, else the session's start, else the first event time of the session.

    Such an event had the time of the import, years after its neighbours in an Inspect log
    whose closing events carry no time. Only a session whose source gives no time at all
    has it still (docs/log-format.md, ``created_at``).

    Raises:
        FormatError: a payload that cannot be encoded or is over ``limit`` bytes, naming it
            (over the limit: its session, kind and time, the :class:`PayloadTooLarge` as its
            cause, which the server answers 413).
    """
    first = next((e.created_at for e in imported.events if e.created_at is not None), None)
    last = imported.session.started or first
    encoded = []
    for index, event in enumerate(imported.events, start=1):
        data, created_at = event.data, event.created_at
        if created_at is None:
            created_at = last
        else:
            last = created_at
        if data is None:
            try:
                data = encode_payload(event.payload)
            except InputError as e:
                raise FormatError(f"event {index}: {e}", path=str(path)) from None
        if len(data) > limit:
            too_large = PayloadTooLarge(len(data), limit)
            kind = event.payload.get("role") if event.has_type("message") else None
            what = f"{kind} message" if isinstance(kind, str) else event.payload.get("type")
            at = f" at {created_at}" if created_at else ""
            where = f"event {index} of session {imported.session.id} ({what}{at})"
            raise FormatError(f"{where}: {too_large}", path=str(path)) from too_large
        if data is not event.data or created_at is not event.created_at:
            event = NewEvent(event.payload, created_at, event.key, event.salt, data)
        encoded.append(event)
    return replace(imported, events=encoded)


def _write(store: LogStore, path: Path, imported: ImportedSession) -> ImportReport:
    """Write one session read from ``path`` (:func:`write_sessions`).

    Raises:
        SessionExists: the session was removed by retention (its id is not used again),
            or another writer created it meanwhile; names ``path``.
    """
    try:
        return _write_session(store, path, imported)
    except SessionExists as e:
        raise SessionExists(e.session_id, e.removed, where=str(path)) from None


def _write_session(store: LogStore, path: Path, imported: ImportedSession) -> ImportReport:
    session_id = imported.session.id
    assert session_id is not None, "read_file gives every session an id"
    if imported.exported is not None:
        return _write_export(store, path, imported, session_id)
    if "rechained" in imported.session.metadata:
        _check_rechained(store, path, session_id)
    else:
        _check_namespace(store, path, session_id, imported.events)
    results = _append(store, session_id, imported.events, _filled(imported))
    written = sum(not r.duplicate for r in results)
    changed = reimport.warnings(store, path, session_id, imported.events, results)
    return ImportReport(
        path, session_id, written, len(results) - written, imported.warnings + changed
    )


def _check_rechained(store: LogStore, path: Path, session_id: str) -> None:
    """A re-chained export (docs/log-format.md, Export) is a new session: it may only add to
    a session that was itself imported re-chained, never to one with a chain of its own."""
    try:
        existing = store.get_session(session_id)
    except SessionNotFound:
        return
    if "rechained" not in existing.metadata:
        raise InputError(
            f"{path}: session {session_id} already exists; an export without its chain "
            "hashes cannot be imported into it"
        )


def _check_namespace(
    store: LogStore,
    path: Path,
    session_id: str,
    events: Sequence[NewEvent],
    *,
    received: bool = False,
) -> None:
    """A format whose keys share a name (``otlp:``, ``inspect:``, ``langfuse:``) adds to a
    session only when an import of that format began it: to a session recorded or imported
    otherwise it cannot tell which of its events the log already holds, and a session's own
    OTLP export would be added to it a second time. Keys without such a name (a transcript's
    line ids) are not checked.

    Raises:
        InputError: the session holds events and none of its keys has the name.
    """
    keys = [event.key for event in events if event.key]
    names = {key.partition(":")[0] for key in keys}
    name = names.pop() if len(names) == 1 and all(":" in key for key in keys) else ""
    if not name.isalpha():
        return
    head = store.head(session_id)
    if head is None or head[0] == 0:
        return
    if store.holds_key(session_id, f"{name}:"):
        return
    if received:  # the OTLP receiver: spans sent, not a file
        raise InputError(
            f"session {session_id} already holds {head[0]} events no {name} import wrote, so "
            "these spans' events would be added beside them (twice, if the spans are their "
            "export: agenttrail push to the log the session is in); send them to another log"
        )
    raise InputError(
        f"{path}: session {session_id} already holds {head[0]} events no {name} import "
        "wrote, so this file's events would be added beside them (twice, if the file is "
        "their export); import it into another database (--db)"
    )


def _check_exports_first(placed: Sequence[ImportedSession]) -> None:
    """When an import writes several sessions, check each export's hashes before any is
    written, computing them here (:func:`agenttrail.formats.jsonl.export_hashes`; the store
    computes them again as it writes), so that one altered session refuses the whole import.
    A session imported alone is checked as it is written (:func:`_write_export`): its hashes
    are computed once.

    Raises:
        FormatError: a line's hash does not match its contents; names the line.
    """
    if len(placed) < 2:
        return
    for imported in placed:
        if imported.exported is not None:
            imported.exported.check(1, export_hashes(imported, len(imported.events)))


def _write_export(
    store: LogStore, path: Path, imported: ImportedSession, session_id: str
) -> ImportReport:
    """Import agenttrail's own export so that seq, created_at and every hash are reproduced:
    the hash the store computes for each event it writes is checked against the one its line
    states in the transaction that writes it, so nothing is written when one differs.

    Raises:
        FormatError: a line's hash does not match its contents (names the line).
        InputError: the log holds the session with other events.
        StoreError: the events were not written at the seqs exported (another writer).
    """
    chain = imported.exported
    assert chain is not None, "_write_session writes exports here"
    try:
        head_seq = store.get_session(session_id).head_seq
    except SessionNotFound:
        head_seq = 0
    present = [row[3] for row in store.read_rows(session_id)][: len(chain.hashes)]
    if present:  # lines the log holds are not written: their hashes are computed here
        chain.check(1, export_hashes(imported, len(present)))
    for seq, (stored, exported) in enumerate(zip(present, chain.hashes, strict=False), start=1):
        if stored.hex() != exported:
            raise InputError(
                f"{path}: session {session_id} already exists with different events "
                f"(they differ at seq {seq})"
            )
    fresh = imported.events[head_seq:]
    first = head_seq + 1

    def check(appended: Sequence[Appended]) -> None:
        if appended[0].seq != first or any(done.duplicate for done in appended):
            raise StoreError(
                f"session {session_id}: the export's events were not written from seq "
                f"{first} as exported (another writer appended at the same time?)"
            )
        chain.check(first, [done.hash for done in appended])

    if fresh:  # _placed checked that the store's redaction changes none of them
        results = _append(store, session_id, fresh, _filled(imported), redacted=True, check=check)
    else:
        results = []
        traces.capture(store, session_id)  # nothing new: only rows the session may lack
    return ImportReport(
        path, session_id, len(results), min(head_seq, len(chain.hashes)), imported.warnings
    )


def _append(
    store: LogStore,
    session_id: str,
    batch: Sequence[NewEvent],
    create: NewSession,
    *,
    redacted: bool = False,
    check: Callable[[Sequence[Appended]], None] | None = None,
) -> list[Appended]:
    """Append a session's events and, in the same transaction, every trace row the session
    then calls for (:func:`_trace_rows`; rows already stored are skipped); ``redacted``: the
    store's redaction is known to change none of them (the store's ``append_batch``);
    ``check``: called with the outcome before the transaction commits (raising rolls it
    back)."""
    build = _trace_rows(session_id, batch)
    if check is not None:
        build = _checking(check, build)
    if build is None:
        return store.append_batch(session_id, batch, create=create, redacted=redacted)
    done = store.append_traced(session_id, batch, build, create=create, redacted=redacted)
    traces.log_written(done.traces)
    return done.appended


def _checking(
    check: Callable[[Sequence[Appended]], None], build: TraceBuilder | None
) -> TraceBuilder:
    """``build`` (or no trace row), after ``check`` of the append's outcome: in the
    transaction of the append, before its trace rows are written."""

    def checked(
        appended: Sequence[Appended], session: Callable[[], list[Event]]
    ) -> Sequence[NewTrace]:
        check(appended)
        return [] if build is None else build(appended, session)

    return checked


def _trace_rows(session_id: str, batch: Sequence[NewEvent]) -> TraceBuilder | None:
    """What builds the trace rows an append of ``batch`` calls for, in its transaction, or
    ``None`` when it can call for none.

    A row joins a tool result whose output is an envelope to its call, paired by id over
    the whole session (:func:`agenttrail.ingest.traces.rows_for`), wherever the two sit. So
    a batch calls for a row when one of its results is an envelope, or when one of its
    calls may pair with a result stored before it (a span exporter can send a tool's result
    before the model call that names it); a batch with neither calls for none, and the
    session is not read. When the append turns out to hold the whole session (its first new
    event got seq 1) and no result of it is an envelope, nothing is read either.
    """
    envelopes = traces.holds_envelopes(batch)
    if not envelopes and not any(event.has_type("tool_call") for event in batch):
        return None

    def build(appended: Sequence[Appended], session: Callable[[], list[Event]]) -> list[NewTrace]:
        whole = any(done.seq == 1 and not done.duplicate for done in appended)
        if whole and not envelopes:
            return []
        return traces.rows_for(session_id, session())

    return build


def _filled(imported: ImportedSession) -> NewSession:
    """The session to create, with a title and start time taken from its events if missing
    (unless the source stated them, as an export's ``session`` line does); one whose source
    gives no time at all is marked so in its metadata (``UNDATED``), and one the reader
    marked so (a Fountain file written of such a session) takes no start from its events."""
    session = imported.session
    # A v2 export's hashes start from the session's fields as exported (its genesis), so
    # they are kept as they are, stated or not (docs/log-format.md, Chain v2).
    v2_export = imported.exported is not None and session.chain_version == 2
    stated = imported.session_stated or v2_export
    if stated or (session.title is not None and session.started is not None):
        return session
    title = session.title
    if title is None:
        prompt = next(
            (
                e.payload.get("content")
                for e in imported.events
                if e.payload.get("type") == "message" and e.payload.get("role") == "user"
            ),
            None,
        )
        title = title_from(prompt) if isinstance(prompt, str) else None
    started = session.started
    if started is None and UNDATED not in session.metadata:  # its events' times are its own
        started = next((e.created_at for e in imported.events if e.created_at), None)
    undated = {UNDATED: UNDATED_NOTE}
    metadata = session.metadata if started is not None else {**session.metadata, **undated}
    return replace(session, title=title, started=started, metadata=metadata)
