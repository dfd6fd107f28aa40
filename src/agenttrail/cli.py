"""The ``agenttrail`` command. Each command parses its arguments, calls the library and prints.

Data goes to stdout and messages to stderr, so ``agenttrail export … | jq`` works. Every
agenttrail error ends as one ``error: …`` line on stderr and exit code 2 for bad input or usage,
1 for a check that found a problem (``verify``) or a store failure — never a traceback.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agenttrail import __version__
from agenttrail.chain import verify as verify_chain
from agenttrail.codec import json_line
from agenttrail.errors import AgentTrailError, FormatError, InputError, SessionNotFound
from agenttrail.formats import FORMATS
from agenttrail.formats.fountain import fountain_from_events
from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.importer import ImportReport, read_paths, write_sessions
from agenttrail.sample import record_sample
from agenttrail.store import LogStore, Session, open_store, payload_limit
from agenttrail.terminal import render_session, safe

__all__ = ["app", "main"]

app = typer.Typer(
    name="agenttrail",
    help="A flight recorder for AI agents: import, read and verify agent session logs.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

# soft_wrap: a data or error line is never broken at the terminal width.
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database: a file path or sqlite:///path. Default: $AGENTTRAIL_DATABASE_URL, "
        "else ./agenttrail.db.",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]


def _open(db: str | None, *, create: bool = False) -> LogStore:
    return open_store(db, create=create)


def find_session(store: LogStore, text: str) -> Session:
    """The session whose id is ``text`` or, failing that, starts with it (a unique prefix).

    Raises:
        SessionNotFound: no session matches.
        InputError: the prefix matches several sessions.
    """
    try:
        return store.get_session(text)
    except SessionNotFound:
        matches = [s for s in store.sessions() if s.id.startswith(text)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            ids = ", ".join(s.id for s in matches[:5])
            raise InputError(
                f"session prefix {text!r} matches {len(matches)} sessions: {ids}"
            ) from None
        raise


@app.command("import")
def import_command(
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE", help="Transcript files to import.")
    ],
    format: Annotated[
        str | None,
        typer.Option("--format", help=f"Skip detection: one of {', '.join(FORMATS)}."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Import transcripts; print each session id on its own line.

    Every file is read before anything is written; each session is written in one
    transaction. Importing a file again writes nothing new.

    Example: agenttrail import ~/.claude/projects/*/*.jsonl
    """
    # Read everything first: a bad file leaves the database, or its absence, as it was.
    parsed = read_paths(files, format=format, max_payload_bytes=payload_limit())
    with _open(db, create=True) as store:
        reports = write_sessions(store, parsed)
    for report in reports:
        _print_report(report)


def _print_report(report: ImportReport) -> None:
    out.print(report.session_id, markup=False)
    for warning in report.warnings:
        err.print(f"warning: {warning}", markup=False)
    note = f", {report.skipped} already present" if report.skipped else ""
    written = f"{report.written} event{'' if report.written == 1 else 's'} written"
    err.print(f"{report.path}: {written}{note}", markup=False)


@app.command()
def sessions(db: DbOption = None, json: JsonOption = False) -> None:
    """List sessions: id, started, agent, events, title.

    Example: agenttrail sessions --json | jq -r .id
    """
    with _open(db) as store:
        rows = sorted(store.sessions(), key=lambda s: s.started or s.created_at)
    if json:
        for s in rows:
            out.print(json_line(_session_record(s)), markup=False)
        return
    table = Table(expand=True)
    table.add_column("id", no_wrap=True)  # whole, so it can be copied
    table.add_column("started", no_wrap=True)
    table.add_column("agent", overflow="ellipsis", no_wrap=True, max_width=14)
    table.add_column("events", justify="right", no_wrap=True)
    table.add_column("title", overflow="fold", ratio=3)
    for s in rows:
        title = (s.title or "").splitlines()[0] if s.title else ""
        started = (s.started or s.created_at)[:16].replace("T", " ")
        table.add_row(
            *(escape(safe(v)) for v in (s.id, started, s.agent or "")),
            str(s.head_seq),
            escape(safe(title)),
        )
    out.print(table)


def _session_record(s: Session) -> dict[str, object]:
    return {
        "id": s.id,
        "title": s.title,
        "agent": s.agent,
        "user": s.user,
        "workspace": s.workspace,
        "started": s.started,
        "events": s.head_seq,
        "head": s.head_hash.hex(),
        "metadata": s.metadata,
    }


@app.command()
def show(
    session: Annotated[
        str, typer.Argument(metavar="SESSION", help="Session id or a unique prefix of it.")
    ],
    full: Annotated[
        bool, typer.Option("--full", help="Show tool results and runtime notes whole.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Print a session as a transcript: one row per event, a tool call and its result on one.

    Example: agenttrail show sample-harvey-session
    """
    with _open(db) as store:
        found = find_session(store, session)
        render_session(out, found, store.read(found.id), full=full)


@app.command()
def export(
    session: Annotated[
        str, typer.Argument(metavar="SESSION", help="Session id or a unique prefix of it.")
    ],
    format: Annotated[str, typer.Option("--format", help="Export format (jsonl).")] = "jsonl",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file, not stdout.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Export a session, one JSON object per event (session_id, seq, created_at, actor,
    payload, hash).

    Example: agenttrail export sample-harvey-session > harvey.jsonl
    """
    if format != "jsonl":
        raise InputError(f"unknown export format {format!r} (use jsonl)")
    with _open(db) as store:
        found = find_session(store, session)
        lines = jsonl_from_events(store.read(found.id))
        if output is None:
            for line in lines:
                sys.stdout.write(line + "\n")
            return
        _write_atomically(output, lines)


def _write_atomically(path: Path, lines: Iterable[str]) -> None:
    """Write lines to a temporary file beside ``path``, then rename it into place.

    Raises:
        InputError: ``path`` is a folder, or its folder does not exist or is not writable.
    """
    if path.is_dir():
        raise InputError(f"{path} is a folder; name a file to write")
    try:
        fd, temp = tempfile.mkstemp(
            dir=path.absolute().parent, prefix=f".{path.name}.", suffix=".tmp"
        )
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            for line in lines:
                handle.write(line + "\n")
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


@app.command()
def fountain(
    session: Annotated[
        str, typer.Argument(metavar="SESSION", help="Session id or a unique prefix of it.")
    ],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file, not stdout.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Render a session as a Fountain screenplay (Harvey session format v1.2).

    Example: agenttrail fountain sample-harvey-session -o harvey.spmd
    """
    with _open(db) as store:
        found = find_session(store, session)
        text = fountain_from_events(found, list(store.read(found.id)))
    if output is None:
        sys.stdout.write(text)
    else:
        _write_atomically(output, [text.removesuffix("\n")])


@app.command()
def verify(
    session: Annotated[
        str | None,
        typer.Argument(metavar="SESSION", help="Session id or prefix; all sessions when omitted."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Recompute the hash chain; exit 0 when intact, 1 naming the session and first bad seq.

    Example: agenttrail verify && echo intact
    """
    with _open(db) as store:
        ids = [find_session(store, session).id] if session is not None else None
        verdicts = verify_chain(store, ids)
    broken = 0
    for v in verdicts:
        if v.ok:
            out.print(
                f"ok    {v.session_id}  {v.events} events  head {v.head_hash.hex()[:16]}",
                markup=False,
            )
        else:
            broken += 1
            out.print(f"FAIL  {v.session_id}  seq {v.bad_seq}: {v.reason}", markup=False)
    err.print(f"{len(verdicts) - broken} of {len(verdicts)} sessions intact", markup=False)
    if broken:
        raise typer.Exit(1)


@app.command()
def quickstart(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="PATH",
            help="Claude Code transcripts; default ~/.claude/projects/**/*.jsonl.",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Import your Claude Code transcripts (or record our sample session when there are
    none), show the latest as a transcript, and verify the whole log.

    Example: agenttrail quickstart
    """
    limit = payload_limit()
    if paths:  # named by the user: a bad one is bad input
        parsed = read_paths(_expand(paths), max_payload_bytes=limit)
    else:  # found under ~/.claude/projects: one odd file does not stop the others
        parsed = []
        for path in _claude_transcripts():
            try:
                parsed += read_paths([path], max_payload_bytes=limit)
            except FormatError as e:
                err.print(f"skipped: {e}", markup=False)
    with _open(db, create=True) as store:
        reports = write_sessions(store, parsed)
        for report in reports:
            _print_report(report)
        candidates = [store.get_session(r.session_id) for r in reports] or [
            s for s in store.sessions() if s.metadata.get("format") == "claude_code"
        ]
        if candidates:
            shown = max(candidates, key=lambda s: s.started or s.created_at).id
        else:
            err.print(
                "no Claude Code transcripts found: recording the sample session", markup=False
            )
            shown = record_sample(store)
        render_session(out, store.get_session(shown), store.read(shown))
        verdicts = verify_chain(store)
    broken = [v for v in verdicts if not v.ok]
    for v in broken:
        out.print(f"FAIL  {v.session_id}  seq {v.bad_seq}: {v.reason}", markup=False)
    events = sum(v.events for v in verdicts)
    out.print(
        f"verify: {len(verdicts) - len(broken)} of {len(verdicts)} sessions intact "
        f"({events} events) in {store.url}",
        markup=False,
    )
    if broken:
        raise typer.Exit(1)


def _expand(paths: list[Path]) -> list[Path]:
    """Files named, with folders replaced by the ``*.jsonl`` files below them."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(path.rglob("*.jsonl")))
        elif path.exists():
            found.append(path)
        else:
            raise InputError(f"{path}: no such file or folder")
    return found


def _claude_transcripts() -> list[Path]:
    root = Path.home() / ".claude" / "projects"
    return sorted(root.rglob("*.jsonl")) if root.is_dir() else []


def _version(value: bool) -> None:
    if value:
        out.print(f"agenttrail {__version__}", markup=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """A flight recorder for AI agents: import, read and verify agent session logs."""


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (``agenttrail`` console script).

    Usage errors are Typer's own (a usage line, exit 2); an :class:`AgentTrailError` becomes
    one ``error: …`` line on stderr and the error's exit code.
    """
    # Die quietly when the reader of our output goes away (`agenttrail export … | head`),
    # as Unix tools do, instead of a broken-pipe error at exit.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        app(args=argv, prog_name="agenttrail")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    except AgentTrailError as e:
        err.print(f"error: {e}", markup=False)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
