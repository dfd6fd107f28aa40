"""Append and verify throughput, as ratios against raw sqlite3, psycopg and hashlib in the same run.

    python bench/append.py [--events 20000] [--single 500] [--batch 100] [--postgres URL]

Baselines, measured on the same machine in the same run so that the ratio means something:
- batched append  vs raw ``sqlite3`` ``executemany`` of the same CBOR bytes into a table of the
  same shape (WAL, ``synchronous=FULL``), ``--batch`` rows per transaction;
- single append   vs raw ``sqlite3``, one row per transaction, same settings;
- verify          vs ``hashlib.sha256`` over each stored payload, one call per event (the
  floor), in wall time and in CPU time of the process (all its threads: the figure a loaded
  machine disturbs least), and vs raw ``sqlite3`` reading the same payloads plus that
  hashing (what any verifier written in Python must at least do); also pinned to one CPU
  (verify reads the next page on a second thread while the C check hashes this one), and
  with the Python check that runs when the C extension was not built. The session verified
  is chained as v2 (every new session: a salted digest per payload, docs/log-format.md,
  Chain v2); the same payloads chained as v1 are verified too.
With ``--postgres URL`` (e.g. ``postgresql://postgres@127.0.0.1:5432/test``) the PostgreSQL
backend is measured too, in schemas of its own that are dropped afterwards:
- batched append  vs raw psycopg ``executemany`` of the same rows, and vs ``COPY … FROM STDIN
  (FORMAT BINARY)`` of the same rows, ``--batch`` rows per transaction;
- single append   vs raw psycopg, one ``INSERT`` per transaction;
- verify          vs ``hashlib.sha256`` over each payload (the floor, as above), and vs raw
  psycopg reading the same payloads plus ``hashlib``.
Each event is a 1 KiB assistant message (about 1 KiB of canonical CBOR). Also measured:
verify of a log of 200 sessions of 20 events each, in sessions/s, vs raw ``sqlite3`` reading
each session's payloads (a query per session) plus ``hashlib.sha256``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from agenttrail.codec import encode_payload, now_timestamp
from agenttrail.log import chain
from agenttrail.log.chain import verify
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events

PAYLOAD_TEXT = "x" * 960
"""Content length that makes the whole payload about 1 KiB of CBOR."""


def _payload(i: int) -> dict[str, object]:
    return events.message(
        "assistant",
        PAYLOAD_TEXT,
        meta=events.meta(model="m", provider="p", usage=events.usage(i, 2)),
    )


REPEATS = 5
"""Each measurement runs this many times and keeps its best: a shared VM's noise only ever
slows a run down, so the fastest run is the closest to the code's own cost."""


def _rate(n: int, run: Callable[[], None], setup: Callable[[], None] | None = None) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        if setup is not None:
            setup()
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return n / best


def _cpu_rate(n: int, run: Callable[[], None]) -> float:
    """``n`` per second of CPU time of this process (every thread), best of :data:`REPEATS`:
    what a run costs whatever else the machine runs (docs/benchmarks.md: wall time on a
    loaded machine measures the other jobs too)."""
    best = float("inf")
    for _ in range(REPEATS):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return n / best


def _appends(
    store: LogStore,
    payloads: list[dict[str, object]],
    single: int,
    batch: int,
    runs: Iterator[int],
) -> tuple[Callable[[], None], Callable[[], None]]:
    """agenttrail's two append runs on ``store``: every payload in batches of ``batch``, and
    the first ``single`` payloads one per commit; each run writes a session of its own."""

    def batched() -> None:
        sid = store.create_session(NewSession(id=f"b{next(runs)}")).id
        for start in range(0, len(payloads), batch):
            store.append_batch(sid, [NewEvent(p) for p in payloads[start : start + batch]])

    def one_by_one() -> None:
        sid = store.create_session(NewSession(id=f"s{next(runs)}")).id
        for i in range(single):
            store.append(sid, payloads[i])

    return batched, one_by_one


def _raw_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE TABLE session_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "created_at TEXT NOT NULL, payload BLOB NOT NULL, hash BLOB NOT NULL, "
        "PRIMARY KEY (session_id, seq))"
    )
    return conn


def bench(total: int, single: int, batch: int) -> dict[str, float]:
    """Run every measurement; returns events/s and ratios keyed by name."""
    payloads = [_payload(i) for i in range(total)]
    blobs = [encode_payload(p) for p in payloads]
    digest = bytes(32)
    stamp = now_timestamp()
    out: dict[str, float] = {"payload_bytes": sum(map(len, blobs)) / total}
    runs = itertools.count()  # every repeat writes a session of its own
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        raw = _raw_db(root / "raw.db")

        def raw_batched() -> None:
            sid = f"b{next(runs)}"
            for start in range(0, total, batch):
                raw.execute("BEGIN")
                raw.executemany(
                    "INSERT INTO session_events VALUES (?, ?, ?, ?, ?)",
                    [(sid, i + 1, stamp, blobs[i], digest) for i in range(start, start + batch)],
                )
                raw.execute("COMMIT")

        def raw_single() -> None:
            sid = f"s{next(runs)}"
            for i in range(single):
                raw.execute("BEGIN")
                raw.execute(
                    "INSERT INTO session_events VALUES (?, ?, ?, ?, ?)",
                    (sid, i + 1, stamp, blobs[i], digest),
                )
                raw.execute("COMMIT")

        out["raw_batched"] = _rate(total, raw_batched)
        out["raw_single"] = _rate(single, raw_single)
        raw.close()

        with open_store(root / "agenttrail.db") as store:
            batched, one_by_one = _appends(store, payloads, single, batch, runs)
            out["agenttrail_batched"] = _rate(total, batched)
            out["agenttrail_single"] = _rate(single, one_by_one)

            verified = store.sessions()[0].id  # chain v2, as every new session
            stored = [row[2] for row in store.read_rows(verified)]
            # The same payloads in a session chained as v1 (as sessions written before v2).
            v1 = store.create_session(NewSession(id="v1", chain_version=1)).id
            for start in range(0, total, batch):
                store.append_batch(v1, [NewEvent(p) for p in payloads[start : start + batch]])

            def raw_hash() -> None:
                for data in stored:
                    hashlib.sha256(data).digest()

            def ours_verify() -> None:
                (verdict,) = verify(store, [verified])
                assert verdict.ok and verdict.events == total and verdict.version == 2

            def ours_verify_v1() -> None:
                (verdict,) = verify(store, [v1])
                assert verdict.ok and verdict.events == total and verdict.version == 1

            reader = sqlite3.connect(root / "agenttrail.db")

            def raw_read_hash() -> None:
                rows = reader.execute(
                    "SELECT payload FROM session_events WHERE session_id = ? ORDER BY seq",
                    (verified,),
                )
                for (data,) in rows:
                    hashlib.sha256(data).digest()

            out["raw_sha256"] = _rate(total, raw_hash)
            out["raw_read_sha256"] = _rate(total, raw_read_hash)
            out["agenttrail_verify"] = _rate(total, ours_verify)
            out["agenttrail_verify_v1"] = _rate(total, ours_verify_v1)
            out["raw_sha256_cpu"] = _cpu_rate(total, raw_hash)
            out["agenttrail_verify_cpu"] = _cpu_rate(total, ours_verify)
            with _one_core():
                out["agenttrail_verify_one_core"] = _rate(total, ours_verify)
            with _python_check():
                out["agenttrail_verify_python"] = _rate(total, ours_verify)
            reader.close()

    out["ratio_batched"] = out["agenttrail_batched"] / out["raw_batched"]
    out["ratio_single"] = out["agenttrail_single"] / out["raw_single"]
    out["ratio_verify"] = out["agenttrail_verify"] / out["raw_sha256"]
    out["ratio_verify_v1"] = out["agenttrail_verify_v1"] / out["raw_sha256"]
    out["ratio_verify_cpu"] = out["agenttrail_verify_cpu"] / out["raw_sha256_cpu"]
    out["ratio_verify_read"] = out["agenttrail_verify"] / out["raw_read_sha256"]
    out["ratio_verify_one_core"] = out["agenttrail_verify_one_core"] / out["raw_sha256"]
    out["ratio_verify_python"] = out["agenttrail_verify_python"] / out["raw_sha256"]
    return out


SHORT_SESSIONS = 200
SHORT_SESSION_EVENTS = 20


def bench_short_sessions() -> dict[str, float]:
    """``verify`` of every session in a log of many short ones (``agenttrail verify`` with no
    session, the viewer's list), in sessions/s, against raw ``sqlite3`` reading each session's
    payloads with a query of its own plus ``hashlib.sha256`` over each."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp) / "short.db") as store:
        for _ in range(SHORT_SESSIONS):
            sid = store.create_session(NewSession()).id
            store.append_batch(sid, [NewEvent(_payload(i)) for i in range(SHORT_SESSION_EVENTS)])
        ids = [s.id for s in store.sessions()]
        reader = sqlite3.connect(Path(tmp) / "short.db")

        def raw_read_hash() -> None:
            for sid in ids:
                for (data,) in reader.execute(
                    "SELECT payload FROM session_events WHERE session_id = ? ORDER BY seq", (sid,)
                ):
                    hashlib.sha256(data).digest()

        def ours_verify() -> None:
            assert all(v.ok for v in verify(store))

        out["raw_read_sha256_sessions"] = _rate(SHORT_SESSIONS, raw_read_hash)
        out["agenttrail_verify_sessions"] = _rate(SHORT_SESSIONS, ours_verify)
        reader.close()
    out["ratio_verify_sessions"] = (
        out["agenttrail_verify_sessions"] / out["raw_read_sha256_sessions"]
    )
    return out


@contextmanager
def _one_core() -> Iterator[None]:
    """Pin this thread, and the threads it starts (verify's read-ahead), to one CPU."""
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cpus)


@contextmanager
def _python_check() -> Iterator[None]:
    """Verify as a build without the C extension does: the Python check of every row."""
    built = chain._speedups
    chain._speedups = None
    try:
        yield
    finally:
        chain._speedups = built


def bench_postgres(url: str, total: int, single: int, batch: int) -> dict[str, float]:
    """The PostgreSQL backend against raw psycopg on the same server, same run.

    Baselines write the same CBOR bytes into a table of the same shape (primary key
    ``(session_id, seq)``) in a schema of their own, ``batch`` rows per transaction: psycopg's
    ``executemany`` (pipelined INSERTs) and ``COPY … FROM STDIN (FORMAT BINARY)``, the fastest
    way in. Both sides commit with the server's ``synchronous_commit`` (on by default).
    """
    import psycopg
    from psycopg import sql

    payloads = [_payload(i) for i in range(total)]
    blobs = [encode_payload(p) for p in payloads]
    digest = bytes(32)
    stamp = now_timestamp()
    tag = uuid.uuid4().hex[:12]
    raw_schema, log_schema = f"bench_raw_{tag}", f"bench_log_{tag}"
    separator = "&" if "?" in url else "?"
    out: dict[str, float] = {}
    runs = itertools.count()
    admin = psycopg.connect(url, autocommit=True)
    try:
        raw = psycopg.connect(url)
        raw.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(raw_schema)))
        raw.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(raw_schema)))
        raw.execute(
            "CREATE TABLE session_events (session_id text NOT NULL, seq bigint NOT NULL, "
            "created_at text NOT NULL, payload bytea NOT NULL, hash bytea NOT NULL, "
            "PRIMARY KEY (session_id, seq))"
        )
        raw.commit()
        insert = "INSERT INTO session_events VALUES (%s, %s, %s, %s, %s)"

        def raw_batched() -> None:
            sid = f"b{next(runs)}"
            with raw.cursor() as cur:
                for start in range(0, total, batch):
                    cur.executemany(
                        insert,
                        [
                            (sid, i + 1, stamp, blobs[i], digest)
                            for i in range(start, start + batch)
                        ],
                    )
                    raw.commit()

        def raw_copy() -> None:
            sid = f"c{next(runs)}"
            with raw.cursor() as cur:
                for start in range(0, total, batch):
                    with cur.copy("COPY session_events FROM STDIN (FORMAT BINARY)") as copy:
                        copy.set_types(["text", "int8", "text", "bytea", "bytea"])
                        for i in range(start, start + batch):
                            copy.write_row((sid, i + 1, stamp, blobs[i], digest))
                    raw.commit()

        def raw_single() -> None:
            sid = f"s{next(runs)}"
            with raw.cursor() as cur:
                for i in range(single):
                    cur.execute(insert, (sid, i + 1, stamp, blobs[i], digest))
                    raw.commit()

        out["pg_raw_batched"] = _rate(total, raw_batched)
        out["pg_raw_copy"] = _rate(total, raw_copy)
        out["pg_raw_single"] = _rate(single, raw_single)

        with open_store(f"{url}{separator}schema={log_schema}") as store:
            batched, one_by_one = _appends(store, payloads, single, batch, runs)
            out["pg_agenttrail_batched"] = _rate(total, batched)
            out["pg_agenttrail_single"] = _rate(single, one_by_one)

            verified = store.sessions()[0].id

            def ours_verify() -> None:
                (verdict,) = verify(store, [verified])
                assert verdict.ok and verdict.events == total

            def raw_read_hash() -> None:
                with raw.cursor(binary=True) as cur:
                    cur.execute(
                        sql.SQL(
                            "SELECT payload FROM {}.session_events WHERE session_id = %s "
                            "ORDER BY seq"
                        ).format(sql.Identifier(log_schema)),
                        (verified,),
                    )
                    for (data,) in cur:
                        hashlib.sha256(data).digest()
                raw.commit()

            out["pg_raw_read_sha256"] = _rate(total, raw_read_hash)
            out["pg_agenttrail_verify"] = _rate(total, ours_verify)
        raw.close()
    finally:
        for schema in (raw_schema, log_schema):
            admin.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
        admin.close()
    out["pg_ratio_batched"] = out["pg_agenttrail_batched"] / out["pg_raw_batched"]
    out["pg_ratio_copy"] = out["pg_agenttrail_batched"] / out["pg_raw_copy"]
    out["pg_ratio_single"] = out["pg_agenttrail_single"] / out["pg_raw_single"]
    out["pg_ratio_verify_read"] = out["pg_agenttrail_verify"] / out["pg_raw_read_sha256"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events for batched runs")
    parser.add_argument("--single", type=int, default=500, help="events for single appends")
    parser.add_argument("--batch", type=int, default=100, help="events per batch")
    parser.add_argument("--postgres", metavar="URL", help="also measure PostgreSQL at URL")
    args = parser.parse_args()
    r = bench(args.events, args.single, args.batch) | bench_short_sessions()
    if args.postgres:
        r |= bench_postgres(args.postgres, args.events, args.single, args.batch)
        r["pg_ratio_verify"] = r["pg_agenttrail_verify"] / r["raw_sha256"]
    print(f"payload: {r['payload_bytes']:.0f} bytes of CBOR per event")
    print(f"{'':24}{'events/s':>12}{'baseline/s':>14}{'ratio':>8}")
    rows = [
        (
            "append, batch of " + str(args.batch),
            "agenttrail_batched",
            "raw_batched",
            "ratio_batched",
        ),
        ("append, one per commit", "agenttrail_single", "raw_single", "ratio_single"),
        ("verify (chain v2)", "agenttrail_verify", "raw_sha256", "ratio_verify"),
        ("verify, chain v1", "agenttrail_verify_v1", "raw_sha256", "ratio_verify_v1"),
        ("verify, CPU time", "agenttrail_verify_cpu", "raw_sha256_cpu", "ratio_verify_cpu"),
        ("verify, one core", "agenttrail_verify_one_core", "raw_sha256", "ratio_verify_one_core"),
        ("verify, Python check", "agenttrail_verify_python", "raw_sha256", "ratio_verify_python"),
        ("verify vs read+hash", "agenttrail_verify", "raw_read_sha256", "ratio_verify_read"),
        (
            f"verify {SHORT_SESSIONS} sessions*",
            "agenttrail_verify_sessions",
            "raw_read_sha256_sessions",
            "ratio_verify_sessions",
        ),
    ]
    if args.postgres:
        rows += [
            ("PG append, batch", "pg_agenttrail_batched", "pg_raw_batched", "pg_ratio_batched"),
            ("PG append, batch/COPY", "pg_agenttrail_batched", "pg_raw_copy", "pg_ratio_copy"),
            ("PG append, single", "pg_agenttrail_single", "pg_raw_single", "pg_ratio_single"),
            ("PG verify", "pg_agenttrail_verify", "raw_sha256", "pg_ratio_verify"),
            (
                "PG verify vs read+hash",
                "pg_agenttrail_verify",
                "pg_raw_read_sha256",
                "pg_ratio_verify_read",
            ),
        ]
    for label, ours, base, ratio in rows:
        print(f"{label:24}{r[ours]:>12,.0f}{r[base]:>14,.0f}{r[ratio]:>8.0%}")
    print(f"* sessions/s; {SHORT_SESSION_EVENTS} events each, baseline raw sqlite3 read + hash")


if __name__ == "__main__":
    main()
