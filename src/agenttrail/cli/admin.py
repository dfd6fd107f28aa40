"""Commands that look after the log and serve it: retain, migrate, serve and token."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import getpass
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agenttrail.cli._common import err, find_session, open_log, out
from agenttrail.cli._listing import print_json_lines
from agenttrail.cli._options import DbOption, NoRedactOption
from agenttrail.errors import InputError
from agenttrail.server.auth import RIGHTS  # a tuple, for --rights help; PyJWT loads on use
from agenttrail.server.listen import PORTS, bound_socket, url_of
from agenttrail.views.units import counted

if TYPE_CHECKING:
    from agenttrail.log.store import LogStore

__all__ = ["erase", "migrate_command", "proxy", "retain", "serve", "token"]


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
    json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='One JSON object per session: {"session_id", "head_seq", "head_hash", '
            '"deleted_at", "reason"}; with --dry-run {"session_id", "head_seq"}.',
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Remove whole sessions whose last event is older than DAYS, leaving a tombstone for each.

    Trace rows go with their session; a tombstone keeps the session id, its event count,
    last chain hash, the time and the reason.

    Example:

    - `agenttrail retain --older-than 365 --dry-run`, then
    - `agenttrail retain --older-than 365 --reason "records schedule R-7"`
    """
    from agenttrail.log.retention import due_for_removal
    from agenttrail.log.retention import retain as retain_sessions

    with open_log(db) as store:
        if dry_run:
            due = due_for_removal(store, older_than)
            if json:
                print_json_lines({"session_id": s.id, "head_seq": s.head_seq} for s in due)
            for s in [] if json else due:
                out.print(f"would remove {s.id}  {counted(s.head_seq, 'event')}", markup=False)
            err.print(f"{counted(len(due), 'session')} would be removed", markup=False)
            return
        stones = retain_sessions(store, older_than, reason=reason)
    if json:
        print_json_lines(
            {**dataclasses.asdict(stone), "head_hash": stone.head_hash.hex()} for stone in stones
        )
    for stone in [] if json else stones:
        out.print(
            f"removed {stone.session_id}  {counted(stone.head_seq, 'event')}  "
            f"head {stone.head_hash.hex()[:16]}  {stone.deleted_at}",
            markup=False,
        )
    err.print(f"{counted(len(stones), 'session')} removed", markup=False)


def erase(
    session: Annotated[str, typer.Argument(metavar="SESSION", help="Session id or prefix.")],
    seqs: Annotated[
        list[int], typer.Argument(metavar="SEQ...", help="The events whose payload to erase.")
    ],
    reason: Annotated[str, typer.Option("--reason", help="Why, kept in the erasure event.")],
    by: Annotated[
        str | None,
        typer.Option("--by", help="Who erases, kept in the erasure event. Default: your login."),
    ] = None,
    json: Annotated[
        bool,
        typer.Option("--json", help='One JSON object: {"session_id", "seqs", "erasure_seq"}.'),
    ] = False,
    db: DbOption = None,
) -> None:
    """Erase the payload of events (a leaked key, a right to erasure), keeping the chain whole.

    The payload bytes and salt leave the log and its files; each event's salted digest stays,
    so verify still passes and reports the events as erased. A chained erasure event records
    who, when, why and which seqs. Only sessions chained as v2 can be erased
    (docs/log-format.md, Erasure).

    Example:

    - `agenttrail erase sample-harvey-session 7 --reason "leaked key, SEC-12"`
    """
    who = by if by is not None else getpass.getuser()
    with open_log(db) as store:
        found = find_session(store, session)
        titled_by = _title_source(found.title, store, found.id, seqs)
        done = store.erase(found.id, seqs, by=who, reason=reason)
    if titled_by is not None:
        err.print(
            f"warning: the session's title is the first line of seq {titled_by}, erased now: "
            "a session's fields are covered by its chain and cannot be erased, so sessions, "
            "search and the exports still show it (docs/log-format.md, Erasure)",
            markup=False,
        )
    if json:
        print_json_lines([dataclasses.asdict(done)])
        return
    listed = ", ".join(str(seq) for seq in done.seqs)
    out.print(
        f"erased {done.session_id}  seq {listed}  recorded at seq {done.erasure_seq}",
        markup=False,
    )


def _title_source(
    title: str | None, store: LogStore, session_id: str, seqs: list[int]
) -> int | None:
    """The first of ``seqs`` whose message text the session's ``title`` was taken from (an
    import titles a session with its first prompt's first line:
    :func:`agenttrail.formats.title_from`), else ``None``."""
    from agenttrail.formats import title_from
    from agenttrail.model import content_text

    for seq in sorted(set(seqs)) if title else ():
        for event in store.read(session_id, after_seq=seq - 1, limit=1):
            if title_from(content_text(event.payload.get("content"))) == title:
                return seq
    return None


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
    from agenttrail.server.auth import load_secret

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


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option("--port", min=PORTS[0], max=PORTS[1], help="Port to listen on (0: any).")
    ] = 8787,
    workspace: Annotated[
        Path, typer.Option("--workspace", help="Folder the user's file tools may touch.")
    ] = Path("."),
    max_body_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-body-bytes",
            envvar="AGENTTRAIL_MAX_BODY_BYTES",
            min=1,
            help="Largest request body the server reads, in bytes; a larger one is 413. "
            "Default: 32 MiB.",
            show_default=False,
        ),
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-origin",
            envvar="AGENTTRAIL_ALLOW_ORIGINS",
            metavar="ORIGIN",
            help="A browser origin (https://app.example) that may call the API and open the "
            "live feed besides the server's own; repeat for more, * for any. Default: none "
            "(same-origin only). The variable takes them separated by spaces.",
            show_default=False,
        ),
    ] = None,
    secret_file: SecretOption = None,
    no_redact: NoRedactOption = False,
    db: DbOption = None,
) -> None:
    """Serve the web viewer, the REST API, the live feed and the user's tools.

    Prints the viewer's address with an admin token.

    Example:

    - `agenttrail serve --port 8787 --workspace ~/project`
    """
    import uvicorn  # the server's imports cost half a second; only serve pays them

    from agenttrail.server.app import create_app
    from agenttrail.server.auth import mint_token
    from agenttrail.server.guard import DEFAULT_MAX_BODY_BYTES
    from agenttrail.server.tools import ToolRegistry

    # bound first: a port in use leaves no new log and no secret file behind
    with bound_socket(host, port) as sock, open_log(db, create=True, no_redact=no_redact) as store:
        secret = _secret(store, secret_file)
        registry = ToolRegistry.with_entry_points(workspace.resolve())
        app_ = create_app(
            store,
            secret=secret,
            tools=registry,
            max_body_bytes=max_body_bytes or DEFAULT_MAX_BODY_BYTES,
            allowed_origins=allow_origin or (),
        )
        token = mint_token(secret, rights=RIGHTS)
        # The viewer keeps the token from the address's #fragment (never sent to the server
        # in a request line) in sessionStorage, then drops it from the address bar.
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        out.print(f"admin token (24 h): {token}", markup=False)
        out.print(f"serving {store.url} on {url_of(sock, host)}  (docs: /docs)", markup=False)
        out.print(f"open the viewer: {url_of(sock, shown)}/#token={token}", markup=False)
        # `agenttrail` dies quietly on SIGPIPE so that `export … | head` ends cleanly
        # (cli/__init__.py); a server must not: a client that vanishes mid-write makes the
        # socket write fail with EPIPE, which uvicorn and the live feed handle as a gone
        # client, while the signal would end the whole process and every request in flight.
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        config = uvicorn.Config(
            app_,
            host=host,
            port=port,
            ws="websockets-sansio",
            log_level="warning",
            # Used as asyncio.timeout(seconds), so a fraction works; uvicorn hints int.
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,  # type: ignore[arg-type]
        )
        with _stop_signals_end_the_server():
            uvicorn.Server(config).run(sockets=[sock])
    # Leaving `with open_log` closed the store: on SQLite the last connection's close
    # checkpoints the write-ahead log into the database and removes the -wal file. What is
    # left is the interpreter's exit, whose last full garbage collection over FastAPI's
    # objects takes up to half a second on a busy machine; the process is ending, so freeze
    # them (never collected) and let the OS reclaim the memory.
    gc.freeze()


SHUTDOWN_GRACE_S = 0.25
"""How long `serve`, told to stop, lets requests in flight finish before it cancels them
(seconds): an append takes milliseconds, and the whole stop must take under a second."""


@contextlib.contextmanager
def _stop_signals_end_the_server() -> Iterator[None]:
    """SIGTERM and SIGINT stop the server gracefully and then return from ``run``.

    uvicorn handles both while it serves, and once it has stopped it raises the signal again
    for the handler that was there before; with the default one that kills the process before
    the store is closed (a -wal file left, exit -15). Here that handler does nothing, so
    ``serve`` goes on to close its store and exits 0.
    """
    stops = (signal.SIGTERM, signal.SIGINT)
    before = {signum: signal.signal(signum, lambda *_: None) for signum in stops}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def proxy(
    upstream: Annotated[
        str,
        typer.Option(
            "--upstream", metavar="URL", help="The provider's base URL requests go on to."
        ),
    ],
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option("--port", min=PORTS[0], max=PORTS[1], help="Port to listen on (0: any).")
    ] = 8788,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            help="How long the upstream may take to answer or stay silent mid-stream. "
            "Default: $AGENTTRAIL_PROXY_TIMEOUT, else 600.",
            show_default=False,
        ),
    ] = None,
    no_redact: NoRedactOption = False,
    db: DbOption = None,
) -> None:
    """Record any agent: forward OpenAI- or Anthropic-compatible API calls, logging each one.

    Point the agent's base URL at the proxy; requests and answers (streams too) pass through
    unchanged, and each exchange is appended to the log as it ends. Credentials are never
    stored. An unreachable upstream answers 502. SIGTERM or Ctrl-C stops it (exit 0) once
    the exchanges in flight have ended and been written.

    Example:

    - `agenttrail proxy --upstream https://api.openai.com`, then
    - `OPENAI_BASE_URL=http://127.0.0.1:8788/v1 python agent.py`
    """
    from agenttrail.ingest.proxy import serve_proxy  # aiohttp and Starlette: only proxy pays
    from agenttrail.log.redact import REDACT_ENV

    if no_redact:  # capture's writer process opens the log itself: it reads the switch here
        os.environ[REDACT_ENV] = "0"

    def listening(url: str) -> None:
        # the log opened once the port is bound (a port in use leaves no new log behind):
        # a log that cannot be opened fails here, before the proxy serves
        with open_log(db, create=True) as store:
            where = store.url
        out.print(f"forwarding {url} to {upstream}, recording to {where}", markup=False)

    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as serve: a gone client is not our end
    with _stop_signals_end_the_server():
        serve_proxy(db, upstream, host=host, port=port, timeout_s=timeout, listening=listening)


MIN_TTL_HOURS = 1 / 60
"""The shortest: one minute. A token's times are whole seconds (RFC 7519 NumericDate), so
``--ttl 0.0001`` minted one that expired as it was issued."""

MAX_TTL_HOURS = 87_600
"""The longest a token ``agenttrail token`` mints is valid: ten years, in hours. Longer is
no use (a lost token is revoked only by a new server secret), and ``--ttl 1e300`` made an
expiry (RFC 7519 ``exp``, seconds) of 304 digits; ``nan`` and ``inf`` were a traceback."""


def token(
    rights: Annotated[
        str, typer.Option("--rights", help=f"Comma-separated, from: {', '.join(RIGHTS)}.")
    ] = "read",
    session: Annotated[
        str | None, typer.Option("--session", help="Scope to one session (default: all).")
    ] = None,
    ttl: Annotated[
        float,
        typer.Option(
            "--ttl", help=f"Hours the token is valid: a minute (0.0167) to {MAX_TTL_HOURS:,}."
        ),
    ] = 24,
    secret_file: SecretOption = None,
    db: DbOption = None,
) -> None:
    """Mint a signed access token for the server: a session scope, rights and an expiry.

    Example:

    - `agenttrail token --session sample-harvey-session --rights read,append`
    """
    from agenttrail.server.auth import mint_token

    if not MIN_TTL_HOURS <= ttl <= MAX_TTL_HOURS:  # NaN too: it compares false
        raise InputError(
            f"--ttl takes the hours the token is valid, from a minute (0.0167) to "
            f"{MAX_TTL_HOURS:,} (ten years): got {ttl}"
        )
    with open_log(db) as store:
        scope = find_session(store, session).id if session is not None else "*"
        secret = _secret(store, secret_file)
    wanted = [r.strip() for r in rights.split(",") if r.strip()]
    if not wanted:  # a token of no rights is refused by every route
        raise InputError(f"--rights names no right: give one or more of {', '.join(RIGHTS)}")
    out.print(mint_token(secret, rights=wanted, session=scope, ttl_s=ttl * 3600), markup=False)


def migrate_command(
    source: Annotated[
        str, typer.Option("--from", metavar="URL", help="Database to copy from (only read).")
    ],
    target: Annotated[
        str, typer.Option("--to", metavar="URL", help="Database to copy into (set up if new).")
    ],
    json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='One JSON object per session: {"session_id", "head_seq", "events", "traces", '
            '"ok", "problem"}.',
        ),
    ] = False,
) -> None:
    """Copy every session and tombstone to another database, then verify the copies there.

    Events keep their seq, time, bytes and chain hashes; keys and trace rows are copied
    too. Each source session is verified first. Exits 1 when one does not verify. Running
    it again copies only what is new.

    Example:

    - `agenttrail migrate --from agenttrail.db --to sqlite:///copy.db` (or
      `--to postgresql://app@db/agenttrail`)
    """
    from agenttrail.ingest.migrate import migrate as migrate_log

    with open_log(source) as src, open_log(target, create=True) as dst:
        report = migrate_log(src, dst)
    if json:
        print_json_lines({**dataclasses.asdict(m), "ok": m.ok} for m in report.sessions)
    for m in [] if json else report.sessions:
        mark = "ok    " if m.ok else "FAIL  "
        copied = f"{m.events} of {_count(m.head_seq, 'event')} copied"
        line = f"{mark}{m.session_id}  {copied}, {_count(m.traces, 'trace row')}"
        out.print(line + (f": {m.problem}" if m.problem else ""), markup=False)
    events = sum(m.events for m in report.sessions)  # none again for a copy made before
    err.print(
        f"{_count(len(report.sessions), 'session')}: {_count(events, 'event')} and "
        f"{_count(report.tombstones, 'tombstone')} copied to {dst.url}",
        markup=False,
    )
    if not report.ok:
        raise typer.Exit(1)


def _count(n: int, noun: str) -> str:
    """``1 session``, ``2 sessions``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
