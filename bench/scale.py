"""How the commands that read a whole session scale with its length, as ratios against a raw
floor measured in the same run.

    python bench/scale.py [--sizes 1000,10000,100000] [--sessions 10000] [--rounds 1]

For each size, a SQLite session of that many events is built: turns of a user message, an
assistant message with usage, a tool call, its ~1 KiB result and a closing assistant message,
one turn in 100 with a 100 KiB result. Then each command runs as the user runs it, a fresh
``python -m agenttrail.cli`` writing to a file (so each figure includes the interpreter's
start-up, about 0.1 s, which dominates the smallest size). Every figure is CPU time (user
and system), which a shared VM's other tenants disturb far less than wall-clock time:

- show, fountain, replay --format openai / anthropic, export: the session to a file;
- import: that export into a new log (trace rows captured, chain reproduced), also against
  a floor of its own (:func:`raw_import`: parsing the export and inserting its rows; the
  issue's table gives import a floor of its own too);
- verify: the session's chain and trace rows.

The raw floor is what any reader must do: ``sqlite3`` reading the session's rows, cbor2
decoding each payload and ``json.dumps`` writing it to a file, one line per event, in this
process (no interpreter start-up). Each figure is reported as seconds, its ratio to the
floor, and its growth from the previous size (linear is the ratio of the sizes: 10x), plus
``show``'s peak memory (RSS), which should not grow with the session. With ``--rounds N``
each size is measured N times, the floors with it each time (on a shared VM the floor moved
by 15 % between rounds a minute apart): each figure is the median of the rounds and its
ratio the median of the rounds' ratios, their spread beside it.

Also: ``sessions`` (table and ``--json``) over a log of ``--sessions`` sessions, against
``sqlite3`` reading the sessions table and writing each row as JSON; the CLI's start-up
(``agenttrail --version``, best of five) against ``python -c pass``; and the viewer's sessions
list over 1,000 of those sessions (wall-clock time, and CPU time of this process, through
Starlette's test client, the median of three after a first request): one ``GET
/v1/summaries`` against a ``GET …/summary`` per session, as the page asked before.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import cbor2

from agenttrail.log.store import open_store
from agenttrail.model import NewEvent, NewSession, events

SESSION = "scale"

PROBE = """
import resource, sys
from agenttrail.cli import main
code = main(sys.argv[1:])
usage = resource.getrusage(resource.RUSAGE_SELF)
print(usage.ru_utime + usage.ru_stime, usage.ru_maxrss, file=sys.stderr)
sys.exit(code)
"""
"""Runs one command and prints its CPU seconds and peak RSS (KiB) on stderr's last line."""


def _payloads(n: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    turn = 0
    while len(out) < n:
        output = ("R" * 102_400) if turn % 100 == 99 else ("r" * 1000)
        call = f"call_{turn}"
        meta = events.meta(model="gpt-4o", provider="openai", usage=events.usage(100 + turn, 20))
        out += [
            events.message("user", f"question {turn}: what is in file {turn}?"),
            events.message("assistant", f"Let me look at file {turn}.", meta=meta),
            events.tool_call(call, "read_file", {"path": f"/tmp/file{turn}.txt"}),
            events.tool_result(call, "read_file", output=output),
            events.message("assistant", f"File {turn} holds {len(output)} characters.", meta=meta),
        ]
        turn += 1
    return out[:n]


def build_session(db: Path, n: int) -> None:
    """A log at ``db`` holding one session of ``n`` events, written in batches of 2,000."""
    payloads = _payloads(n)
    with open_store(str(db), create=True) as store:
        for start in range(0, n, 2000):
            batch = [
                NewEvent(
                    p,
                    f"2026-01-01T{k // 3_600_000 % 24:02d}:{k // 60_000 % 60:02d}:"
                    f"{k // 1000 % 60:02d}.{k % 1000:03d}000Z",
                )
                for k, p in enumerate(payloads[start : start + 2000], start=start)
            ]
            create = NewSession(SESSION, "scale session", "bench") if start == 0 else None
            store.append_batch(SESSION, batch, create=create)


def build_sessions(db: Path, n: int) -> None:
    """A log at ``db`` of ``n`` sessions of one to three events."""
    with open_store(str(db), create=True) as store:
        for i in range(n):
            sid = f"s-{i:05d}"
            day = f"2026-01-{1 + i % 28:02d}"
            batch = [NewEvent(events.message("user", f"hello {i}"), f"{day}T10:00:00.000000Z")]
            create = NewSession(sid, f"session {i}", "bench", started=day)
            store.append_batch(sid, batch * (1 + i % 3), create=create)


def raw_floor(db: Path, out: Path) -> float:
    """CPU seconds for sqlite3 to read the session's rows and write each payload as JSON."""
    start = time.process_time()
    conn = sqlite3.connect(db)
    with out.open("w", encoding="utf-8") as file:
        for seq, created_at, payload in conn.execute(
            "SELECT seq, created_at, payload FROM session_events WHERE session_id = ? ORDER BY seq",
            (SESSION,),
        ):
            data = {"seq": seq, "created_at": created_at, "payload": cbor2.loads(payload)}
            file.write(json.dumps(data, ensure_ascii=False) + "\n")
    conn.close()
    return time.process_time() - start


def raw_import(export: Path, db: Path) -> float:
    """CPU seconds for what any importer of ``export`` must do: parse each line as JSON,
    encode its payload as CBOR and insert the rows into a new SQLite file with sqlite3, in
    one durable transaction (no checks, no chain, no search index). The issue's table gives
    import a floor of its own (1.6 s there, against 0.44 s for reading)."""
    start = time.process_time()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE TABLE events (session_id TEXT, seq INTEGER, created_at TEXT, payload BLOB,"
        " PRIMARY KEY (session_id, seq))"
    )
    with export.open(encoding="utf-8") as file, conn:
        rows = (
            (r["session_id"], r["seq"], r["created_at"], cbor2.dumps(r["payload"]))
            for r in map(json.loads, file)
        )
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
    conn.close()
    return time.process_time() - start


def raw_sessions(db: Path, out: Path) -> float:
    """CPU seconds for sqlite3 to read every session row and write it as JSON."""
    start = time.process_time()
    conn = sqlite3.connect(db)
    with out.open("w", encoding="utf-8") as file:
        for row in conn.execute("SELECT id, title, agent, started FROM sessions ORDER BY started"):
            file.write(json.dumps(row) + "\n")
    conn.close()
    return time.process_time() - start


_AS_USERS_RUN = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""The environment the commands run in: this one, with bytecode written and read as an
installed Python does (a VM that sets ``PYTHONDONTWRITEBYTECODE`` would otherwise compile
every module in every command, 0.17 s of ``sessions`` here)."""


def run_cli(*args: str, out: Path) -> tuple[float, int]:
    """CPU seconds and peak RSS (KiB) of ``agenttrail ARGS > out`` in a fresh interpreter."""
    with out.open("w") as file:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, *args],
            stdout=file,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            env={**_AS_USERS_RUN, "COLUMNS": "120"},
        )
    if done.returncode != 0:
        raise SystemExit(f"agenttrail {' '.join(args)} failed: {done.stderr}")
    cpu, rss = done.stderr.strip().splitlines()[-1].split()
    return float(cpu), int(rss)


def best_of(times: int, command: list[str]) -> float:
    """The least CPU seconds (user and system) of ``times`` runs of ``command``."""
    best = float("inf")
    for _ in range(times):
        before = os.times()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=_AS_USERS_RUN)
        after = os.times()
        used = (after.children_user - before.children_user) + (
            after.children_system - before.children_system
        )
        best = min(best, used)
    return best


def viewer_list(db: Path, n: int) -> None:
    """Print the wall-clock seconds of the viewer's sessions list over the first ``n``
    sessions: one request for every summary, then one request per session."""
    from fastapi.testclient import TestClient

    from agenttrail.server import create_app, mint_token

    secret = b"bench-secret-not-for-production-0123456789abcdef"
    with open_store(str(db)) as store:
        for session in store.sessions()[n:]:
            store.remove_session(session.id, reason="bench: keep the first sessions")
        client = TestClient(create_app(store, secret=secret))
        headers = {"Authorization": f"Bearer {mint_token(secret, rights=['read'])}"}
        client.get("/v1/summaries", headers=headers)  # once first: imports, the price table
        runs = []
        for _ in range(3):
            start, cpu = time.perf_counter(), time.process_time()
            listed = client.get("/v1/summaries", headers=headers).json()["summaries"]
            runs.append((time.perf_counter() - start, time.process_time() - cpu))
        one, one_cpu = sorted(runs)[1]  # the median of three, by wall-clock time
        start = time.perf_counter()
        for session in listed:
            client.get(f"/v1/sessions/{session['id']}/summary", headers=headers)
        each = time.perf_counter() - start
    print(
        f"viewer sessions list, {len(listed):,} sessions: one request {one:.2f} s wall "
        f"({one_cpu:.2f} s CPU), a request per session {each:.2f} s wall"
    )


def _row(
    name: str,
    seconds: float,
    ratio: float,
    before: float | None,
    extra: str = "",
    ratios: list[float] | None = None,
) -> None:
    growth = f"{seconds / before:5.1f}x" if before else "    —"
    spread = f"{_spread(ratios or []):15}"
    print(f"  {name:28} {seconds:8.2f} s CPU  {ratio:6.2f}x floor {spread} growth {growth} {extra}")


def _spread(values: list[float]) -> str:
    """``(3.91 – 4.20)``, the least and the most of several rounds; nothing for one."""
    return f"({min(values):.2f} – {max(values):.2f})" if len(values) > 1 else ""


@dataclass
class _Round:
    """One round's figures at one size: its floors, and each command's CPU seconds."""

    floor: float
    import_floor: float
    seconds: dict[str, float]
    show_rss: int


def _round(n: int, r: int, db: Path, folder: Path, commands: dict[str, list[str]]) -> _Round:
    """Measure the reading floor, then each command, then import against its own floor: the
    ratios of a round come from the same minutes of the machine."""
    out = folder / "out"
    floor = raw_floor(db, out)
    seconds: dict[str, float] = {}
    show_rss = 0
    for name, command in commands.items():
        seconds[name], rss = run_cli(*command, "--db", str(db), out=out)
        show_rss = rss if name == "show" else show_rss
    export = folder / "export.jsonl"
    target = folder / f"import{n}-{r}.db"
    seconds["import of export"], _ = run_cli("import", str(export), "--db", str(target), out=out)
    import_floor = raw_import(export, folder / f"raw-import{n}-{r}.db")
    return _Round(floor, import_floor, seconds, show_rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure each size this many times, the floors each time: each figure is the"
        " median of the rounds, its ratio the median of each round's ratio",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        previous: dict[str, float] = {}
        for n in sizes:
            db = folder / f"s{n}.db"
            build_session(db, n)
            out = folder / "out"
            export = folder / "export.jsonl"
            commands = {
                "show": ["show", SESSION],
                "fountain": ["fountain", SESSION],
                "replay --format openai": ["replay", SESSION, "--format", "openai"],
                "replay --format anthropic": ["replay", SESSION, "--format", "anthropic"],
                "export": ["export", SESSION, "-o", str(export)],
                "verify": ["verify", SESSION],
            }
            if n == sizes[0]:  # once first, so that no figure counts compiling bytecode
                for command in commands.values():
                    run_cli(*command, "--db", str(db), out=out)
                run_cli("import", str(export), "--db", str(folder / "warm.db"), out=out)
            rounds = [_round(n, r, db, folder, commands) for r in range(args.rounds)]
            floor = statistics.median(r.floor for r in rounds)
            print(f"{n:,} events: raw floor {floor:.3f} s", _spread([r.floor for r in rounds]))
            seconds: dict[str, float] = {}
            for name in [*commands, "import of export"]:
                took = statistics.median(r.seconds[name] for r in rounds)
                ratios = [r.seconds[name] / r.floor for r in rounds]
                seconds[name] = took
                if name == "show":
                    rss = max(r.show_rss for r in rounds)
                    extra = f"peak RSS {rss / 1024:6.0f} MiB"
                elif name == "import of export":
                    import_floor = statistics.median(r.import_floor for r in rounds)
                    print(f"  import floor {import_floor:.3f} s")
                    against = [r.seconds[name] / r.import_floor for r in rounds]
                    extra = f"{statistics.median(against):.2f}x import floor {_spread(against)}"
                else:
                    extra = ""
                _row(name, took, statistics.median(ratios), previous.get(name), extra, ratios)
            previous = seconds
        db = folder / "sessions.db"
        build_sessions(db, args.sessions)
        floor = raw_sessions(db, folder / "out")
        print(f"{args.sessions:,} sessions: raw floor {floor:.3f} s")
        for name, command in {"sessions": ["sessions"], "--json": ["sessions", "--json"]}.items():
            took, _ = run_cli(*command, "--db", str(db), out=folder / "out")
            _row(name, took, took / floor, None)
        viewer_list(db, 1000)
        python = best_of(5, [sys.executable, "-c", "pass"])
        version = best_of(5, [sys.executable, "-m", "agenttrail.cli", "--version"])
        print(
            f"CLI start-up (CPU): agenttrail --version {version:.3f} s, "
            f"python -c pass {python:.3f} s"
        )


if __name__ == "__main__":
    main()
