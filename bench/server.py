"""HTTP ingest, live latency and memory of ``agenttrail serve`` on loopback.

    python bench/server.py [--events 4000] [--clients 4] [--samples 400]
                           [--agents 8] [--turns 150] [--phoenix 160]
                           [--phoenix-venv /tmp/agenttrail-phoenix] [--agents-only]

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
for each it reports events/s, the ratio to Phoenix's events/s on the same workload, the
server's CPU per request (user + system time of its process over the run,
``/proc/PID/stat``), and the group commit: requests per commit. The raw floor in the same
run: ``sqlite3`` appending the same stored bytes with one ``synchronous = FULL`` commit per
request, from one thread.

Phoenix's figure: with ``--phoenix-venv``, a real ``phoenix serve`` (installed into that
virtual environment first if it is not there, ``bench/phoenix.py``) is sent the same
workload in the same run, as OTLP/HTTP spans (a span per event, one request per turn or
per event, the same threads and connections), and its rate is the events whose spans it
has stored (its GraphQL API) over the time from the first request until the last is stored:
Phoenix answers before it stores, agenttrail once the events are durable. Without it, the
ratio is to ``--phoenix``, the issue's recorded 160 events/s.
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
from typing import Any

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
        plans.append((f"/v1/sessions/{sid}/events", bodies))
    send = {**headers, "Content-Type": "application/json"}
    seconds = _post_plans(base, plans, send, 201)
    return agents * turns * 6, sum(len(b) for _, b in plans), seconds


def _post_plans(
    base: str, plans: list[tuple[str, list[bytes]]], headers: dict[str, str], status: int
) -> float:
    """Each plan's bodies POSTed to its path in turn, the plans at once (a thread and one
    keep-alive ``http.client`` connection each); the seconds from the start until the last
    answer. Exits when an answer is not ``status``."""
    port = int(base.rsplit(":", 1)[1])
    start = threading.Barrier(len(plans) + 1)

    def run(path: str, bodies: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        start.wait()
        for body in bodies:
            conn.request("POST", path, body, headers)
            answer = conn.getresponse()
            answer.read()
            if answer.status != status:
                raise SystemExit(f"POST {path}: HTTP {answer.status}")
        conn.close()

    threads = [threading.Thread(target=run, args=plan) for plan in plans]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - began


def _spans(agent: int, turn: int) -> list[Any]:
    """The 6 events of one agent turn (:func:`_turn`) as OTLP spans of one trace, as an
    OpenInference exporter sends them to Phoenix: a span per event, its kind
    (``openinference.span.kind``), its text as ``input.value`` or ``output.value``, the
    agent's session as ``session.id``, the usage as ``llm.token_count.*``."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    def value(v: object) -> Any:
        return AnyValue(int_value=v) if isinstance(v, int) else AnyValue(string_value=str(v))

    def attributes(**values: object) -> list[Any]:
        return [KeyValue(key=k.replace("__", "."), value=value(v)) for k, v in values.items()]

    trace_id = os.urandom(16)  # new ids each run: Phoenix keeps one span per id
    now = time.time_ns()
    spans = []
    for i, event in enumerate(_turn(agent, turn)):
        kind = {"tool_call": "TOOL", "tool_result": "TOOL", "usage": "LLM"}.get(
            str(event["type"]), "LLM" if event.get("role") == "assistant" else "CHAIN"
        )
        text = json.dumps(event.get("content", event.get("output", event)))
        side = "output__value" if event.get("role") == "assistant" else "input__value"
        extra: dict[str, object] = {side: text}
        if event["type"] == "usage":
            extra = {
                "llm__token_count__prompt": event["input"],
                "llm__token_count__completion": event["output"],
            }
        spans.append(
            Span(
                trace_id=trace_id,
                span_id=os.urandom(8),
                name=f"{event['type']} {i}",
                kind=Span.SPAN_KIND_INTERNAL,
                start_time_unix_nano=now,
                end_time_unix_nano=now + 1000,
                attributes=attributes(
                    openinference__span__kind=kind, session__id=f"agent-{agent}", **extra
                ),
            )
        )
    return spans


def _export(spans: list[Any]) -> bytes:
    """An OTLP/HTTP protobuf body (``ExportTraceServiceRequest``) of ``spans``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

    scope = ScopeSpans(spans=spans)
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[scope])]
    ).SerializeToString()


def _phoenix_stored(base: str) -> int:
    """Spans Phoenix has stored so far, over its projects (its GraphQL API)."""
    query = "{ projects { edges { node { recordCount } } } }"
    answer = httpx.post(f"{base}/graphql", json={"query": query}, timeout=30).json()
    return sum(edge["node"]["recordCount"] for edge in answer["data"]["projects"]["edges"])


def phoenix_agents(base: str, agents: int, turns: int, per_event: bool) -> tuple[float, float]:
    """The agent workload sent to a Phoenix at ``base`` as OTLP/HTTP spans (:func:`_spans`),
    a request per turn or per event; ``(events/s until the last answer, events/s until
    Phoenix has stored every span)``: Phoenix answers before it stores, agenttrail once it
    is durable, so the second is the one to compare."""
    before = _phoenix_stored(base)
    plans = []
    for agent in range(agents):
        turns_spans = [_spans(agent, turn) for turn in range(turns)]
        if per_event:
            bodies = [_export([span]) for spans in turns_spans for span in spans]
        else:
            bodies = [_export(spans) for spans in turns_spans]
        plans.append(("/v1/traces", bodies))
    events = agents * turns * 6
    headers = {"Content-Type": "application/x-protobuf"}
    answered = _post_plans(base, plans, headers, 200)
    after = time.perf_counter()
    seen, moved = before, after
    while seen < before + events:
        time.sleep(0.05)
        if (count := _phoenix_stored(base)) > seen:
            seen, moved = count, time.perf_counter()
        elif time.perf_counter() - moved > 60:
            raise SystemExit(f"Phoenix stored {seen - before:,} of {events:,} spans, then no more")
    return events / answered, events / (answered + time.perf_counter() - after)


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


def agent_workload(agents: int, turns: int, phoenix: float, venv: Path | None) -> None:
    """The agent workload, per turn and per event (module docstring); prints a table. With
    ``venv``, Phoenix runs the same workload in the same run (installed there if it is not:
    ``bench/phoenix.py``) and the ratios are to what it measured, not to ``phoenix``."""
    print(f"load average before: {load_average()}")
    measured: dict[bool, float] = {}
    if venv is not None:
        from phoenix import serving as phoenix_serving  # bench/phoenix.py, beside this script

        with phoenix_serving(venv, ["arize-phoenix"]) as (base, version):
            for per_event in (False, True):
                answered, stored = phoenix_agents(base, agents, turns, per_event)
                measured[per_event] = stored
                each = "event" if per_event else "turn "
                print(
                    f"  Phoenix {version}, one OTLP request per {each}: {stored:,.0f} events/s "
                    f"stored ({answered:,.0f} events/s answered)"
                )
    print(f"agent workload: {agents} agents x {turns} turns x 6 events")
    for per_event in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            with serving_app(Path(tmp) / "bench.db") as served:
                cpu = served.cpu_s()
                events, requests, seconds = _agents(served, agents, turns, per_event)
                cpu = served.cpu_s() - cpu
            stats = committer_stats(served)
            floor = _raw_floor(Path(tmp), 300, 1 if per_event else 6)
        rate = events / seconds
        peer = measured.get(per_event, phoenix)
        print(
            f"  one POST per {'event' if per_event else 'turn '}: {rate:,.0f} events/s "
            f"({requests / seconds:,.0f} requests/s) = {rate / peer:.1f}x Phoenix's {peer:,.0f} "
            f"({'this run' if per_event in measured else 'recorded'}); "
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
    parser.add_argument("--phoenix-venv", type=Path, help="run Phoenix on the agent workload")
    parser.add_argument("--agents-only", action="store_true", help="only the agent workload")
    args = parser.parse_args()
    agent_workload(args.agents, args.turns, args.phoenix, args.phoenix_venv)
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
