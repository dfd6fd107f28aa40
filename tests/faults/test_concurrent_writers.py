"""Many writers at once, on both backends: no error reaches a caller, no seq is lost or
repeated, and a retried idempotency key is stored once.

Each writer (16 processes, each with a store of its own, and 16 threads sharing one store)
waits for one signal, then opens a log nobody has opened yet — so the first use of an empty
schema is raced too (``PostgresStore`` takes a transaction-scoped advisory lock and checks the
schema again under it: ``log/store/postgres.py``) — and appends, through
``append_batch(create=…)``, to one shared session and to new sessions every writer creates at
the same moment, each append sent twice with the same key, as a client retrying after a lost
answer would. docs/log-format.md (PostgreSQL) states what is promised.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from multiprocessing.connection import Connection
from typing import Any

from agenttrail.errors import SessionExists
from agenttrail.log.chain import verify
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession

PROCESSES, THREADS = 16, 16
"""Writers of each kind (the brief: 16 processes and 16 threads)."""

ROUNDS = 4
"""Appends of each writer to the shared session and to new sessions (each sent twice)."""

SHARED = "shared"
"""The session every writer appends to (created by whichever writer comes first)."""

WAIT_S = 60.0
"""Bound on any one wait of the test (seconds): a hang fails instead of stalling the run."""

Result = tuple[str, str, int, int, bool]
"""``(session, key, seq of the first append, seq of the retry, retry was a duplicate)``."""


def _write(db_url: str, name: str) -> tuple[list[Result], list[str]]:
    """One writer: open the log, then append its keyed events, each twice."""
    results: list[Result] = []
    errors: list[str] = []
    try:
        store = open_store(db_url)
    except Exception as e:  # every error that reaches a caller is counted
        return results, [f"{name}: open: {type(e).__name__}: {e}"]
    try:
        for i in range(ROUNDS):
            for sid in (SHARED, f"new-{i}"):
                event = NewEvent({"type": "x", "writer": name, "i": i}, key=f"{name}-{i}")
                try:
                    first = store.append_batch(sid, [event], create=NewSession(title=sid))[0]
                    again = store.append_batch(sid, [event], create=NewSession(title=sid))[0]
                except Exception as e:
                    errors.append(f"{name}: {sid}: {type(e).__name__}: {e}")
                    continue
                results.append((sid, event.key or "", first.seq, again.seq, again.duplicate))
    finally:
        store.close()
    return results, errors


def _process_writer(db_url: str, name: str, go: Any, out: Connection) -> None:
    go.wait(WAIT_S)
    out.send(_write(db_url, name))
    out.close()


def _check(db_url: str, results: list[Result], errors: list[str]) -> None:
    assert errors == []
    writers = PROCESSES + THREADS
    assert len(results) == writers * ROUNDS * 2
    with open_store(db_url) as store:
        expected = {SHARED: writers * ROUNDS, **{f"new-{i}": writers for i in range(ROUNDS)}}
        assert {s.id: s.head_seq for s in store.sessions()} == expected
        for sid, count in expected.items():
            # No gap, no duplicate seq; each key once, at the seq its first append got.
            assert [e.seq for e in store.read(sid)] == list(range(1, count + 1))
            keys = store.event_keys(sid)
            assert len(keys) == count and len({k for k, _ in keys}) == count
            reported = {key: seq for s, key, seq, _, _ in results if s == sid}
            assert dict(keys) == reported
        # A retried key gets the first seq back and writes nothing.
        assert all(again == first and dup for _, _, first, again, dup in results)
        assert Counter(sid for sid, *_ in results) == expected
        assert all(v.ok for v in verify(store))


def test_16_processes_and_16_threads_racing_on_a_fresh_log_lose_nothing(db_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    pipes, procs = [], []
    for n in range(PROCESSES):
        ours, theirs = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_process_writer, args=(db_url, f"p{n}", go, theirs))
        proc.start()
        theirs.close()
        pipes.append(ours)
        procs.append(proc)
    outcomes: list[tuple[list[Result], list[str]]] = []
    lock = threading.Lock()

    def thread_writer(n: int) -> None:
        go.wait(WAIT_S)
        outcome = _write(db_url, f"t{n}")
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=thread_writer, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    go.set()  # every writer opens the empty log at once
    for pipe in pipes:
        assert pipe.poll(WAIT_S), "a writer process did not answer"
        outcomes.append(pipe.recv())
    for t in threads:
        t.join(WAIT_S)
    for proc in procs:
        proc.join(WAIT_S)
        assert proc.exitcode == 0
    results = [r for rs, _ in outcomes for r in rs]
    errors = [e for _, es in outcomes for e in es]
    _check(db_url, results, errors)


def test_a_true_duplicate_create_is_session_exists_for_all_but_one(store: LogStore) -> None:
    # Creating the same id at once: one wins, every other caller is told the id is taken
    # (SessionExists, HTTP 409), never a store error.
    go = threading.Barrier(THREADS)
    outcomes: list[str] = []
    lock = threading.Lock()

    def create(session_id: str) -> None:
        go.wait(WAIT_S)
        try:
            store.create_session(NewSession(session_id))
            outcome = "created"
        except SessionExists:
            outcome = "exists"
        except Exception as e:
            outcome = f"{type(e).__name__}: {e}"
        with lock:
            outcomes.append(outcome)

    for round in range(5):  # each round a fresh id, raced by every thread
        outcomes.clear()
        threads = [
            threading.Thread(target=create, args=(f"taken-{round}",)) for _ in range(THREADS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT_S)
        assert sorted(outcomes) == ["created"] + ["exists"] * (THREADS - 1)
