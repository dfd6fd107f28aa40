"""Follow Claude Code transcripts as they grow and append what is new to the log.

``agenttrail watch`` is this module. Every ``*.jsonl`` file below a folder (Claude Code's is
``~/.claude/projects``) is imported once when watching starts and again whenever it changes,
through :func:`agenttrail.ingest.importer.import_sessions`. Exactly-once follows from the
importer's idempotency keys (one per transcript line, docs/log-format.md): importing a file
again writes only the lines not yet in the log, so a restart resumes from what the log holds,
and a file that was replaced or truncated is simply read again. A message cut in its middle
by a read is stored in parts and read once (docs/log-format.md, Reading a session).

The rules of a read (docs/capture.md, Watching Claude Code transcripts):

- Only complete lines are read: the bytes up to the file's last newline. Claude Code may be
  in the middle of writing a line, and the Claude Code reader refuses a truncated last line
  (:func:`agenttrail.formats.claude_code.read`); the line is read once its newline is there.
- A file that is not a Claude Code transcript (:func:`agenttrail.formats.claude_code.sniff`),
  one that cannot be read or parsed, or one over the import limit is skipped with one warning
  (again only if the warning changes). A file whose lines name no ``sessionId`` yet waits.
- A failing log (a store error, a payload it refuses) gives one error line and the file is
  tried again every :data:`RETRY_S` seconds until it succeeds; watching goes on.

Changes are detected with ``watchfiles`` (inotify on Linux, FSEvents on macOS, polling where
neither works), the library uvicorn uses for ``--reload``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import watchfiles

from agenttrail.errors import AgentTrailError, FormatError, InputError
from agenttrail.formats import DEFAULT_MAX_IMPORT_BYTES, claude_code, read_input
from agenttrail.ingest.importer import import_sessions
from agenttrail.limits import import_limit
from agenttrail.log.store import LogStore

__all__ = ["DEBOUNCE_MS", "RETRY_S", "Follower", "WatchNote", "watch", "watched_folder"]

RETRY_S = 1.0
"""Seconds between tries of a file whose import failed (the log was unreachable or busy).
Also how often the watcher wakes without a change: short enough that a log back up is caught
up at once, long enough to cost nothing while idle."""

DEBOUNCE_MS = 500
"""Longest a burst of changes is gathered before the changed files are read (milliseconds;
a quiet 50 ms ends a burst sooner). Claude Code writes several lines per response in quick
succession: reading once per burst spares re-reading a file per line, and the live viewer
lags at most this much."""

NoteKind = Literal["session", "appended", "warning", "error"]


@dataclass(frozen=True)
class WatchNote:
    """One thing watching did that a person may want to see, with its line of text."""

    kind: NoteKind
    """``session`` (first seen in this run), ``appended`` (a batch of events written),
    ``warning`` (a file skipped) or ``error`` (the log failed; the file is retried)."""
    text: str
    """The line to print: ``+N events  <session>  <title>`` for ``appended``."""
    path: Path
    """The transcript file it is about."""
    session_id: str | None = None
    """The session written to, for ``session`` and ``appended``."""
    written: int = 0
    """Events appended, for ``appended``."""


@dataclass(frozen=True)
class _Seen:
    """What a file was when last read: a file unchanged since is not read again."""

    inode: int
    size: int
    mtime_ns: int


@dataclass
class Follower:
    """Imports changed transcript files into one log and remembers what it has said.

    Not thread-safe: one follower per watching loop.
    """

    store: LogStore
    max_bytes: int = DEFAULT_MAX_IMPORT_BYTES
    """Largest file read, in bytes (the import limit)."""
    sessions: set[str] = field(default_factory=set)
    """Sessions already announced in this run."""
    pending: set[Path] = field(default_factory=set)
    """Files whose last import failed on the log: tried again every :data:`RETRY_S`."""
    _seen: dict[Path, _Seen] = field(default_factory=dict)
    _problems: dict[Path, str] = field(default_factory=dict)
    """The file's current problem, said once until it changes or the file is read."""
    _warned: set[str] = field(default_factory=set)
    """Warnings of the importer already said: every read of a file gives them again."""

    def follow(self, path: Path) -> list[WatchNote]:
        """Import what is new in ``path``: the notes to show (none when nothing changed).

        Never raises an :class:`AgentTrailError`: a problem with the file is a ``warning``
        note, a failure of the log an ``error`` note (and ``path`` goes to :attr:`pending`).
        """
        try:
            state = os.stat(path)
        except OSError:
            self._seen.pop(path, None)  # gone: if it comes back, it is read anew
            self.pending.discard(path)
            return []
        seen = _Seen(state.st_ino, state.st_size, state.st_mtime_ns)
        if self._seen.get(path) == seen and path not in self.pending:
            return []
        try:
            notes = self._import(path)
        except FormatError as e:  # the file: skipped until it changes
            self._seen[path] = seen
            self.pending.discard(path)
            return self._problem(path, str(e), "warning")
        except AgentTrailError as e:  # the log (or what it refused): tried again
            self.pending.add(path)
            return self._problem(path, f"{path}: {e}", "error")
        self._seen[path] = seen
        self.pending.discard(path)
        self._problems.pop(path, None)
        return notes

    def _import(self, path: Path) -> list[WatchNote]:
        data = read_input(path, self.max_bytes)
        # A line without its newline is still being written (and would not parse yet).
        complete = data[: data.rfind(b"\n") + 1]
        if not complete.strip():
            return []
        if not claude_code.sniff(path, complete):
            raise FormatError("not a Claude Code transcript; skipped", path=str(path))
        sessions = [s for s in claude_code.read(path, complete) if s.session.id is not None]
        notes: list[WatchNote] = []
        for report in import_sessions(self.store, path, sessions):
            sid = report.session_id
            title = self.store.get_session(sid).title or ""
            if sid not in self.sessions:
                self.sessions.add(sid)
                notes.append(WatchNote("session", f"session  {sid}  {title}  {path}", path, sid))
            for warning in report.warnings:
                if warning not in self._warned:
                    self._warned.add(warning)
                    notes.append(WatchNote("warning", warning, path, sid))
            if report.written:
                noun = "event" if report.written == 1 else "events"
                text = f"+{report.written} {noun}  {sid}  {title}"
                notes.append(WatchNote("appended", text, path, sid, report.written))
        return notes

    def _problem(self, path: Path, text: str, kind: NoteKind) -> list[WatchNote]:
        if self._problems.get(path) == text:
            return []
        self._problems[path] = text
        return [WatchNote(kind, text, path)]


def watched_folder(folder: Path | None) -> Path:
    """``folder``, or where Claude Code keeps its transcripts (``~/.claude/projects``) when
    it is ``None``.

    Raises:
        InputError: the folder does not exist or is not a folder.
    """
    root = folder if folder is not None else Path.home() / ".claude" / "projects"
    if not root.is_dir():
        raise InputError(f"{root}: not a folder to watch")
    return root


def watch(
    store: LogStore,
    root: Path,
    *,
    on_note: Callable[[WatchNote], None],
    stop: threading.Event,
    max_bytes: int | None = None,
) -> None:
    """Follow every ``*.jsonl`` file below ``root`` into ``store`` until ``stop`` is set.

    Once the watcher runs, every file is imported (what the log already holds is skipped, so
    this is the resume after a restart); after that each file is imported again when it
    changes. Returns within about 50 ms of ``stop`` being set, or once the file being read is
    done.

    Args:
        store: the log to append to.
        root: the folder to watch, recursively.
        on_note: called with each :class:`WatchNote`, in order, on the calling thread.
        stop: set it (from a signal handler or another thread) to stop watching.
        max_bytes: largest file read, in bytes; ``None`` for ``AGENTTRAIL_MAX_IMPORT_BYTES``,
            else :data:`agenttrail.formats.DEFAULT_MAX_IMPORT_BYTES`. Larger files are
            skipped with a warning.

    Raises:
        InputError: ``root`` is not a folder, or ``max_bytes`` is not a positive integer.
    """
    limit = import_limit(max_bytes)
    root = watched_folder(root)
    follower = Follower(store, limit)

    def run(paths: Iterable[Path]) -> None:
        for path in sorted(set(paths)):
            if stop.is_set():
                return
            for note in follower.follow(path):
                on_note(note)

    changes = watchfiles.watch(
        root,
        watch_filter=_is_transcript_change,
        debounce=DEBOUNCE_MS,
        stop_event=stop,
        rust_timeout=int(RETRY_S * 1000),
        yield_on_timeout=True,
        raise_interrupt=False,
    )
    first = True
    for changed in changes:
        if first:
            # The watcher is running now, so no write between this scan and the next change
            # can be missed.
            first = False
            run(root.rglob("*.jsonl"))
        run([*(Path(p) for _, p in changed), *follower.pending])


def _is_transcript_change(change: watchfiles.Change, path: str) -> bool:
    return change != watchfiles.Change.deleted and path.endswith(".jsonl")
