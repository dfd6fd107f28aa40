"""SIGKILL of a real agent process mid-turn, on both backends: nothing acknowledged is lost,
no tool result is left without its trace row, the log verifies, and the agent restarted on
the session takes its turn lock over at once.

Each trial starts an agent process (``tests/faults/_agent.py``) on one session (a SQLite file
or a PostgreSQL schema: the ``db_url`` fixture), lets it record for a random time and kills it
with SIGKILL; the next trial's agent is the restart of the one killed. What the agent
acknowledged comes back on a pipe, one line per call that returned (so per commit).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field

from agenttrail import Recorder
from agenttrail.codec import normalize_timestamp
from agenttrail.evidence.audit import audit
from agenttrail.ingest.traces import rows_for
from agenttrail.log.store import LogStore
from agenttrail.model import NewSession
from tests import mortgage_model
from tests.faults import _agent

TRIALS = 16
"""Kills per backend: bounded, about 1 s each."""

LEASE_S = 2.0
"""The agents' turn lease (seconds): a killed agent's lock lapses within it."""

TAKE_OVER_S = 1.0
"""A restarted agent must hold its turn lock within this (it waits for no lease to lapse)."""

SPAWN = multiprocessing.get_context("forkserver")
"""Agents are forked from a server that imported agenttrail once (not from pytest, whose
threads a fork would copy mid-flight); each is a process of its own, killed for real."""
SPAWN.set_forkserver_preload(_agent.PRELOAD)


@dataclass
class Acks:
    """What one agent acknowledged before it died."""

    events: dict[int, tuple[bytes, str, bool]] = field(default_factory=dict)
    """seq → (chain hash, type, tool result with an envelope)."""
    calls: list[str] = field(default_factory=list)
    took: float | None = None
    """Seconds the agent waited for its first turn lock."""


def _run_and_kill(url: str, session_id: str, rng: random.Random) -> Acks:
    receive, send = SPAWN.Pipe(duplex=False)
    child = SPAWN.Process(target=_agent.run, args=(url, session_id, LEASE_S, send), daemon=True)
    child.start()
    send.close()  # the agent's end: EOF here once the agent is dead
    lines: list[str] = []
    first = threading.Event()

    def drain() -> None:  # never let a full pipe stop the agent between commits
        with contextlib.suppress(EOFError):
            while True:
                lines.append(receive.recv_bytes().decode())
                first.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        assert first.wait(30), "the agent did not start"
        time.sleep(rng.uniform(0.0, 0.4))  # somewhere in the middle of a turn
        child.kill()  # SIGKILL
    finally:
        child.join(10)
        reader.join(10)
        receive.close()
    assert child.exitcode == -signal.SIGKILL
    acks = Acks()
    for line in lines:
        kind, *rest = line.split()
        if kind == "took":
            acks.took = float(rest[0])
        elif kind == "call":
            acks.calls.append(rest[0])
        else:
            acks.events[int(rest[0])] = (bytes.fromhex(rest[1]), rest[2], rest[3] == "1")
    return acks


def _check(store: LogStore, session_id: str, acks: Acks) -> tuple[int, int]:
    """Assert that the log holds everything acknowledged, each envelope result with its trace
    row, and verifies; returns (events, trace rows) checked."""
    stored = {
        seq: (digest, created_at) for seq, created_at, _, digest, *_ in store.read_rows(session_id)
    }
    lost = [
        seq for seq, (digest, _, _) in acks.events.items() if stored.get(seq, (b"",))[0] != digest
    ]
    assert lost == [], f"acknowledged events lost or changed: seqs {lost}"
    items = list(store.read(session_id))
    call_ids = {e.payload.get("id") for e in items if e.type == "tool_call"}
    assert set(acks.calls) <= call_ids, "an acknowledged tool call is not in the log"
    rows = {row.result_seq for row in store.traces(session_id)}
    acked = {seq for seq, (_, _, envelope) in acks.events.items() if envelope}
    assert acked <= rows, f"acknowledged tool results without trace rows: {sorted(acked - rows)}"
    # Every tool result in the log with an envelope, acknowledged or not, has its row.
    due = {row.result_seq for row in rows_for(session_id, items)}
    assert due - rows == set(), f"tool results without trace rows: {sorted(due - rows)}"
    (verdict,) = audit(store, [session_id])
    assert verdict.ok, verdict.record()
    return len(acks.events) + len(acks.calls), len(acked)


def test_a_killed_agent_loses_nothing_and_its_restart_takes_over_at_once(
    store: LogStore, db_url: str
) -> None:
    rng = random.Random(int.from_bytes(os.urandom(4)))
    sid = store.create_session(NewSession(title="kills", agent="agent")).id
    checked_events = checked_rows = in_turn = 0
    took: list[float] = []
    for _ in range(TRIALS):
        acks = _run_and_kill(db_url, sid, rng)
        assert acks.took is not None and acks.took < TAKE_OVER_S, acks.took
        took.append(acks.took)
        events, rows = _check(store, sid, acks)
        checked_events, checked_rows = checked_events + events, checked_rows + rows
        # The killed agent's lease, if it died in a turn, lapses within one lease length.
        lease = store.current_turn(sid)
        latest = normalize_timestamp(time.time() + LEASE_S)
        assert lease is None or lease.expires_at <= latest, lease
        in_turn += lease is not None
    # The last one restarted here, in this process: its turn starts at once and completes.
    started = time.monotonic()
    with Recorder(store, sid, holder="agent", lease_s=LEASE_S).turn(model="m") as turn:
        took.append(time.monotonic() - started)
        turn.user("one more")
        inputs = {"principal": 250_000, "annual_rate": 0.06, "years": 20}
        call = turn.tool_call("run_model", inputs)
        result = turn.tool_result(call, json.dumps(mortgage_model.run_model(inputs)))
        turn.reply("done")
    assert took[-1] < TAKE_OVER_S
    assert result.seq in {row.result_seq for row in store.traces(sid)}
    assert store.current_turn(sid) is None
    assert all(v.ok for v in audit(store, [sid]))
    assert checked_events > TRIALS and checked_rows > 0  # the agents did record something
    median = sorted(took)[len(took) // 2]
    print(
        f"\n{store.url.split(':')[0]}: {TRIALS} trials, {TRIALS} kills ({in_turn} in a turn), "
        f"{checked_events} acknowledged events and {checked_rows} trace rows checked, 0 lost; "
        f"take-over max {max(took) * 1000:.1f} ms, median {median * 1000:.1f} ms"
    )
