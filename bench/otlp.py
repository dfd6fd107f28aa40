"""OTLP ingest of an agent workload: the OpenTelemetry SDK's OTLP/HTTP exporter (protobuf) sends
GenAI spans to a real ``agenttrail serve``; events/s and server memory, against raw sqlite3.

    python bench/otlp.py [--conversations 200] [--turns 8]

The workload: ``--conversations`` agent runs (one trace each, ``gen_ai.conversation.id`` set),
each of ``--turns`` tool-calling turns. A turn is an inference span (``chat``) whose
``gen_ai.input.messages`` repeat the whole history so far, as instrumentations send it, and
whose output asks for a tool; then an ``execute_tool`` span with the call's result. The SDK
batches spans (``BatchSpanProcessor``, 512 spans a request, its queue large enough to drop
none) and sends them with
``opentelemetry-exporter-otlp-proto-http``. Measured:

- OTLP ingest: events the server stored per second, from the exporter's first request to its
  last answer. The spans are built first, by the SDK into memory, and then handed to the
  exporter 512 at a time (the ``BatchSpanProcessor``'s batch), so that the figure is the
  exporter's encoding, the HTTP round trips and the server, not the agent making its spans
  (timed apart: "SDK span building");
- the baseline, in the same run: raw ``sqlite3`` ``executemany`` of the same stored payload
  bytes into a table of the same shape (WAL, ``synchronous=FULL``), one transaction per
  session, as the receiver commits;
- server memory: its peak resident set (VmHWM) after the run (MiB);
- CPU seconds (user + system), which a loaded machine's other work disturbs far less than
  the wall-clock figure above: the server's over the ingest (events per server CPU second),
  the exporter's (this process: encoding and sending), and the raw baseline's.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from _serve import load_average, serving  # bench/_serve.py, beside this script
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agenttrail.log.store import open_store

BATCH = 512
"""Spans per export request: the SDK ``BatchSpanProcessor``'s default batch."""


def _workload(provider: TracerProvider, conversations: int, turns: int) -> None:
    """Each conversation: ``turns`` chat + execute_tool span pairs, the history growing."""
    tracer = provider.get_tracer("bench")
    for c in range(conversations):
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        with serving(db, Path(tmp)) as served:
            base, headers = served.base, served.headers
            memory = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(memory))
            start = time.perf_counter()
            _workload(provider, args.conversations, args.turns)
            sdk_s = time.perf_counter() - start
            spans = memory.get_finished_spans()
            exporter = OTLPSpanExporter(endpoint=f"{base}/v1/traces", headers=headers)
            start, client, server = time.perf_counter(), time.process_time(), served.cpu_s()
            for i in range(0, len(spans), BATCH):
                assert exporter.export(spans[i : i + BATCH]).name == "SUCCESS"
            otlp_s = time.perf_counter() - start
            client_cpu, server_cpu = time.process_time() - client, served.cpu_s() - server
            peak_mib = served.peak_mib()
        with open_store(db) as store:
            sessions = [[e.data for e in store.read(s.id)] for s in store.sessions()]
        raw_s, raw_cpu = _raw_sqlite(Path(tmp) / "raw.db", sessions)
    stored = sum(len(s) for s in sessions)
    print(f"{len(spans):,} spans -> {stored:,} events in {len(sessions)} sessions")
    print(f"SDK span building: {len(spans) / sdk_s:,.0f} spans/s")
    print(f"OTLP ingest: {stored / otlp_s:,.0f} events/s ({len(spans) / otlp_s:,.0f} spans/s)")
    print(f"raw sqlite3 inserts of the same events: {stored / raw_s:,.0f} events/s")
    print(f"ratio OTLP / raw: {raw_s / otlp_s:.3f}")
    print(f"server peak RSS: {peak_mib:.0f} MiB")
    print(
        f"CPU: server {server_cpu:.2f} s ({stored / server_cpu:,.0f} events per server CPU "
        f"second), exporter {client_cpu:.2f} s, raw sqlite3 {raw_cpu:.2f} s "
        f"({stored / raw_cpu:,.0f} events per CPU second); load {load_average()}"
    )


if __name__ == "__main__":
    main()
