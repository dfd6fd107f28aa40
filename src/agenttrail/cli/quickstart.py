"""``agenttrail quickstart``: import the user's Claude Code transcripts (or record the sample
session), show the latest, verify the whole log, and say what to run next."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agenttrail.cli._common import err, open_log, out, print_report
from agenttrail.cli._options import DbOption
from agenttrail.errors import FormatError
from agenttrail.views.units import counted

__all__ = ["quickstart"]


def quickstart(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="PATH",
            help="Claude Code transcripts (- reads standard input); default "
            "~/.claude/projects/**/*.jsonl.",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Import your Claude Code transcripts, show the latest, and verify the whole log.

    When there are no transcripts, records our sample session instead.

    Example:

    - `agenttrail quickstart`
    """
    from agenttrail.ingest.folders import expand_paths
    from agenttrail.ingest.importer import read_paths, write_sessions
    from agenttrail.ingest.sample import record_sample
    from agenttrail.log.chain import verify as verify_chain
    from agenttrail.log.store import payload_limit
    from agenttrail.views.terminal import render_session

    limit = payload_limit()
    skipped = 0  # transcripts found that could not be read
    if paths:  # named by the user: a bad one is bad input
        parsed = read_paths(expand_paths(paths, suffixes=(".jsonl",)), max_payload_bytes=limit)
    else:  # found under ~/.claude/projects: one odd file does not stop the others
        parsed = []
        for path in _claude_transcripts():
            try:
                parsed += read_paths([path], max_payload_bytes=limit)
            except FormatError as e:
                err.print(f"skipped: {e}", markup=False)
                skipped += 1
    with open_log(db, create=True) as store:
        reports = write_sessions(store, parsed)
        for report in reports:
            print_report(report)
        candidates = [store.get_session(r.session_id) for r in reports]
        earlier = not candidates  # none read now: the Claude Code sessions imported before
        if earlier:
            candidates = [s for s in store.sessions() if s.metadata.get("format") == "claude_code"]
        if candidates:
            # a main session over a subagent's transcript (one of its steps, told apart by
            # its agentId), which started later than the session that ran it
            main = [s for s in candidates if "agentId" not in s.metadata] or candidates
            shown = max(main, key=lambda s: s.started or s.created_at).id
            if len(candidates) > 1:  # which one, and why, before its transcript
                said = _showing(len(candidates), earlier=earlier, aside=len(candidates) - len(main))
                err.print(said, markup=False)
        else:
            found = (
                f"none of {counted(skipped, 'Claude Code transcript')} could be read"
                if skipped
                else "no Claude Code transcripts found"
            )
            err.print(f"{found}: recording the sample session", markup=False)
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
    _print_next(shown, db)
    if broken:
        raise typer.Exit(1)


def _showing(count: int, *, earlier: bool, aside: int = 0) -> str:
    """Which of ``count`` sessions quickstart shows: the most recently started of those it read,
    or (``earlier``: it read none) of the Claude Code sessions already in the log; ``aside``
    of them subagents' transcripts, left out."""
    # of the sessions it chose among: the subagents' transcripts are not among them
    left_out = f" ({counted(aside, 'subagent transcript')} left out)" if aside else ""
    kind = "Claude Code session" if earlier else "session"
    which = (
        f"the one {kind}"
        if count - aside == 1
        else f"the most recently started of the {counted(count - aside, kind)}"
    )
    if earlier:
        return f"no Claude Code transcript read: showing {which} here{left_out}"
    return f"showing {which} read{left_out}"


def _print_next(session_id: str, db: str | None) -> None:
    """What to run next on the session quickstart showed (on stderr: a message, not data),
    typed as this ``agenttrail`` was run (:func:`_command`) and with ``--db`` when given."""
    import shlex

    command, elsewhere = _command()
    log = f" --db {shlex.quote(db)}" if db is not None else ""
    sid = shlex.quote(session_id)
    lines = []
    if elsewhere:
        lines.append(f"agenttrail is {command} here (not on PATH; activate its venv to type")
        lines.append("agenttrail alone)")
    lines += [
        "next: read it again, save it as one HTML page, or browse every session in the",
        "viewer (serve prints the link to open, with its token):",
        f"  {command} show {sid}{log}",
        f"  {command} export {sid} -o session.html{log}",
        f"  {command} serve{log}",
    ]
    err.print("\n".join(lines), markup=False, soft_wrap=True)


def _command() -> tuple[str, bool]:
    """How to type this ``agenttrail`` again, and whether that is a path because the command
    on ``PATH`` (if any) is not the one running (``.venv/bin/agenttrail`` run by its path)."""
    import shlex
    import shutil
    import sys

    run = Path(sys.argv[0])
    if run.name != "agenttrail":  # python -m agenttrail.cli, or a program embedding the CLI
        return "agenttrail", False
    found = shutil.which("agenttrail")
    if found is not None and Path(found).resolve() == run.resolve():
        return "agenttrail", False
    return shlex.quote(str(run)), True


def _claude_transcripts() -> list[Path]:
    root = Path.home() / ".claude" / "projects"
    return sorted(root.rglob("*.jsonl")) if root.is_dir() else []
