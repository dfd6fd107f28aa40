"""Search over a large log through the index, against a scan of the same text in the same run.

    python bench/search.py [--events 1000000] [--sessions 1000] [--batch 5000] [--postgres URL]

Builds a log of ``--events`` small events (a user or assistant message of 6 to 12 words drawn
from a made-up vocabulary of 5,000 words, one in 50 a tool call with a failing result, some in
Japanese, Chinese, Arabic and Cyrillic) over ``--sessions`` sessions, appended through the
store's normal ``append_batch``, ``--batch`` events per transaction. Then measures:

- index build: the first search, which indexes every event (``bring_up_to_date``), in
  events/s;
- query latency of ``agenttrail.views.search.search`` (index already up to date, so what a
  search costs once the log is indexed; it still checks every session's watermark), p50 and
  p99 over ``REPEATS`` runs each, for a word found once, a word of about 0.1 % of events, a
  word in every 20th event (the query stops at ``HIT_LIMIT`` hits), queries too short for a
  trigram (through the one- and two-character index): a two-character Chinese word, one
  Chinese character, two Arabic letters, two Latin letters found nowhere, one Latin letter
  found almost everywhere (stops at ``HIT_LIMIT``); ``STRASSE`` finding ``Straße``, and a
  rare word with ``--errors``;
- the baseline: the same substring found by scanning the same folded text column without
  the index (raw ``sqlite3`` ``instr``, raw psycopg ``strpos``), p50.

With ``--postgres URL`` the PostgreSQL backend is measured too, in a schema of its own that is
dropped afterwards.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.model.search import SearchFilter
from agenttrail.views.search import bring_up_to_date, fold, search

REPEATS = 50
"""Runs of each query; p99 of 50 is the worst but one."""

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pa", "de", "gu", "zo", "bri"]
SCRIPTS = ["東京都の天気", "北京今天下雨", "مرحبا بالعالم", "Привет мир", "Die Straße"]


def _vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < 5000:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _payload(i: int, rng: random.Random, words: list[str]) -> dict[str, Any]:
    if i % 50 == 49:
        return events.tool_result("c", output="", error=f"failed {rng.choice(words)}")
    if i % 50 == 48:
        return events.tool_call("c", "grep", {"pattern": rng.choice(words)})
    text = " ".join(rng.choice(words) for _ in range(rng.randint(6, 12)))
    if i % 20 == 0:
        text += " commonword"
    if i % 1000 == 7:
        text += " mediumword"
    if i % 97 == 0:
        text += " " + SCRIPTS[i % len(SCRIPTS)]
    if i == 123_457:
        text += " needleonce"
    return events.message("user" if i % 2 else "assistant", text)


def build(store: LogStore, total: int, sessions: int, batch: int) -> float:
    """Append the log; returns seconds."""
    rng = random.Random(20)
    words = _vocabulary(rng)
    per = total // sessions
    start = time.perf_counter()
    i = 0
    for s in range(sessions):
        sid = f"bench-{s:05d}"
        store.create_session(NewSession(sid, agent="bench"))
        for lo in range(0, per, batch):
            chunk = [NewEvent(_payload(i + k, rng, words)) for k in range(min(batch, per - lo))]
            i += len(chunk)
            store.append_batch(sid, chunk)
    return time.perf_counter() - start


def _latency(run: Callable[[], object]) -> tuple[float, float]:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


QUERIES: list[tuple[str, str, SearchFilter]] = [
    ("once", "needleonce", SearchFilter()),
    ("0.1 %", "mediumword", SearchFilter()),
    ("5 % (capped)", "commonword", SearchFilter()),
    ("2 CJK chars", "北京", SearchFilter()),
    ("1 CJK char", "京", SearchFilter()),
    ("2 Arabic", "مر", SearchFilter()),
    ("2 Latin, none", "qx", SearchFilter()),
    ("1 Latin (cap)", "a", SearchFilter()),
    ("STRASSE", "STRASSE", SearchFilter()),
    ("--errors", "failed", SearchFilter(errors=True)),
]


def measure(store: LogStore, scan: Callable[[str], object], name: str) -> None:
    start = time.perf_counter()
    indexed = bring_up_to_date(store)
    took = time.perf_counter() - start
    print(f"{name}: index build {indexed:,} events in {took:.1f} s ({indexed / took:,.0f}/s)")
    sessions = store.sessions()
    print(f"{'query':<14} {'p50 ms':>8} {'p99 ms':>8} {'scan p50':>9} {'ratio':>6}")
    for label, query, where in QUERIES:
        p50, p99 = _latency(lambda q=query, w=where: search(store, q, sessions, where=w))
        folded = fold(query)
        base, _ = _latency(lambda f=folded: scan(f))
        print(f"{label:<14} {p50:8.1f} {p99:8.1f} {base:9.1f} {base / p50:5.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--postgres", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.db"
        with open_store(path) as store:
            took = build(store, args.events, args.sessions, args.batch)
            print(f"sqlite: appended {args.events:,} events in {took:.1f} s")
            raw = sqlite3.connect(path)
            statement = (
                "SELECT session_id, seq FROM search_events WHERE instr(folded, ?) > 0 LIMIT 2000"
            )
            measure(store, lambda f: raw.execute(statement, (f,)).fetchall(), "sqlite")
            raw.close()
    if args.postgres:
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        url = f"{args.postgres}{'&' if '?' in args.postgres else '?'}schema={schema}"
        try:
            with open_store(url) as store:
                took = build(store, args.events, args.sessions, args.batch)
                print(f"postgresql: appended {args.events:,} events in {took:.1f} s")
                with psycopg.connect(args.postgres) as raw:
                    raw.execute(f"SET search_path TO {schema}")
                    statement = (
                        "SELECT session_id, seq FROM search_events "
                        "WHERE strpos(folded, %s) > 0 LIMIT 2000"
                    )
                    measure(
                        store,
                        lambda f: raw.execute(statement, (f,)).fetchall(),
                        "postgresql",
                    )
        finally:
            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


if __name__ == "__main__":
    main()
