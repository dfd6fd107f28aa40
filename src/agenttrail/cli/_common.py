"""What every group of commands shares: the consoles, opening the log, finding a session by a
prefix of its id, writing a file atomically (the shared options are in :mod:`._options`).

Data goes to :data:`out` (stdout) and messages to :data:`err` (stderr), so
``agenttrail export … | jq`` works.
"""

from __future__ import annotations

import gc
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from agenttrail.errors import AgentTrailError, InputError, SessionNotFound
from agenttrail.views.units import counted

if TYPE_CHECKING:
    from agenttrail.ingest.importer import ImportReport
    from agenttrail.log.store import LogStore
    from agenttrail.model import Event, Session

__all__ = [
    "STDIO",
    "err",
    "find_session",
    "held_whole",
    "log_file",
    "open_log",
    "out",
    "output_file",
    "print_report",
    "refuse_blank",
    "write_atomically",
    "write_output",
]

# soft_wrap: a data or error line is never broken at the terminal width. emoji: Rich would
# write ":smile:" in a printed string as 😄, so a session id or a quoted input would change.
out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def print_report(report: ImportReport) -> None:
    """Print what an import wrote: the session id on stdout (one a line, for a pipe), its
    warnings and counts on stderr (``import`` and ``quickstart``)."""
    from agenttrail.views.safe import safe

    out.print(report.session_id, markup=False)
    for warning in report.warnings:  # safe(): a file's name may hold a terminal control
        err.print(safe(f"warning: {warning}"), markup=False)
    note = f", {report.skipped} already present" if report.skipped else ""
    written = f"{counted(report.written, 'event')} written"
    err.print(safe(f"{report.path}: {written}{note}"), markup=False)


STDIO = Path("-")
"""What a FILE argument or option names for standard input (a file read) or standard output
(``-o -``), as Unix tools do."""


def output_file(output: Path | None) -> Path | None:
    """The file ``-o``/``--output`` names, ``None`` for standard output (not given, or ``-``)."""
    return None if output is None or output == STDIO else output


def open_log(db: str | None, *, create: bool = False, no_redact: bool = False) -> LogStore:
    """The log named by ``--db`` (else ``$AGENTTRAIL_DATABASE_URL``, else ./agenttrail.db);
    ``create`` sets up a new one; ``no_redact`` (``--no-redact``) stores payloads verbatim,
    else redaction follows the environment and ``agenttrail.toml`` (docs/redaction.md).

    Raises:
        InputError: ``--db`` was given blank (it would have meant the default, unsaid).
        AgentTrailError: as :func:`~agenttrail.log.store.open_store`; when the log came from
            ``AGENTTRAIL_DATABASE_URL``, with a note that says so (``error: …`` prints it).
    """
    from agenttrail.log.store import open_store  # the store's imports: only a command pays

    if db is not None and not db.strip():
        raise InputError("--db is blank: give a database file or URL")
    try:
        return open_store(db, create=create, redact=False if no_redact else None)
    except AgentTrailError as e:
        if db is None and os.environ.get("AGENTTRAIL_DATABASE_URL"):
            e.add_note("the log AGENTTRAIL_DATABASE_URL names")  # else no word says where
        raise


def log_file(db: str | None) -> Path | None:
    """The SQLite file ``--db`` names (else the default's), ``None`` for a PostgreSQL log or
    a blank ``--db`` (which :func:`open_log` refuses)."""
    from agenttrail.log.store import sqlite_path

    return sqlite_path(db) if db is None or db.strip() else None


@contextmanager
def unmade_if_refused(db: str | None) -> Iterator[None]:
    """Around a command that may make the SQLite log ``--db`` names: when the command fails,
    a log it made that holds no session is removed (with its ``-wal`` and ``-shm`` files),
    so that the absence of a log is left as it was (README, exit codes). A log that was
    there, or that holds a session, is kept; a PostgreSQL log is kept."""
    path = log_file(db)
    made = path if path is not None and not path.exists() else None
    try:
        yield
    except BaseException:
        if made is not None and _holds_no_session(made):
            for name in (made.name, f"{made.name}-wal", f"{made.name}-shm"):
                (made.parent / name).unlink(missing_ok=True)
        raise


def _holds_no_session(path: Path) -> bool:
    from agenttrail.log.store import open_store

    try:
        with open_store(path, create=False) as store:
            return not store.sessions()
    except AgentTrailError:
        return False  # not a log we can read: not ours to remove


def refuse_blank(**options: str | None) -> None:
    """Refuse a filter option given blank (``--agent ''``): it would match nothing, and say
    nothing of why. Keyword names are the options' (``agent`` for ``--agent``).

    Raises:
        InputError: an option's value is empty or only white space; names the option.
    """
    for name, value in options.items():
        if value is not None and not value.strip():
            raise InputError(f"--{name} is blank: give a name, or leave the option out")


def find_session(store: LogStore, text: str) -> Session:
    """The session whose id is ``text`` or, failing that, starts with it (a unique prefix).

    Raises:
        SessionNotFound: no session matches.
        InputError: the prefix matches several sessions, or is blank (it would match all).
    """
    if not text.strip():
        raise InputError("the session id is blank: give an id or a unique prefix of one")
    try:
        return store.get_session(text)
    except SessionNotFound:
        # an id changed by hand into bytes is no prefix's (agenttrail verify names it)
        matches = [s for s in store.sessions() if isinstance(s.id, str) and s.id.startswith(text)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            ids = ", ".join(s.id for s in matches[:5])
            raise InputError(
                f"session prefix {text!r} matches {len(matches)} sessions: {ids}"
            ) from None
        raise SessionNotFound(text, "; agenttrail sessions lists those in this log") from None


def say_undated(left_out: int) -> None:
    """Say on stderr that a date range left out ``left_out`` sessions for having no times
    (``Session.dated``: their source gave none), each of which the command's other filters
    took: they would otherwise vanish from a list, a sum or a search without a word."""
    if left_out:
        said = f"{counted(left_out, 'session')} with no times left out"
        err.print(f"{said}: no date range takes them", markup=False)


def write_output(output: Path | None, lines: Iterable[str]) -> None:
    """Write ``lines``, each ended by a newline, to the file ``-o`` names
    (:func:`write_atomically`), or to standard output when ``output`` is ``None``
    (:func:`output_file`)."""
    if output is not None:
        write_atomically(output, lines)
        return
    for line in lines:
        sys.stdout.write(line + "\n")


def write_atomically(path: Path, lines: Iterable[str]) -> None:
    """Write lines to a temporary file beside ``path``, then rename it into place, with the
    mode of the file it replaces, or for a new file the mode a shell's ``>`` gives (0666
    less the umask): an export is for reading and sharing. A ``path`` that is no regular
    file (``/dev/null``, a FIFO) is written to as it is, never replaced. Says on stderr what
    was written (``session.html: 41,203 bytes written``), as ``import`` says what it wrote:
    a command that wrote its file said nothing.

    Raises:
        InputError: ``path`` is a folder, or a database file (SQLite's header: ``-o`` naming
            the log by mistake would replace it, every session with it) or one of the files
            SQLite keeps beside one (its write-ahead log, shared memory, journal), or its
            folder does not exist or is not writable.
    """
    if path.is_dir():
        raise InputError(f"{path} is a folder; name a file to write")
    if _is_database(path):
        raise InputError(f"{path} is a database file; writing there would replace it")
    for suffix in _SQLITE_SIDE_FILES:  # the database's own journal, replaced or deleted by it
        if path.name.endswith(suffix) and _is_database(path.with_name(path.name[: -len(suffix)])):
            raise InputError(f"{path} is a file of the database beside it; name another file")
    if path.exists() and not path.is_file():  # /dev/null, a FIFO: written to, not replaced
        try:
            with path.open("w", encoding="utf-8", newline="\n") as handle:
                for line in lines:
                    handle.write(line + "\n")
        except OSError as e:
            raise InputError(f"cannot write {path}: {e.strerror or e}") from None
        return
    try:
        fd, temp = tempfile.mkstemp(
            dir=path.absolute().parent, prefix=f".{path.name}.", suffix=".tmp"
        )
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        os.chmod(fd, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            for line in lines:
                handle.write(line + "\n")
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    err.print(f"{path}: {path.stat().st_size:,} bytes written", markup=False)


_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
"""What SQLite keeps beside a database ``X``: ``X-wal``, ``X-shm``, ``X-journal``
(https://sqlite.org/tempfiles.html)."""


def _is_database(path: Path) -> bool:
    """Whether ``path`` is a SQLite database file (an agenttrail log or any other); only a
    regular file is read (a FIFO or a terminal would wait for input)."""
    from agenttrail.formats import SQLITE_HEADER

    try:
        if not path.is_file():
            return False
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:  # none there, or unreadable: the write says why, if it fails
        return False


def _mode_for(path: Path) -> int:
    """The permission bits for a file written to ``path``: those of the file there, else
    0666 less the process's umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextmanager
def collector_paused() -> Iterator[None]:
    """Around a command that makes no reference cycles (``import``, ``show``): Python's
    cyclic garbage collector paused until the block ends, and what is alive then set aside
    from it (:func:`gc.freeze`) if the block ends without an error. Reference counting frees
    all of it as usual (``show``'s peak RSS at 100,000 events is the same either way).

    ``import`` reads files whole, then writes what it read: what is read (decoded JSON, the
    events made of it) is held until written, and each full collection while it grew walked
    all of it; writing makes as many objects again (each row's values, each append's
    outcome), whose collections took a sixth of the writing at 100,000 events. ``show``
    streams a session, each event's payload, row and text short-lived: the collections those
    set off were 2 % of its instructions (docs/benchmarks.md). Set aside, none of it is
    walked by the first collection after the block either.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if enabled:
            gc.enable()


@contextmanager
def held_whole(events: Iterable[Event]) -> Iterator[list[Event]]:
    """A session's events read whole for a command that renders them at once (``fountain``,
    ``replay``), each payload decoded, with Python's cyclic garbage collector paused until
    the ``with`` block ends (then restored as it was), and what is alive then set aside
    from it (:func:`gc.freeze`) if the block ends without an error.

    Such a command holds every event until it exits, and each of the collector's passes
    walks every object held: a full collection walks the whole session again, and each of
    the many younger collections triggered while a session is read walks what was just
    made. At 100,000 events that was about a third of ``fountain``'s CPU time (decoding
    alone took 2.4 times as long with the collector on, rendering 1.3 times). Reference
    counting still frees everything acyclic as usual. The command writes what it rendered
    after the block, and the collector's first pass once enabled walked everything made in
    it (0.1–0.15 s at 100,000 events); set aside, a cycle made in the block is never
    collected, which a command that then exits does not miss.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        held = list(events)
        for event in held:
            _ = event.payload
        yield held
        gc.freeze()
    finally:
        if enabled:
            gc.enable()
