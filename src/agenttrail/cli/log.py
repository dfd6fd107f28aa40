"""Commands that read sessions into and out of the log: import, sessions, show, export,
fountain, replay and quickstart."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agenttrail.cli._common import err, find_session, open_log, out, write_atomically
from agenttrail.cli._options import DbOption, JsonOption, MaxBytesOption, SessionArg
from agenttrail.errors import FormatError, InputError

if TYPE_CHECKING:
    from agenttrail.ingest.importer import ImportReport

# The formats, the importer, replay and Rich's tables are imported by the commands that use
# them, not here: `agenttrail --version` and every other command start without them.

FORMAT_NAMES = ("jsonl", "fountain", "claude_code", "anthropic", "toolbench", "openai")
"""Names ``--format`` accepts (``agenttrail.formats.FORMATS``; tests/cli keeps them equal)."""

__all__ = ["export", "fountain", "import_command", "quickstart", "replay", "sessions", "show"]


def import_command(
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE", help="Transcript files to import.")
    ],
    format: Annotated[
        str | None,
        typer.Option("--format", help=f"Skip detection: one of {', '.join(FORMAT_NAMES)}."),
    ] = None,
    max_bytes: MaxBytesOption = None,
    db: DbOption = None,
) -> None:
    """Import transcripts; print each session id on its own line.

    Every file is read before anything is written; each session is written in one
    transaction. Importing a file again writes nothing new. Only regular files are read,
    each up to --max-bytes.

    Example: `agenttrail import ~/.claude/projects/*/*.jsonl`
    """
    from agenttrail.ingest.importer import read_paths, write_sessions
    from agenttrail.log.store import payload_limit

    # Read everything first: a bad file leaves the database, or its absence, as it was.
    parsed = read_paths(
        files, format=format, max_payload_bytes=payload_limit(), max_bytes=max_bytes
    )
    with open_log(db, create=True) as store:
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


def sessions(db: DbOption = None, json: JsonOption = False) -> None:
    """List sessions: id, started, agent, events, title.

    Oldest start first; a session whose source gave no date has no start time (blank, or
    null in JSON) and comes after the others, in the order they were created.

    Example: `agenttrail sessions --json | jq -r .id`
    """
    from rich.table import Table
    from rich.text import Text

    from agenttrail.codec import json_line
    from agenttrail.views.table import print_table
    from agenttrail.views.terminal import safe

    with open_log(db) as store:
        # the row's created_at is when it was written, not when the session started
        rows = sorted(store.sessions(), key=lambda s: (s.started is None, s.started or ""))
    if json:
        sys.stdout.writelines(json_line(s.record()) + "\n" for s in rows)
        return
    table = Table(expand=True)
    table.add_column("id", no_wrap=True)  # whole, so it can be copied
    table.add_column("started", no_wrap=True)
    table.add_column("agent", overflow="ellipsis", no_wrap=True, max_width=14)
    table.add_column("events", justify="right", no_wrap=True)
    table.add_column("title", overflow="fold", ratio=3)

    def cells() -> Iterator[tuple[Text, ...]]:
        for s in rows:
            title = (s.title or "").splitlines()[0] if s.title else ""
            started = (s.started or "")[:16].replace("T", " ")
            yield tuple(
                Text(safe(v)) for v in (s.id, started, s.agent or "", str(s.head_seq), title)
            )

    print_table(out, table, cells)


def show(
    session: SessionArg,
    full: Annotated[
        bool, typer.Option("--full", help="Show tool results and runtime notes whole.")
    ] = False,
    since: Annotated[
        int | None,
        typer.Option("--since", metavar="SEQ", min=1, help="Show the rows from this seq on."),
    ] = None,
    tail: Annotated[
        int | None,
        typer.Option("--tail", metavar="N", min=1, help="Show the rows of the last N seqs."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Print a session as a transcript: one row per event, a tool call and its result on one.

    The last line says whether the session's hash chain verifies: a transcript read from a
    log changed by hand says where. --since and --tail print a window of a long session
    (a tool call whose result falls outside it is still shown with it).

    Example: `agenttrail show sample-harvey-session --tail 20`
    """
    from agenttrail.log.chain import verify as verify_chain
    from agenttrail.views.terminal import print_session

    if since is not None and tail is not None:
        raise InputError("--since and --tail do not go together: give one")
    with open_log(db) as store:
        found = find_session(store, session)
        (verdict,) = verify_chain(store, [found.id])
        first = since or (max(1, found.head_seq - tail + 1) if tail is not None else 1)
        print_session(out, found, store, full=full, broken_at=verdict.bad_seq, since=first)
    if verdict.ok:
        line = f"chain intact: {verdict.events} events, head {verdict.head_hash.hex()[:16]}"
        out.print(line, style="dim", markup=False)
    else:
        line = f"⚠ chain broken at seq {verdict.bad_seq}: {verdict.reason} (agenttrail verify)"
        out.print(line, style="bold red", markup=False)


def export(
    session: SessionArg,
    format: Annotated[str, typer.Option("--format", help="Export format (jsonl).")] = "jsonl",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file, not stdout.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Export a session, one JSON object per event.

    Each line holds session_id, seq, created_at, actor, payload, hash and anomalies (why a
    tool call or result is not paired; derived, not hashed), then the event's idempotency key
    (key) and, on the first line, the session's fields (session).

    Example: `agenttrail export sample-harvey-session > harvey.jsonl`
    """
    from agenttrail.formats.jsonl import jsonl_from_log

    if format != "jsonl":
        raise InputError(f"unknown export format {format!r} (use jsonl)")
    with open_log(db) as store:
        found = find_session(store, session)
        keys = {seq: key for key, seq in store.event_keys(found.id)}
        lines = jsonl_from_log(store, found.id, session=found, keys=keys)
        if output is None:
            for line in lines:
                sys.stdout.write(line + "\n")
            return
        write_atomically(output, lines)


def fountain(
    session: SessionArg,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file, not stdout.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Render a session as a Fountain screenplay (Harvey session format v1.2).

    Example: `agenttrail fountain sample-harvey-session -o harvey.spmd`
    """
    from agenttrail.formats.fountain import fountain_from_events

    with open_log(db) as store:
        found = find_session(store, session)
        text = fountain_from_events(found, list(store.read(found.id)))
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomically(output, [text.removesuffix("\n")])


def replay(
    session: SessionArg,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="Provider: openai (Chat Completions), anthropic (Messages) or responses.",
        ),
    ] = "openai",
    upto: Annotated[
        int | None,
        typer.Option("--upto", metavar="SEQ", help="Replay the events up to this seq only."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Print the message list a model gets for a session, rebuilt from the log.

    Prints the JSON request body's messages (Anthropic: with system). What replay left out
    or filled in is printed on stderr, one note: line each (docs/replay.md).

    Example: `agenttrail replay sample-harvey-session --format anthropic --upto 12 | jq .`
    """
    from agenttrail.replay import replay as replay_events

    with open_log(db) as store:
        found = find_session(store, session)
        result = replay_events(store.read(found.id), format, upto_seq=upto)
    for note in result.notes:
        err.print(f"note: {note}", markup=False)
    sys.stdout.write(result.json(indent=2) + "\n")


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
    """Import your Claude Code transcripts, show the latest, and verify the whole log.

    When there are no transcripts, records our sample session instead.

    Example: `agenttrail quickstart`
    """
    from agenttrail.ingest.importer import read_paths, write_sessions
    from agenttrail.ingest.sample import record_sample
    from agenttrail.log.chain import verify as verify_chain
    from agenttrail.log.store import payload_limit
    from agenttrail.views.terminal import render_session

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
    with open_log(db, create=True) as store:
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
        out.print(f"FAIL  {v.session_id}  {v.where}: {v.reason}", markup=False)
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
