"""The command that follows live transcripts into the log: watch."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from agenttrail.cli._common import err, open_log, out
from agenttrail.cli._options import DbOption, MaxBytesOption, NoRedactOption

__all__ = ["watch"]


def watch(
    folder: Annotated[
        Path | None,
        typer.Argument(
            metavar="[DIR]",
            help="Folder whose **/*.jsonl files to follow. Default: ~/.claude/projects.",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only warnings and errors.")
    ] = False,
    max_bytes: MaxBytesOption = None,
    no_redact: NoRedactOption = False,
    json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='One JSON object per line as it happens: {"kind": "session" or "appended", '
            '"session_id", "path", "written", "text"}; warnings and errors stay on stderr.',
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Follow Claude Code transcripts as they grow and append what is new to the log.

    Every *.jsonl file below DIR is imported when watching starts (what the log holds is
    skipped, so a restart resumes) and again whenever it changes: each transcript line is
    written exactly once, and only once its newline is written. Prints a line for each
    session when first seen and `+N events  SESSION  TITLE` for each batch appended, after a
    first line naming the folder watched; a file that is not a transcript (or is over
    --max-bytes) is skipped with one warning, and a failing log gives one error line and is
    retried. Runs until Ctrl-C or SIGTERM, then exits 0. `agenttrail serve` on the same --db
    shows the sessions live. --json prints each session and batch as one JSON object per line
    instead.

    Example:

    - `agenttrail watch ~/.claude/projects --db sessions.db`
    """
    from agenttrail.codec import json_line
    from agenttrail.ingest.watch import WatchNote, watched_folder
    from agenttrail.ingest.watch import watch as watch_transcripts
    from agenttrail.views.safe import safe

    root = watched_folder(folder)  # before the log is opened: a bad DIR creates no database

    def show(note: WatchNote) -> None:
        if note.kind in ("warning", "error"):
            err.print(f"{note.kind}: {safe(note.text)}", markup=False)
        elif json:
            record = {
                "kind": note.kind,
                "session_id": note.session_id,
                "path": str(note.path),
                "written": note.written,
                "text": note.text,
            }
            sys.stdout.write(json_line(record) + "\n")
            sys.stdout.flush()  # a stream: each line is read as it happens
        elif not quiet:
            out.print(safe(note.text), markup=False)

    with open_log(db, create=True, no_redact=no_redact) as store, _stopped_by_signals() as stop:
        if not (quiet or json):  # a folder with nothing in it yet still says it is watched
            out.print(f"watching {safe(str(root))} for transcripts (Ctrl-C stops)", markup=False)
        watch_transcripts(store, root, on_note=show, stop=stop, max_bytes=max_bytes)


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[threading.Event]:
    """An event that SIGINT (Ctrl-C) and SIGTERM set, so that watching ends cleanly (exit 0)
    rather than with a traceback or a signal's exit status; the handlers before are put back
    afterwards."""
    stop = threading.Event()
    stops = (signal.SIGTERM, signal.SIGINT)
    before = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in stops}
    try:
        yield stop
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
