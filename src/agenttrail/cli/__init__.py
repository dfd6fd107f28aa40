"""The ``agenttrail`` command. Each command parses its arguments, calls the library and prints.

Data goes to stdout and messages to stderr, so ``agenttrail export … | jq`` works. Every
agenttrail error ends as one ``error: …`` line on stderr and exit code 2 for bad input or usage,
1 for a check that found a problem (``verify``, ``reconcile``, ``claims``) or a store failure —
never a traceback.
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
from rich.text import Text

from agenttrail import __version__
from agenttrail.codec import json_line
from agenttrail.errors import AgentTrailError, FormatError, InputError, SessionNotFound
from agenttrail.evidence.audit import audit
from agenttrail.evidence.claims import ClaimCheck, unbacked_claims
from agenttrail.evidence.reconcile import CLASSES, ClaimVerdict
from agenttrail.evidence.reconcile import reconcile as reconcile_claims
from agenttrail.evidence.traces import trace_record
from agenttrail.formats import FORMATS
from agenttrail.formats.fountain import fountain_from_events
from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest.importer import ImportReport, read_paths, write_sessions
from agenttrail.ingest.sample import record_sample
from agenttrail.log.chain import verify as verify_chain
from agenttrail.log.checkpoints import (
    checkpoint_json,
    generate_keys,
    load_checkpoint,
    make_checkpoint,
    verify_checkpoint,
)
from agenttrail.log.migrate import migrate as migrate_log
from agenttrail.log.retention import due_for_removal
from agenttrail.log.retention import retain as retain_sessions
from agenttrail.log.store import LogStore, open_store, payload_limit
from agenttrail.model import Session
from agenttrail.replay import replay as replay_events
from agenttrail.server.auth import RIGHTS, load_secret, mint_token
from agenttrail.views.terminal import render_session, safe

__all__ = ["app", "main"]

app = typer.Typer(
    name="agenttrail",
    help="A flight recorder for AI agents: import, read and verify agent session logs.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)

# soft_wrap: a data or error line is never broken at the terminal width.
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database: a file path, sqlite:///path or postgresql://user@host/dbname[?schema=S]. "
        "Default: $AGENTTRAIL_DATABASE_URL, else ./agenttrail.db.",
        show_default=False,
    ),
]
SessionArg = Annotated[
    str, typer.Argument(metavar="SESSION", help="Session id or a unique prefix of it.")
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

    Example: `agenttrail import ~/.claude/projects/*/*.jsonl`
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

    Example: `agenttrail sessions --json | jq -r .id`
    """
    with _open(db) as store:
        rows = sorted(store.sessions(), key=lambda s: s.started or s.created_at)
    if json:
        for s in rows:
            out.print(json_line(s.record()), markup=False)
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


@app.command()
def show(
    session: SessionArg,
    full: Annotated[
        bool, typer.Option("--full", help="Show tool results and runtime notes whole.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Print a session as a transcript: one row per event, a tool call and its result on one.

    The last line says whether the session's hash chain verifies: a transcript read from a
    log changed by hand says where.

    Example: `agenttrail show sample-harvey-session`
    """
    with _open(db) as store:
        found = find_session(store, session)
        (verdict,) = verify_chain(store, [found.id])
        render_session(out, found, store.read(found.id), full=full, broken_at=verdict.bad_seq)
    if verdict.ok:
        line = f"chain intact: {verdict.events} events, head {verdict.head_hash.hex()[:16]}"
        out.print(line, style="dim", markup=False)
    else:
        line = f"⚠ chain broken at seq {verdict.bad_seq}: {verdict.reason} (agenttrail verify)"
        out.print(line, style="bold red", markup=False)


@app.command()
def export(
    session: SessionArg,
    format: Annotated[str, typer.Option("--format", help="Export format (jsonl).")] = "jsonl",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file, not stdout.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Export a session, one JSON object per event.

    Each line holds session_id, seq, created_at, actor, payload and hash.

    Example: `agenttrail export sample-harvey-session > harvey.jsonl`
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
    session: SessionArg,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file, not stdout.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Render a session as a Fountain screenplay (Harvey session format v1.2).

    Example: `agenttrail fountain sample-harvey-session -o harvey.spmd`
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
    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", help="Also prove the log extends this signed checkpoint."),
    ] = None,
    pubkey: Annotated[
        Path | None,
        typer.Option("--pubkey", help="Public key (PEM) the checkpoint is signed with."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Recompute the hash chain and check every trace row against the log.

    Exits 0 when intact, 1 naming the session and the first bad seq or trace row.

    With --checkpoint and --pubkey, also prove that the log still extends a signed checkpoint,
    so that even a history rewritten consistently by hand is caught.

    Example: `agenttrail verify --checkpoint head.json --pubkey agenttrail.key.pub`
    """
    if (checkpoint is None) != (pubkey is None):
        raise InputError("--checkpoint and --pubkey go together")
    with _open(db) as store:
        ids = [find_session(store, session).id] if session is not None else None
        verdicts = audit(store, ids)
        proof = None
        if checkpoint is not None and pubkey is not None:
            statement = load_checkpoint(checkpoint)
            find_session(store, statement["session_id"])
            proof = verify_checkpoint(store, statement, _read_key(pubkey), key_name=str(pubkey))
    broken = 0
    for v in verdicts:
        if not v.chain_ok:
            broken += 1
            out.print(f"FAIL  {v.session_id}  seq {v.bad_seq}: {v.reason}", markup=False)
        elif v.trace_problems:
            broken += 1
            for problem in v.trace_problems:
                out.print(f"FAIL  {v.session_id}  {problem}", markup=False)
        else:
            out.print(f"ok    {v.session_id}  {v.events} events  head {v.head[:16]}", markup=False)
    err.print(f"{len(verdicts) - broken} of {len(verdicts)} sessions intact", markup=False)
    if proof is not None:
        mark = "ok  " if proof.ok else "FAIL"
        out.print(
            f"{mark}  checkpoint {proof.session_id} seq {proof.seq}: {proof.reason}", markup=False
        )
        broken += not proof.ok
    if broken:
        raise typer.Exit(1)


def _read_key(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read key: {e.strerror or e}") from None


@app.command("reconcile")
def reconcile_command(
    session: SessionArg,
    rerun: Annotated[
        bool,
        typer.Option(
            "--rerun",
            help="Also run each traced model again through its re-runner (entry points in "
            "group agenttrail.rerunners).",
        ),
    ] = False,
    json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Reconcile the numbers the replies state with the trace and, with --rerun, a fresh run.

    Each claim is consistent, misstated, mis-extracted, unbacked, drift or version-moved;
    exit 1 when any claim is not consistent.

    Example: `agenttrail reconcile loan-advice --rerun`
    """
    with _open(db) as store:
        verdicts = reconcile_claims(store, find_session(store, session).id, rerun=rerun)
    if json:
        for v in verdicts:
            out.print(json_line(v.to_json()), markup=False)
    else:
        table = Table(expand=True)
        table.add_column("turn", no_wrap=True)
        table.add_column("claim", overflow="fold", ratio=3, min_width=12)
        table.add_column("stated", no_wrap=True)
        table.add_column("trace", overflow="fold", ratio=2, min_width=10)
        table.add_column("fresh", overflow="fold", ratio=1, min_width=8)
        table.add_column("class", no_wrap=True)
        table.add_column("why", overflow="fold", ratio=4, min_width=12)
        for v in verdicts:
            table.add_row(
                str(v.turn_seq or ""),
                *(escape(safe(text or "")) for text in (v.context, v.stated, v.trace, v.fresh)),
                _verdict_text(v),
                escape(safe(v.why)),
            )
        out.print(table)
    counts = [f"{n} {c}" for c in CLASSES if (n := sum(v.status == c for v in verdicts))]
    err.print(f"{len(verdicts)} claims: {', '.join(counts) or 'none'}", markup=False)
    if any(v.status != "consistent" for v in verdicts):
        raise typer.Exit(1)


def _verdict_text(v: ClaimVerdict) -> Text:
    return Text(v.status, style="green" if v.status == "consistent" else "bold red")


@app.command()
def claims(
    session: SessionArg,
    json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """List the numbers the replies state that no trace output of their turn backs.

    Rounding is allowed for; numbers the user gave are not claims. Exits 1 when there is
    any.

    Example: `agenttrail claims loan-advice --json | jq -r .stated`
    """
    with _open(db) as store:
        found = find_session(store, session)
        unbacked = unbacked_claims(store.read(found.id), store.traces(found.id))
    if json:
        for c in unbacked:
            out.print(json_line(_claim_record(c)), markup=False)
    else:
        table = Table(expand=True)
        table.add_column("turn", no_wrap=True)
        table.add_column("seq", no_wrap=True)
        table.add_column("stated", no_wrap=True)
        table.add_column("claim", overflow="fold", ratio=1, min_width=12)
        table.add_column("why", overflow="fold", ratio=1, min_width=12)
        for c in unbacked:
            table.add_row(
                str(c.turn_seq or ""),
                str(c.seq),
                *(escape(safe(text)) for text in (c.claim.text, c.context, c.why)),
            )
        out.print(table)
    err.print(f"{len(unbacked)} unbacked claim{'' if len(unbacked) == 1 else 's'}", markup=False)
    if unbacked:
        raise typer.Exit(1)


def _claim_record(c: ClaimCheck) -> dict[str, object]:
    return {
        "turn_seq": c.turn_seq,
        "seq": c.seq,
        "stated": c.claim.text,
        "value": str(c.claim.value),
        "unit": c.claim.unit,
        "currency": c.claim.currency,
        "span": list(c.claim.span),
        "why": c.why,
        "context": c.context,
    }


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
    """Import your Claude Code transcripts, show the latest, and verify the whole log.

    When there are no transcripts, records our sample session instead.

    Example: `agenttrail quickstart`
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


@app.command()
def traces(
    session: SessionArg,
    json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """List a session's trace rows: the evidence kept for tool calls that returned an envelope.

    Each row shows the turn it belongs to and its record-hash status.

    Example: `agenttrail traces mortgage-session`
    """
    with _open(db) as store:
        rows = store.traces(find_session(store, session).id)
    if json:
        for row in rows:
            out.print(json_line(trace_record(row, envelope=False)), markup=False)
        return
    if not rows:
        out.print("no trace rows: no tool result of this session is an envelope (docs/evidence.md)")
        return
    table = Table(expand=True)
    for name in ("trace", "turn", "call", "result", "tool", "status", "record hash"):
        table.add_column(name, no_wrap=name != "tool")
    for row in rows:
        table.add_row(
            str(row.id),
            str(row.turn_seq or ""),
            str(row.call_seq),
            str(row.result_seq),
            escape(safe(row.tool)),
            _status_text(row.status),
            (row.record_hash or "")[:16],
        )
    out.print(table)


@app.command()
def trace(
    trace_id: Annotated[int, typer.Argument(metavar="ID", help="Trace row id (from traces).")],
    db: DbOption = None,
) -> None:
    """Show one trace row: the call, the envelope verbatim, its record hash and status.

    Also shows the turn the row joins.

    Example: `agenttrail trace 1`
    """
    with _open(db) as store:
        row = store.trace(trace_id)
    for key, value in trace_record(row, envelope=True).items():
        text = value if isinstance(value, str) else json_line(value)
        out.print(f"{key}: {safe(text)}", markup=False)


def _status_text(status: str) -> Text:
    styles = {
        "verified": "green",
        "computed": "cyan",
        "mismatch": "bold red",
        "invalid": "bold red",
    }
    return Text(status, style=styles.get(status, ""))


@app.command()
def retain(
    older_than: Annotated[
        float, typer.Option("--older-than", metavar="DAYS", help="Remove sessions idle this long.")
    ],
    reason: Annotated[str, typer.Option("--reason", help="Why, kept in the tombstone.")] = (
        "retention schedule"
    ),
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Remove whole sessions whose last event is older than DAYS, leaving a tombstone for each.

    Trace rows go with their session; a tombstone keeps the session id, its event count,
    last chain hash, the time and the reason.

    Example: `agenttrail retain --older-than 365 --reason "records schedule R-7"`
    """
    with _open(db) as store:
        if dry_run:
            for s in due_for_removal(store, older_than):
                out.print(f"would remove {s.id}  {s.head_seq} events", markup=False)
            return
        stones = retain_sessions(store, older_than, reason=reason)
    for stone in stones:
        out.print(
            f"removed {stone.session_id}  {stone.head_seq} events  "
            f"head {stone.head_hash.hex()[:16]}  {stone.deleted_at}",
            markup=False,
        )
    err.print(f"{len(stones)} session{'' if len(stones) == 1 else 's'} removed", markup=False)


@app.command()
def keygen(
    out_file: Annotated[
        Path,
        typer.Option("--out", help="Private key file to write; the public key goes to FILE.pub."),
    ] = Path("agenttrail.key"),
) -> None:
    """Make an Ed25519 key pair for signing checkpoints (private key readable by you only).

    Example: `agenttrail keygen --out agenttrail.key`
    """
    public_file = out_file.with_name(out_file.name + ".pub")
    for path in (out_file, public_file):
        if path.exists():
            raise InputError(f"{path} exists; not overwriting a key")
    private, public = generate_keys()
    try:
        fd = os.open(out_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(private)
        public_file.write_bytes(public)
    except OSError as e:
        raise InputError(f"cannot write {out_file}: {e.strerror or e}") from None
    out.print(f"{out_file}\n{public_file}", markup=False)


@app.command()
def checkpoint(
    session: SessionArg,
    key: Annotated[Path, typer.Option("--key", help="Ed25519 private key (PEM), from keygen.")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file, not stdout.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Sign the session's current head (seq, chain hash, time) with your key.

    Keep the checkpoint somewhere the database's owner cannot rewrite.

    Example: `agenttrail checkpoint mortgage-session --key agenttrail.key -o head.json`
    """
    with _open(db) as store:
        found = find_session(store, session)
        signed = make_checkpoint(store, found.id, _read_key(key), key_name=str(key))
    text = checkpoint_json(signed)
    if output is None:
        out.print(text, markup=False)
    else:
        _write_atomically(output, [text])


@app.command()
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
    with _open(db) as store:
        found = find_session(store, session)
        result = replay_events(store.read(found.id), format, upto_seq=upto)
    for note in result.notes:
        err.print(f"note: {note}", markup=False)
    sys.stdout.write(result.json(indent=2) + "\n")


SecretOption = Annotated[
    Path | None,
    typer.Option(
        "--secret-file",
        help="Key that signs tokens. Default: $AGENTTRAIL_SECRET, else DATABASE.secret "
        "(made on first use, readable by you only).",
        show_default=False,
    ),
]


def _secret(store: LogStore, secret_file: Path | None) -> bytes:
    if not store.url.startswith("sqlite:///") and not (
        secret_file or os.environ.get("AGENTTRAIL_SECRET")
    ):
        # A database server has no file beside it, and replicas must share one secret.
        raise InputError(
            "a shared database needs the token secret in AGENTTRAIL_SECRET or "
            "--secret-file, the same for every server replica"
        )
    default = Path(f"{store.url.removeprefix('sqlite:///')}.secret")
    return load_secret(secret_file or default)


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8787,
    workspace: Annotated[
        Path, typer.Option("--workspace", help="Folder the user's file tools may touch.")
    ] = Path("."),
    secret_file: SecretOption = None,
    db: DbOption = None,
) -> None:
    """Serve the web viewer, the REST API, the live feed and the user's tools.

    Prints the viewer's address with an admin token.

    Example: `agenttrail serve --port 8787 --workspace ~/project`
    """
    import uvicorn  # the server's imports cost half a second; only serve pays them

    from agenttrail.server.app import create_app
    from agenttrail.server.tools import ToolRegistry

    with _open(db, create=True) as store:
        secret = _secret(store, secret_file)
        registry = ToolRegistry.with_entry_points(workspace.resolve())
        app_ = create_app(store, secret=secret, tools=registry)
        token = mint_token(secret, rights=RIGHTS)
        # The viewer keeps the token from the address's #fragment (never sent to the server
        # in a request line) in sessionStorage, then drops it from the address bar.
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        shown = f"[{shown}]" if ":" in shown else shown
        out.print(f"admin token (24 h): {token}", markup=False)
        out.print(f"serving {store.url} on http://{host}:{port}  (docs: /docs)", markup=False)
        out.print(f"open the viewer: http://{shown}:{port}/#token={token}", markup=False)
        uvicorn.run(app_, host=host, port=port, ws="websockets-sansio", log_level="warning")


@app.command()
def token(
    rights: Annotated[
        str, typer.Option("--rights", help=f"Comma-separated, from: {', '.join(RIGHTS)}.")
    ] = "read",
    session: Annotated[
        str | None, typer.Option("--session", help="Scope to one session (default: all).")
    ] = None,
    ttl: Annotated[float, typer.Option("--ttl", help="Hours the token is valid.")] = 24,
    secret_file: SecretOption = None,
    db: DbOption = None,
) -> None:
    """Mint a signed access token for the server: a session scope, rights and an expiry.

    Example: `agenttrail token --session sample-harvey-session --rights read,append`
    """
    with _open(db) as store:
        scope = find_session(store, session).id if session is not None else "*"
        secret = _secret(store, secret_file)
    wanted = [r.strip() for r in rights.split(",") if r.strip()]
    out.print(mint_token(secret, rights=wanted, session=scope, ttl_s=ttl * 3600), markup=False)


@app.command("migrate")
def migrate_command(
    source: Annotated[
        str, typer.Option("--from", metavar="URL", help="Database to copy from (only read).")
    ],
    target: Annotated[
        str, typer.Option("--to", metavar="URL", help="Database to copy into (set up if new).")
    ],
) -> None:
    """Copy every session and tombstone to another database, then verify the copies there.

    Events keep their seq, time, bytes and chain hashes; keys and trace rows are copied
    too. Each source session is verified first. Exits 1 when one does not verify. Running
    it again copies only what is new.

    Example: `agenttrail migrate --from sqlite:///agenttrail.db --to postgresql://app@db/agenttrail`
    """
    with _open(source) as src, _open(target, create=True) as dst:
        report = migrate_log(src, dst)
    for m in report.sessions:
        mark = "ok    " if m.ok else "FAIL  "
        copied = f"{m.events} of {_count(m.head_seq, 'event')} copied"
        line = f"{mark}{m.session_id}  {copied}, {_count(m.traces, 'trace row')}"
        out.print(line + (f": {m.problem}" if m.problem else ""), markup=False)
    err.print(
        f"{_count(len(report.sessions), 'session')} and "
        f"{_count(report.tombstones, 'tombstone')} copied to {dst.url}",
        markup=False,
    )
    if not report.ok:
        raise typer.Exit(1)


def _count(n: int, noun: str) -> str:
    """``1 session``, ``2 sessions``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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
