"""Commands over the evidence: verify, reconcile, claims, traces, trace, and the signed
checkpoints (keygen, checkpoint)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agenttrail.cli._common import (
    STDIO,
    err,
    find_session,
    open_log,
    out,
    output_file,
    write_output,
)
from agenttrail.cli._listing import is_terminal, list_table, print_tsv
from agenttrail.cli._options import DbOption, JsonOption, SessionArg, complete_session
from agenttrail.errors import InputError
from agenttrail.views.units import counted

if TYPE_CHECKING:
    from rich.text import Text

    from agenttrail.evidence.claims import ClaimCheck
    from agenttrail.evidence.reconcile import ClaimVerdict

__all__ = ["checkpoint", "claims", "keygen", "reconcile_command", "trace", "traces", "verify"]


def verify(
    session: Annotated[
        str | None,
        typer.Argument(
            metavar="SESSION",
            help="Session id or prefix; all sessions when omitted.",
            autocompletion=complete_session,
        ),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            help="Also prove the log extends this signed checkpoint; - reads stdin.",
        ),
    ] = None,
    pubkey: Annotated[
        Path | None,
        typer.Option(
            "--pubkey", help="Public key (PEM) the checkpoint is signed with; - reads stdin."
        ),
    ] = None,
    json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Recompute the hash chain and check every trace row against the log.

    Exits 0 when intact, 1 naming the session and the first bad seq or trace row, or the
    column of a session row that cannot be read; the other sessions are checked all the same.

    With --checkpoint and --pubkey, also prove that the log still extends a signed checkpoint,
    so that even a history rewritten consistently by hand is caught.

    --json: one object per session, `{"session_id", "ok", "events", "head", "bad_seq",
    "reason", "trace_problems", "erased"}` (the API's verdict), then, when the log's own rows
    (tombstones, log keys) do not verify, one `{"log": {"ok": false, "problems"}}`, then with
    --checkpoint one `{"checkpoint": {"session_id", "seq", "ok", "reason"}}`; the exit code is
    the same.

    Example:

    - `agenttrail verify --checkpoint head.json --pubkey agenttrail.key.pub`
    """
    from agenttrail.evidence.audit import audit
    from agenttrail.log.chain import log_chain_problems
    from agenttrail.log.checkpoints import load_checkpoint, verify_checkpoint

    if (checkpoint is None) != (pubkey is None):
        raise InputError("--checkpoint and --pubkey go together")
    if checkpoint == STDIO and pubkey == STDIO:
        raise InputError("--checkpoint and --pubkey cannot both read stdin: name one as a file")
    with open_log(db) as store:
        ids = [find_session(store, session).id] if session is not None else None
        statement = load_checkpoint(_file(checkpoint)) if checkpoint is not None else None
        if statement is not None and ids is not None and statement["session_id"] != ids[0]:
            raise InputError(
                f"--checkpoint {checkpoint}: a checkpoint of session {statement['session_id']}, "
                f"not of {ids[0]}: name that session, or none to verify them all"
            )
        verdicts = audit(store, ids)
        # The log's own rows (tombstones, log keys) belong to no session: checked with all.
        log_problems = log_chain_problems(store) if session is None else []
        proof = None
        if statement is not None and pubkey is not None:
            proof = verify_checkpoint(store, statement, _read_key(pubkey), key_name=str(pubkey))
    if json:
        from agenttrail.cli._listing import print_json_lines

        print_json_lines({"session_id": v.session_id, **v.record()} for v in verdicts)
        if log_problems:
            print_json_lines([{"log": {"ok": False, "problems": log_problems}}])
        if proof is not None:
            print_json_lines([{"checkpoint": dataclasses.asdict(proof)}])
        if not all(v.ok for v in verdicts) or log_problems or (proof is not None and not proof.ok):
            raise typer.Exit(1)
        return
    from agenttrail.views.safe import safe

    # safe(): a session id changed by hand, or a checkpoint file's, may hold a terminal control
    broken = 0
    for v in verdicts:
        if not v.chain_ok:
            broken += 1
            out.print(safe(f"FAIL  {v.session_id}  {v.where}: {v.reason}"), markup=False)
        elif v.trace_problems:
            broken += 1
            for problem in v.trace_problems:
                out.print(safe(f"FAIL  {v.session_id}  {problem}"), markup=False)
        else:
            erased = f"  erased: seq {', '.join(map(str, v.erased))}" if v.erased else ""
            line = f"ok    {v.session_id}  {v.events} events  head {v.head[:16]}{erased}"
            out.print(safe(line), markup=False)
    for problem in log_problems:
        out.print(safe(f"FAIL  log  {problem}"), markup=False)
    broken += bool(log_problems)
    intact = len(verdicts) - broken + bool(log_problems)
    own = "; the log's own rows do not verify" if log_problems else ""
    err.print(f"{intact} of {len(verdicts)} sessions intact{own}", markup=False)
    if proof is not None:
        mark = "ok  " if proof.ok else "FAIL"
        line = f"{mark}  checkpoint {proof.session_id} seq {proof.seq}: {proof.reason}"
        out.print(safe(line), markup=False)
        broken += not proof.ok
    if broken:
        raise typer.Exit(1)


def _file(path: Path) -> Path:
    """``path``, or the file of standard input when it is ``-`` (POSIX ``/dev/stdin``: the
    command's readers and their error messages work on it as on any file)."""
    return Path("/dev/stdin") if path == STDIO else path


def _read_key(path: Path) -> bytes:
    path = _file(path)
    try:
        return path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read key: {e.strerror or e}") from None


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
    exit 1 when any claim is not consistent. In a pipe, one tab-separated line per claim:
    turn, claim, stated, trace, fresh, class, why.

    Example:

    - `agenttrail reconcile sample-harvey-session --json | jq -r .status`
    """
    from rich.markup import escape

    from agenttrail.codec import json_line
    from agenttrail.evidence.reconcile import CLASSES
    from agenttrail.evidence.reconcile import reconcile as reconcile_claims
    from agenttrail.views.safe import safe

    with open_log(db) as store:
        verdicts = reconcile_claims(store, find_session(store, session).id, rerun=rerun)
    if json:
        for v in verdicts:
            out.print(json_line(v.to_json()), markup=False)
    elif not is_terminal():
        print_tsv(
            (v.turn_seq, v.context, v.stated, v.trace, v.fresh, v.status, v.why) for v in verdicts
        )
    else:
        # the trace and fresh columns only when a claim has one: empty, they took a sixth of
        # an 80-column terminal from the reason, and "fresh" was folded to "fres" / "h"
        traced = any(v.trace for v in verdicts)
        rerun_shown = any(v.fresh for v in verdicts)
        table = list_table()
        table.add_column("turn", no_wrap=True)
        table.add_column("claim", overflow="fold", ratio=3, min_width=12)
        table.add_column("stated", no_wrap=True)
        if traced:
            table.add_column("trace", overflow="fold", ratio=2, min_width=10)
        if rerun_shown:
            table.add_column("fresh", overflow="fold", ratio=1, min_width=8)
        table.add_column("class", no_wrap=True)
        table.add_column("why", overflow="fold", ratio=4, min_width=12)
        for v in verdicts:
            texts = [v.context, v.stated]
            texts += [v.trace] if traced else []
            texts += [v.fresh] if rerun_shown else []
            table.add_row(
                str(v.turn_seq or ""),
                *(escape(safe(text or "")) for text in texts),
                _verdict_text(v),
                escape(safe(v.why)),
            )
        out.print(table)
    counts = [f"{n} {c}" for c in CLASSES if (n := sum(v.status == c for v in verdicts))]
    err.print(f"{len(verdicts)} claims: {', '.join(counts) or 'none'}", markup=False)
    if any(v.status != "consistent" for v in verdicts):
        raise typer.Exit(1)


def _verdict_text(v: ClaimVerdict) -> Text:
    from rich.text import Text

    return Text(v.status, style="green" if v.status == "consistent" else "bold red")


def claims(
    session: SessionArg,
    json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """List the numbers the replies state that no trace output of their turn backs.

    Rounding is allowed for; numbers the user gave are not claims. Exits 1 when there is
    any. In a pipe, one tab-separated line per claim: turn, seq, stated, claim, why.

    Example:

    - `agenttrail claims sample-harvey-session --json | jq -r .stated`
    """
    from rich.markup import escape

    from agenttrail.codec import json_line
    from agenttrail.evidence.claims import unbacked_claims
    from agenttrail.views.safe import safe

    with open_log(db) as store:
        found = find_session(store, session)
        unbacked = unbacked_claims(store.read(found.id), store.traces(found.id))
    if json:
        for c in unbacked:
            out.print(json_line(_claim_record(c)), markup=False)
    elif not is_terminal():
        print_tsv((c.turn_seq, c.seq, c.claim.text, c.context, c.why) for c in unbacked)
    else:
        table = list_table()
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
    err.print(counted(len(unbacked), "unbacked claim"), markup=False)
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


def traces(
    session: SessionArg,
    json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """List a session's trace rows: the evidence kept for tool calls that returned an envelope.

    Each row shows the turn it belongs to and its record-hash status. In a pipe, one
    tab-separated line per row: trace, turn, call, result, tool, status, record hash (whole).

    Example:

    - `agenttrail traces sample-harvey-session`
    """
    from rich.markup import escape

    from agenttrail.codec import json_line
    from agenttrail.evidence.traces import trace_record
    from agenttrail.views.safe import safe

    with open_log(db) as store:
        rows = store.traces(find_session(store, session).id)
    if json:
        for row in rows:
            out.print(json_line(trace_record(row, envelope=False)), markup=False)
        return
    if not rows:  # said on stderr: stdout stays what was found (nothing), for a pipe
        err.print("no trace rows: no tool result of this session is an envelope (docs/evidence.md)")
        return
    if not is_terminal():
        print_tsv(
            (r.id, r.turn_seq, r.call_seq, r.result_seq, r.tool, r.status, r.record_hash)
            for r in rows
        )
        return
    table = list_table()
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


def trace(
    trace_id: Annotated[int, typer.Argument(metavar="ID", help="Trace row id (from traces).")],
    json: Annotated[
        bool,
        typer.Option(
            "--json", help="The row as one JSON object (as traces --json, with the envelope)."
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Show one trace row: the call, the envelope verbatim, its record hash and status.

    Also shows the turn the row joins. --json prints the same fields as one JSON object.

    Example:

    - `agenttrail traces sample --json | jq .id | xargs -rn1 agenttrail trace` (every
      trace row of a session, named by a prefix of its id; the sample session has none)
    """
    from agenttrail.codec import json_line
    from agenttrail.evidence.traces import trace_record
    from agenttrail.views.safe import safe

    with open_log(db) as store:
        row = store.trace(trace_id)
    if json:
        out.print(json_line(trace_record(row, envelope=True)), markup=False)
        return
    for key, value in trace_record(row, envelope=True).items():
        text = value if isinstance(value, str) else json_line(value)
        out.print(f"{key}: {safe(text)}", markup=False)


def _status_text(status: str) -> Text:
    from rich.text import Text

    styles = {
        "verified": "green",
        "computed": "cyan",
        "mismatch": "bold red",
        "invalid": "bold red",
    }
    return Text(status, style=styles.get(status, ""))


def keygen(
    out_file: Annotated[
        Path,
        typer.Option("--out", help="Private key file to write; the public key goes to FILE.pub."),
    ] = Path("agenttrail.key"),
) -> None:
    """Make an Ed25519 key pair for signing checkpoints (private key readable by you only).

    Example:

    - `agenttrail keygen --out agenttrail.key`
    """
    from agenttrail.log.checkpoints import generate_keys

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


def checkpoint(
    session: SessionArg,
    key: Annotated[
        Path, typer.Option("--key", help="Ed25519 private key (PEM), from keygen; - reads stdin.")
    ],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file (- is stdout).")
    ] = None,
    db: DbOption = None,
) -> None:
    """Sign the session's current head (seq, chain hash, time) with your key.

    Keep the checkpoint somewhere the database's owner cannot rewrite.

    Example:

    - `agenttrail checkpoint sample --key agenttrail.key -o head.json` (a prefix of the id)
    """
    from agenttrail.log.checkpoints import checkpoint_json, make_checkpoint

    output = output_file(output)
    with open_log(db) as store:
        found = find_session(store, session)
        signed = make_checkpoint(store, found.id, _read_key(key), key_name=str(key))
    write_output(output, [checkpoint_json(signed)])
