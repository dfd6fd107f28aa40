"""HTTP ingest, live latency and memory of ``agenttrail serve`` on loopback.

    python bench/server.py [--events 4000] [--clients 4] [--samples 400]
                           [--agents 8] [--turns 150] [--phoenix 160]

Starts a real ``agenttrail serve`` in a subprocess on a fresh SQLite log and measures:
- single appends: one event per POST, ``--clients`` concurrent clients;
- batched appends: 100 events per POST, ``--clients`` concurrent clients;
- append → subscriber latency: one WebSocket subscriber; each event carries the wall time it
  was posted at, the subscriber takes the difference on arrival (p50, p99, ms);
- server memory: its peak resident set (VmHWM) after all of the above (MiB).

Then the agent workload the issue compares with Arize Phoenix: ``--agents`` agents at once,
each recording ``--turns`` turns of 6 events (a user message, an assistant message with a
tool call, the call, its ~1 KiB result, the answer, and its usage) into a session of its own,
once with one POST per turn and once with one POST per event, each agent on one keep-alive
connection (``http.client``, bodies encoded up front, so the client costs little). The server
runs the app ``agenttrail serve`` runs, in a process of its own (``_serve.serving_app``), and
for each it reports events/s, the ratio to Phoenix's ``--phoenix`` events/s on the same
workload (recorded: docs/benchmarks.md, The server), the server's CPU per request (user +
system time of its process over the run, ``/proc/PID/stat``), and the group commit: requests
per commit. The raw floor in the same run: ``sqlite3`` appending the same stored bytes with
one ``synchronous = FULL`` commit per request, from one thread.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
from _serve import (  # bench/_serve.py, beside this script
    committer_stats,
    load_average,
    serving,
    serving_app,
)
from websockets.sync.client import connect

BATCH = 100
"""Events per batched POST."""

PHOENIX_EVENTS_S = 160.0
"""Arize Phoenix's ingest on this workload and machine, recorded in the issue's run (issue 19);
``bench/phoenix.py`` installs and runs Phoenix."""


def _post_all(url: str, token: str, bodies: list[dict[str, object]], clients: int) -> float:
    """POST every body from ``clients`` threads; returns the seconds it took."""
    chunks = [bodies[i::clients] for i in range(clients)]

    def run(chunk: list[dict[str, object]]) -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            for body in chunk:
                http.post(url, json=body).raise_for_status()

    threads = [threading.Thread(target=run, args=(c,)) for c in chunks]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def _latency(base: str, ws: str, token: str, sid: str, samples: int) -> list[float]:
    delays: list[float] = []
    done = threading.Event()

    def listen() -> None:
        with connect(f"{ws}/v1/sessions/{sid}/live?afterSeq=0&token={token}") as conn:
            ready.set()
            while len(delays) < samples:
                message = json.loads(conn.recv(timeout=30))
                if message["type"] == "append" and "sent" in message["payload"]:
                    delays.append((time.time() - message["payload"]["sent"]) * 1000)
        done.set()

    ready = threading.Event()
    listener = threading.Thread(target=listen)
    listener.start()
    ready.wait(10)
    time.sleep(0.2)
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        for _ in range(samples):
            http.post(
                f"{base}/v1/sessions/{sid}/events",
                json={"payload": {"type": "x", "sent": time.time()}},
            )
            time.sleep(0.005)
    done.wait(60)
    listener.join()
    return delays


def _turn(agent: int, turn: int) -> list[dict[str, object]]:
    """The 6 events of one agent turn."""
    call = f"call_{agent}_{turn}"
    return [
        {"type": "message", "role": "user", "content": f"Turn {turn}: summarise notes.md " * 4},
        {
            "type": "message",
            "role": "assistant",
            "content": "I will read the file first.",
            "meta": {"model": "gpt-5", "tool_calls": [call]},
        },
        {"type": "tool_call", "id": call, "name": "read_file", "input": {"path": "notes.md"}},
        {"type": "tool_result", "toolCallId": call, "name": "read_file", "output": "n" * 1000},
        {"type": "message", "role": "assistant", "content": "The notes say: " + "s" * 300},
        {"type": "usage", "input": 1200, "output": 180, "cache_read": 800, "cache_write": 0},
    ]


def _agents(served: object, agents: int, turns: int, per_event: bool) -> tuple[int, int, float]:
    """Each agent posts its turns to a new session; ``(events, requests, seconds)``."""
    base, headers = served.base, served.headers  # type: ignore[attr-defined]
    port = int(base.rsplit(":", 1)[1])
    plans: list[tuple[str, list[bytes]]] = []
    for agent in range(agents):
        sid = str(httpx.post(f"{base}/v1/sessions", json={}, headers=headers).json()["id"])
        bodies = []
        for turn in range(turns):
            events = _turn(agent, turn)
            if per_event:
                bodies += [json.dumps({"payload": e}).encode() for e in events]
            else:
                bodies.append(json.dumps({"events": [{"payload": e} for e in events]}).encode())
        plans.append((sid, bodies))
    send = {**headers, "Content-Type": "application/json"}
    start = threading.Barrier(agents + 1)

    def run(sid: str, bodies: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        path = f"/v1/sessions/{sid}/events"
        start.wait()
        for body in bodies:
            conn.request("POST", path, body, send)
            answer = conn.getresponse()
            answer.read()
            if answer.status != 201:
                raise SystemExit(f"POST {path}: HTTP {answer.status}")
        conn.close()

    threads = [threading.Thread(target=run, args=plan) for plan in plans]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - began
    return agents * turns * 6, sum(len(b) for _, b in plans), seconds


def _raw_floor(folder: Path, requests: int, per_request: int) -> float:
    """Requests/s of raw ``sqlite3``: ``per_request`` 1 KiB rows per commit, WAL,
    ``synchronous = FULL``, one thread (the fsync floor without group commit)."""
    conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE e (s TEXT, seq INTEGER, payload BLOB, PRIMARY KEY (s, seq))")
    row = os.urandom(1024)
    began = time.perf_counter()
    for n in range(requests):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO e VALUES ('s', ?, ?)",
            [(n * per_request + i, row) for i in range(per_request)],
        )
        conn.execute("COMMIT")
    seconds = time.perf_counter() - began
    conn.close()
    return requests / seconds


def agent_workload(agents: int, turns: int, phoenix: float) -> None:
    """The agent workload, per turn and per event (module docstring); prints a table."""
    print(f"load average before: {load_average()}")
    print(f"agent workload: {agents} agents x {turns} turns x 6 events; Phoenix {phoenix:g} ev/s")
    for per_event in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            with serving_app(Path(tmp) / "bench.db") as served:
                cpu = served.cpu_s()
                events, requests, seconds = _agents(served, agents, turns, per_event)
                cpu = served.cpu_s() - cpu
            stats = committer_stats(served)
            floor = _raw_floor(Path(tmp), 300, 1 if per_event else 6)
        rate = events / seconds
        print(
            f"  one POST per {'event' if per_event else 'turn '}: {rate:,.0f} events/s "
            f"({requests / seconds:,.0f} requests/s) = {rate / phoenix:.1f}x Phoenix; "
            f"server CPU {cpu / requests * 1000:.3f} ms/request; "
            f"{stats['requests'] / max(1, stats['commits']):.1f} requests/commit; "
            f"raw one-commit-per-request floor {floor:,.0f} requests/s "
            f"(served {requests / seconds / floor:.1f}x that)"
        )
    print(f"load average after: {load_average()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--turns", type=int, default=150)
    parser.add_argument("--phoenix", type=float, default=PHOENIX_EVENTS_S)
    parser.add_argument("--agents-only", action="store_true", help="only the agent workload")
    args = parser.parse_args()
    agent_workload(args.agents, args.turns, args.phoenix)
    if args.agents_only:
        return
    with (
        tempfile.TemporaryDirectory() as tmp,
        serving(Path(tmp) / "bench.db", Path(tmp)) as served,
    ):
        base, headers, token = served.base, served.headers, served.token
        ws = base.replace("http://", "ws://")
        payload = {"type": "message", "role": "assistant", "content": "x" * 960}

        def session() -> str:
            return str(httpx.post(f"{base}/v1/sessions", json={}, headers=headers).json()["id"])

        sid = session()
        singles = [{"payload": payload} for _ in range(args.events // 4)]
        single_s = _post_all(f"{base}/v1/sessions/{sid}/events", token, singles, args.clients)
        sid = session()
        batches = [{"events": [{"payload": payload}] * BATCH} for _ in range(args.events // BATCH)]
        batch_s = _post_all(f"{base}/v1/sessions/{sid}/events", token, batches, args.clients)
        delays = sorted(_latency(base, ws, token, session(), args.samples))
        peak_mib = served.peak_mib()
    print(f"single appends ({args.clients} clients): {len(singles) / single_s:,.0f} events/s")
    rate = args.events / batch_s
    print(f"batched appends ({BATCH}/request, {args.clients} clients): {rate:,.0f} events/s")
    p99 = delays[max(0, int(len(delays) * 0.99) - 1)]
    print(f"append -> subscriber latency: p50 {statistics.median(delays):.1f} ms, p99 {p99:.1f} ms")
    print(f"server peak RSS: {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
