"""OTLP ingest of an agent workload: the OpenTelemetry SDK's OTLP/HTTP exporter (protobuf) sends
GenAI spans to a real ``agenttrail serve``; events/s and server memory, against raw sqlite3.

    python bench/otlp.py [--conversations 200] [--turns 8] [--exporters 4]

The workload: ``--conversations`` agent runs (one trace each, ``gen_ai.conversation.id`` set),
each of ``--turns`` tool-calling turns. A turn is an inference span (``chat``) whose
``gen_ai.input.messages`` repeat the whole history so far, as instrumentations send it, and
whose output asks for a tool; then an ``execute_tool`` span with the call's result. Each
exporter is a process of its own (its own SDK ``TracerProvider`` and
``opentelemetry-exporter-otlp-proto-http`` exporter), as each agent in production has; it
builds its spans into memory first, then sends them 512 a request (the
``BatchSpanProcessor``'s batch), one request at a time, waiting for each answer, as the SDK
does. The workload is run twice, each time to a fresh server on a fresh SQLite log: by one
exporter, then shared among ``--exporters`` (conversation ``c`` goes to exporter
``c mod N``) sending at once. Measured, for each:

- OTLP ingest: events the server stored per second, from the moment every exporter has its
  spans ready to the last answer, so that the figure is the exporters' encoding, the HTTP
  round trips and the server, not the agents making their spans;
- the server's CPU seconds (user + system) over the ingest, per 1,000 events, and the rate it
  bounds (events per server CPU second): a loaded machine's other work disturbs CPU time far
  less than the wall clock, and with enough exporters the server's CPU is the bound;
- the exporters' CPU seconds (encoding and sending);
- server memory: its peak resident set (VmHWM) after the run (MiB);
- the baseline, in the same run: raw ``sqlite3`` ``executemany`` of the same stored payload
  bytes into a table of the same shape (WAL, ``synchronous=FULL``), one transaction per
  session, as the receiver commits.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

from _serve import load_average, serving  # bench/_serve.py, beside this script
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agenttrail.log.store import open_store

BATCH = 512
"""Spans per export request: the SDK ``BatchSpanProcessor``'s default batch."""


def _workload(
    provider: TracerProvider, conversations: int, turns: int, share: int = 0, of: int = 1
) -> None:
    """Each conversation ``c`` with ``c % of == share``: ``turns`` chat + execute_tool span
    pairs, the history growing."""
    tracer = provider.get_tracer("bench")
    for c in range(share, conversations, of):
        history: list[dict[str, object]] = [
            {"role": "user", "parts": [{"type": "text", "content": f"Task {c}: " + "x" * 400}]}
        ]
        with tracer.start_as_current_span("invoke_agent bench") as agent:
            agent.set_attribute("gen_ai.operation.name", "invoke_agent")
            agent.set_attribute("gen_ai.conversation.id", f"bench-{c}")
            for t in range(turns):
                call = {
                    "type": "tool_call",
                    "id": f"call_{c}_{t}",
                    "name": "search",
                    "arguments": {"query": f"step {t}"},
                }
                answer = {"role": "assistant", "parts": [call], "finish_reason": "tool_call"}
                with tracer.start_as_current_span("chat model") as chat:
                    chat.set_attribute("gen_ai.operation.name", "chat")
                    chat.set_attribute("gen_ai.conversation.id", f"bench-{c}")
                    chat.set_attribute("gen_ai.provider.name", "openai")
                    chat.set_attribute("gen_ai.request.model", "gpt-4o")
                    chat.set_attribute("gen_ai.input.messages", json.dumps(history))
                    chat.set_attribute("gen_ai.output.messages", json.dumps([answer]))
                    chat.set_attribute("gen_ai.usage.input_tokens", 100 + t)
                    chat.set_attribute("gen_ai.usage.output_tokens", 20)
                result = "r" * 300
                with tracer.start_as_current_span("execute_tool search") as tool:
                    tool.set_attribute("gen_ai.operation.name", "execute_tool")
                    tool.set_attribute("gen_ai.conversation.id", f"bench-{c}")
                    tool.set_attribute("gen_ai.tool.name", "search")
                    tool.set_attribute("gen_ai.tool.call.id", call["id"])
                    tool.set_attribute("gen_ai.tool.call.arguments", json.dumps(call["arguments"]))
                    tool.set_attribute("gen_ai.tool.call.result", result)
                history.append(answer)
                history.append(
                    {
                        "role": "tool",
                        "parts": [
                            {"type": "tool_call_response", "id": call["id"], "result": result}
                        ],
                    }
                )


def _raw_sqlite(path: Path, sessions: list[list[bytes]]) -> tuple[float, float]:
    """Seconds and CPU seconds to insert the same payloads with raw sqlite3, one transaction
    per session."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE events (session_id TEXT, seq INTEGER, created_at TEXT, payload BLOB, "
        "hash BLOB, key TEXT, PRIMARY KEY (session_id, seq))"
    )
    start, cpu = time.perf_counter(), time.process_time()
    for n, payloads in enumerate(sessions):
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)",
            [
                (str(n), i, "2026-01-01T00:00:00.000000Z", p, b"\0" * 32, f"k{i}")
                for i, p in enumerate(payloads, start=1)
            ],
        )
        db.execute("COMMIT")
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    db.close()
    return elapsed, cpu


@dataclass(frozen=True)
class _Sent:
    """What one exporter process did."""

    spans: int
    build_s: float
    """Seconds the SDK took to make its spans (before the ingest)."""
    cpu_s: float
    """Its CPU seconds over the ingest: the exporter's encoding and HTTP."""


def _exporter(
    endpoint: str,
    headers: dict[str, str],
    work: tuple[int, int, int, int],
    start: Barrier,
    results: Queue[_Sent],
) -> None:
    """One agent process: make its share of the workload (``work``: conversations, turns,
    share, of) with the SDK, wait for the others, then export it 512 spans a request."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    began = time.perf_counter()
    _workload(provider, *work)
    build_s = time.perf_counter() - began
    spans = memory.get_finished_spans()
    exporter = OTLPSpanExporter(endpoint=endpoint, headers=headers)
    start.wait()
    cpu = time.process_time()
    for i in range(0, len(spans), BATCH):
        assert exporter.export(spans[i : i + BATCH]).name == "SUCCESS"
    results.put(_Sent(len(spans), build_s, time.process_time() - cpu))


@dataclass(frozen=True)
class _Run:
    """One ingest of the workload by ``exporters`` processes."""

    exporters: int
    sent: list[_Sent]
    wall_s: float
    server_cpu_s: float
    peak_mib: float
    stored: list[list[bytes]]
    """Each session's stored payloads."""

    @property
    def events(self) -> int:
        return sum(len(s) for s in self.stored)

    def report(self) -> str:
        spans, events, cpu = sum(s.spans for s in self.sent), self.events, self.server_cpu_s
        client = sum(s.cpu_s for s in self.sent)
        return (
            f"{self.exporters} exporter(s): {events / self.wall_s:,.0f} events/s "
            f"({spans / self.wall_s:,.0f} spans/s, {self.wall_s:.2f} s); server CPU "
            f"{cpu:.2f} s = {cpu / events * 1e6:.0f} ms per 1,000 events, bound "
            f"{events / cpu:,.0f} events per server CPU second; exporters' CPU {client:.2f} s; "
            f"server peak RSS {self.peak_mib:.0f} MiB"
        )


def _ingest(tmp: Path, work: tuple[int, int], exporters: int) -> _Run:
    """The workload sent by ``exporters`` processes at once to a fresh server and log."""
    db = tmp / f"bench-{exporters}.db"
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(exporters + 1)
    results: Queue[_Sent] = context.Queue()
    with serving(db, tmp) as served:
        endpoint = f"{served.base}/v1/traces"
        procs = [
            context.Process(
                target=_exporter,
                args=(endpoint, served.headers, (*work, n, exporters), start, results),
            )
            for n in range(exporters)
        ]
        for proc in procs:
            proc.start()
        start.wait()  # every exporter has its spans
        began, server = time.perf_counter(), served.cpu_s()
        sent = [results.get() for _ in procs]
        wall_s, server_cpu = time.perf_counter() - began, served.cpu_s() - server
        peak_mib = served.peak_mib()
        for proc in procs:
            proc.join()
    with open_store(db) as store:
        stored = [[e.data for e in store.read(s.id)] for s in store.sessions()]
    return _Run(exporters, sent, wall_s, server_cpu, peak_mib, stored)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--exporters", type=int, default=4)
    args = parser.parse_args()
    work = (args.conversations, args.turns)
    with tempfile.TemporaryDirectory() as tmp:
        one = _ingest(Path(tmp), work, 1)
        many = _ingest(Path(tmp), work, args.exporters)
        raw_s, raw_cpu = _raw_sqlite(Path(tmp) / "raw.db", one.stored)
    assert many.events == one.events, "both runs store the whole workload"
    spans, stored = one.sent[0].spans, one.events
    print(f"{spans:,} spans -> {stored:,} events in {len(one.stored)} sessions")
    print(f"SDK span building (one exporter): {spans / one.sent[0].build_s:,.0f} spans/s")
    print(f"OTLP ingest, {one.report()}")
    print(f"OTLP ingest, {many.report()}")
    print(
        f"raw sqlite3 inserts of the same events: {stored / raw_s:,.0f} events/s, CPU "
        f"{raw_cpu:.2f} s ({stored / raw_cpu:,.0f} events per CPU second)"
    )
    print(f"ratio OTLP / raw (wall): one exporter {raw_s / one.wall_s:.3f}, "
          f"{args.exporters} exporters {raw_s / many.wall_s:.3f}")  # fmt: skip
    print(f"load {load_average()}")


if __name__ == "__main__":
    main()
