"""``agenttrail import``: transcripts, exports and traces into the log
(:mod:`agenttrail.ingest.importer`; an export of one session, :mod:`agenttrail.ingest.export`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agenttrail.cli._common import (
    collector_paused,
    err,
    open_log,
    print_report,
    unmade_if_refused,
)
from agenttrail.cli._options import DbOption, MaxBytesOption, NoRedactOption
from agenttrail.cli.log import FORMAT_NAMES
from agenttrail.errors import InputError, NotATranscript
from agenttrail.views.units import counted

if TYPE_CHECKING:
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
    from agenttrail.ingest.importer import import_export, read_paths, write_sessions
    from agenttrail.log.store import payload_limit

    paths = expand_paths(files)
    skipped: list[NotATranscript] = []
    # Read everything first (an export of one session: in the transaction that writes it), so
    # that a bad file leaves the database, or its absence, as it was.
    with import_progress(paths) as progress, collector_paused(), unmade_if_refused(db):
        one = paths[0] if paths == files and len(paths) == 1 else None
        if one is not None and format in (None, "jsonl") and export.opening(one) is not None:
            with open_log(db, create=True, no_redact=no_redact) as store:
                report = import_export(store, one, max_bytes=max_bytes)
            if report is not None:
                _print_reports([report], json)
                return
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
        with open_log(db, create=True, no_redact=no_redact) as store:
            reports = write_sessions(store, parsed, on_written=progress.written)
    _print_reports(reports, json)


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
