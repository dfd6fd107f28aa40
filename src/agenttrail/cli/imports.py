"""``agenttrail import``: transcripts, exports and traces into the log
(:mod:`agenttrail.ingest.importer`; an export of one session, :mod:`agenttrail.ingest.export`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agenttrail.cli._common import (
    collector_paused,
    err,
    log_file,
    open_log,
    print_report,
    unmade_if_refused,
)
from agenttrail.cli._options import DbOption, MaxBytesOption, NoRedactOption
from agenttrail.cli.log import FORMAT_NAMES
from agenttrail.errors import AgentTrailError, InputError, NotATranscript
from agenttrail.views.units import counted

if TYPE_CHECKING:
    from agenttrail.ingest.export import Opening
    from agenttrail.ingest.importer import ImportReport

__all__ = ["import_command"]


def import_command(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH",
            help="Files or folders to import (a folder is walked for transcript files); "
            "- reads standard input. gzip input is decompressed.",
        ),
    ],
    format: Annotated[
        str | None,
        typer.Option("--format", help=f"Skip detection: one of {', '.join(FORMAT_NAMES)}."),
    ] = None,
    max_bytes: MaxBytesOption = None,
    no_redact: NoRedactOption = False,
    json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='One JSON object per session: {"session_id", "path", "written", "skipped", '
            '"warnings"}.',
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Import transcripts; print each session id on its own line.

    Every file is read before anything is written (an export of one session the log does
    not hold: as it is written, in that one transaction); each session is written in one
    transaction. Importing a file again writes nothing new. Only regular files are read,
    each up to --max-bytes. A folder is walked for the files formats read (.jsonl, .json,
    .eval, .yaml, .yml, .txt, .spmd, .fountain, each also .gz); one found there that is
    empty, of no known format or not a regular file is skipped and named (Claude Code's
    sessions-index.json);
    a long import shows a progress bar on a terminal.

    Example:

    - `agenttrail export sample-harvey-session | agenttrail import -`
    """
    from agenttrail.cli._progress import import_progress
    from agenttrail.ingest import export
    from agenttrail.ingest.folders import expand_paths
    from agenttrail.ingest.importer import read_paths, write_sessions
    from agenttrail.log.store import payload_limit

    paths = expand_paths(files)
    skipped: list[NotATranscript] = []
    one = paths[0] if paths == files and len(paths) == 1 else None
    opening = export.opening(one) if one is not None and format in (None, "jsonl") else None
    if one is not None and opening is not None:
        with collector_paused():
            streamed = _streamed(one, opening, db, no_redact=no_redact, max_bytes=max_bytes)
        if streamed is not None:
            _print_reports([streamed], json)
            return
    # Read everything first: a bad file leaves the database, or its absence, as it was.
    with import_progress(paths) as progress, collector_paused():
        parsed = read_paths(
            paths,
            format=format,
            max_payload_bytes=payload_limit(),
            max_bytes=max_bytes,
            on_read=progress.read,
            walked=set(paths) - set(files),
            on_skipped=skipped.append,
        )
        for why in skipped:  # a folder's file that is no transcript (Claude Code's index)
            err.print(f"skipped: {why}", markup=False)
        if skipped and not parsed:
            raise InputError(f"nothing to import: {counted(len(skipped), 'file')} skipped")
        progress.writing(len(parsed))
        with unmade_if_refused(db), open_log(db, create=True, no_redact=no_redact) as store:
            reports = write_sessions(store, parsed, on_written=progress.written)
    _print_reports(reports, json)


def _streamed(
    path: Path, opening: Opening, db: str | None, *, no_redact: bool, max_bytes: int | None
) -> ImportReport | None:
    """An export of one session imported as it is read (:mod:`agenttrail.ingest.export`),
    the log neither made nor changed before the file has proved good: into a log that is
    there; or, where the SQLite file is not there yet, into a new file beside it, linked into
    place once the import has committed, so that a refused file leaves no log behind and an
    import never removes a log another one is writing. ``None``: the file is to be read
    whole (not such an export, refused, a PostgreSQL log not made yet, a log made meanwhile).
    """
    from agenttrail.ingest.importer import import_export

    try:
        target = log_file(db)
        if target is None or target.exists():  # PostgreSQL, or a log that is there
            with open_log(db, no_redact=no_redact) as store:
                return import_export(store, path, max_bytes=max_bytes, opening=opening)
    except AgentTrailError:
        return None  # read whole, which says what is wrong, with the file's error first
    fresh = target.with_name(f".{target.name}.{os.getpid()}.importing")
    try:
        with open_log(str(fresh), create=True, no_redact=no_redact) as store:
            report = import_export(store, path, max_bytes=max_bytes, opening=opening)
        if report is None or Path(f"{fresh}-wal").exists():  # not checkpointed whole
            return None
        os.link(fresh, target)  # fails when the log was made meanwhile: read whole into it
        return report
    except (AgentTrailError, OSError):
        return None
    finally:
        for name in (fresh.name, f"{fresh.name}-wal", f"{fresh.name}-shm"):
            (fresh.parent / name).unlink(missing_ok=True)


def _print_reports(reports: list[ImportReport], json: bool) -> None:
    from agenttrail.cli._listing import print_json_lines

    if json:
        print_json_lines(
            {
                "session_id": r.session_id,
                "path": str(r.path),
                "written": r.written,
                "skipped": r.skipped,
                "warnings": r.warnings,
            }
            for r in reports
        )
        return
    for report in reports:
        print_report(report)
