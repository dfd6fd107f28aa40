"""What ``agenttrail.instrument`` costs an agent: per call, and before the first streamed chunk.

    python bench/capture.py [--calls 400] [--turns 20] [--streams 100]

The upstream is a real uvicorn server on loopback in a subprocess of its own (this script with
``--serve``), so that the CPU time measured here (``time.process_time``: every thread of this
process) is the client's and agenttrail's only. The capture writes in a writer process of its
own; its CPU per exchange is reported apart, once it has exited. The
client is the real ``openai`` package. Baseline: the same client without agenttrail, in the
same run, against the same server.

- non-streaming calls, each a new conversation (a system and a user message; a session is
  created per call), ``--calls`` of them: wall time and CPU per call, with and without; the
  capture is flushed before the clock stops, so the wall time counts the writing too;
- a tool loop of ``--turns`` calls whose history grows by three messages a turn (assistant
  with a tool call, its result, a user message), the history recognised and only what is new
  stored;
- time to first streamed chunk, ``--streams`` streams: the median of the time from ``create``
  to the first chunk the caller gets, with and without;
- the capture core alone: CPU per exchange of ``Capture.write`` in this thread (what the
  writer process spends per call), measured directly rather than as a difference of two
  larger figures;
- the hand-over alone: CPU per exchange of ``Capture.record`` in this thread (pickling, the
  pipe write) and of this process's other threads (the reader of the writer's answers), also
  measured directly: on a loaded machine the difference of the per-call figures above is
  noisier than the overhead itself;
- with ``--instructions``, only: the instructions the agent's process executes per call, with
  and without, counted by valgrind's callgrind (the client in a process of its own, the
  writer process not traced), as the difference of a run of ``--calls / 5`` calls and one of
  ``--calls / 5 + --calls`` calls, so that start-up cancels out. A count of instructions is
  the same in every run whatever else the machine does, where CPU time on a shared VM moves
  by more than the overhead; it takes minutes (valgrind runs Python about 50 times slower).

Each measurement runs :data:`REPEATS` times and keeps its best (a shared VM's noise only ever
slows a run down). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

REPEATS = 5
"""Runs of each measurement, with and without agenttrail taking turns; the best is kept."""

_COMPLETION = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "created": 1731368630,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_bench",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 120, "completion_tokens": 17, "total_tokens": 137},
}
_CHUNKS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
    *({"choices": [{"index": 0, "delta": {"content": f"word{i} "}}]} for i in range(20)),
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
]
_STREAM_GAP_S = 0.002
"""Time between two streamed chunks: a model writing about 500 tokens a second."""


def serve(port: int) -> None:
    """The upstream: a chat completion (JSON, or a stream of chunks)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    body = json.dumps(_COMPLETION).encode()

    async def chunks() -> AsyncIterator[bytes]:
        import asyncio

        for n, chunk in enumerate(_CHUNKS):
            if n:
                await asyncio.sleep(_STREAM_GAP_S)
            base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1}
            yield f"data: {json.dumps({**base, 'model': 'm', **chunk})}\n\n".encode()
        yield b"data: [DONE]\n\n"

    async def completions(request: Request) -> Response:
        sent = json.loads(await request.body())
        if sent.get("stream"):
            return StreamingResponse(chunks(), media_type="text/event-stream")
        return Response(body, media_type="application/json")

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


Timing = tuple[float, float, float]
"""Seconds of wall time, of CPU in the whole process, of CPU in the caller's thread."""


def _best(plain: Callable[[], Timing], live: Callable[[], Timing]) -> tuple[Timing, Timing]:
    """The best of :data:`REPEATS` runs of each, run in turns so that the machine's noise
    falls on both alike."""
    runs: tuple[list[Timing], list[Timing]] = ([], [])
    for _ in range(REPEATS):
        runs[0].append(plain())
        runs[1].append(live())
    best = [tuple(min(r[i] for r in side) for i in range(3)) for side in runs]
    return (best[0][0], best[0][1], best[0][2]), (best[1][0], best[1][1], best[1][2])


def _clock() -> Timing:
    return time.perf_counter(), time.process_time(), time.thread_time()


def _since(start: Timing) -> Timing:
    now = _clock()
    return now[0] - start[0], now[1] - start[1], now[2] - start[2]


def _calls(client: Any, calls: int, flush: Callable[[], object]) -> Timing:
    """The timing of ``calls`` new conversations."""
    start = _clock()
    for i in range(calls):
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": "You are a weather assistant."},
                {"role": "user", "content": f"What is the weather in Oslo? (run {i})"},
            ],
        )
    flush()
    return _since(start)


def _loop(client: Any, turns: int, flush: Callable[[], object]) -> Timing:
    """The timing of one tool loop of ``turns`` calls, its history growing."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": f"Weather in Oslo? ({time.time_ns()})"},
    ]
    start = _clock()
    for turn in range(turns):
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        call = reply.choices[0].message.tool_calls[0]
        messages.append(reply.choices[0].message.model_dump(exclude_none=True))
        # the same call id every turn in this canned reply: a distinct result keeps it apart
        messages.append({"role": "tool", "tool_call_id": call.id, "content": f"{turn} °C"})
        messages.append({"role": "user", "content": f"And in an hour? ({turn})"})
    flush()
    return _since(start)


def _exchanges(n: int) -> list[Any]:
    """``n`` finished exchanges as the client of :func:`_calls` makes them (new conversations),
    with the headers the real client sends."""
    from agenttrail.ingest.capture import HttpExchange

    body = json.dumps(_COMPLETION).encode()
    headers = [("content-type", "application/json"), ("date", "Thu, 03 Dec 2026 16:00:00 GMT")]
    sent = [("content-type", "application/json"), ("authorization", "Bearer k")]
    sent += [(f"x-stainless-{name}", "value") for name in ("lang", "os", "arch", "runtime")]
    return [
        HttpExchange(
            method="POST",
            url="http://127.0.0.1:9/v1/chat/completions",
            request_headers=sent,
            request_body=json.dumps(
                {
                    "model": "gpt-4o-mini",
                    "messages": [
                        {"role": "system", "content": "You are a weather assistant."},
                        {"role": "user", "content": f"What is the weather in Oslo? (run {i})"},
                    ],
                }
            ).encode(),
            status=200,
            response_headers=headers,
            response_body=body,
            started=time.time(),
            duration_s=0.002,
        )
        for i in range(n)
    ]


def _writes(folder: Path, writes: int) -> float:
    """CPU seconds per exchange of the capture core alone (``Capture.write`` in this thread,
    new conversations as in :func:`_calls`): what the writer process spends on each call."""
    from agenttrail.ingest.capture import Capture

    exchanges = _exchanges(writes * REPEATS)
    best = float("inf")
    with Capture(folder / "writes.db") as capture:
        for r in range(REPEATS):
            start = time.process_time()
            for exchange in exchanges[r * writes : (r + 1) * writes]:
                capture.write(exchange)
            best = min(best, (time.process_time() - start) / writes)
    return best


def _handovers(folder: Path, n: int) -> tuple[float, float]:
    """CPU seconds per exchange that handing it to the writer process costs the agent's
    process, measured directly: in the caller's thread (``Capture.record``: pickling and the
    pipe write), and in its other threads (the answers' reader, a feeder if one was needed)
    from ``/proc/self/task/*/schedstat``, up to the flush. Best of :data:`REPEATS`."""
    import threading

    from agenttrail.ingest.capture import Capture

    def others() -> float:
        main = threading.get_native_id()
        return sum(
            int((t / "schedstat").read_text().split()[0]) / 1e9
            for t in Path("/proc/self/task").iterdir()
            if int(t.name) != main and (t / "schedstat").exists()
        )

    exchanges = _exchanges(n * (REPEATS + 1))
    own = rest = float("inf")
    with Capture(folder / "handover.db", writer="process") as capture:
        for exchange in exchanges[:n]:  # the writer process starts, and warms up
            capture.record(exchange)
        capture.flush()
        for r in range(1, REPEATS + 1):
            before, start = others(), time.thread_time()
            for exchange in exchanges[r * n : (r + 1) * n]:
                capture.record(exchange)
            own = min(own, (time.thread_time() - start) / n)
            capture.flush()
            rest = min(rest, (others() - before) / n)
    return own, rest


def _paced(folder: Path, n: int, gap_s: float) -> tuple[float, float]:
    """CPU seconds per exchange of the writer process and of the agent's whole process
    (``Capture.record``, the answers' reader, the flush at the end), for ``n`` exchanges
    handed over one every ``gap_s`` seconds, as an agent making calls back to back does
    (the same loop of sleeps alone is subtracted), once the writer process has started:
    CPU figures, steadier than a difference of two per-call figures on a shared machine.
    Best of :data:`REPEATS`."""
    from _serve import cpu_s

    from agenttrail.ingest.capture import Capture

    exchanges = _exchanges((n + 1) * REPEATS)
    writer = agent = float("inf")
    for r, at in enumerate(range(0, len(exchanges), n + 1)):
        start = time.process_time()
        for _ in range(n):
            time.sleep(gap_s)
        idle = time.process_time() - start
        with Capture(folder / f"paced{r}.db", writer="process") as capture:
            capture.record(exchanges[at])  # the writer process starts
            capture.flush()
            pid = capture._writer.pid  # type: ignore[union-attr]
            assert pid is not None
            before, start = cpu_s(pid), time.process_time()
            for exchange in exchanges[at + 1 : at + n + 1]:
                capture.record(exchange)
                time.sleep(gap_s)  # the call the agent makes meanwhile
            capture.flush()
            spent = time.process_time() - start - idle
            writer, agent = min(writer, (cpu_s(pid) - before) / n), min(agent, spent / n)
    return writer, agent


def _first_chunks(client: Any, streams: int, flush: Callable[[], object]) -> list[float]:
    """Seconds from ``create`` to the first chunk, per stream; ``flush`` runs between two
    streams, untimed (an agent reads a reply before its next call)."""
    firsts = []
    for i in range(streams):
        flush()
        start = time.perf_counter()
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": f"Tell me ({i})"}],
            stream=True,
        )
        iterator = iter(stream)
        next(iterator)
        firsts.append(time.perf_counter() - start)
        for _ in iterator:
            pass
    return firsts


def main() -> None:
    from _serve import (  # bench/_serve.py, beside this script
        CORE_OF_THE_WRITER,
        agent_core,
        children_of,
        free_port,
        load_average,
    )

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument(
        "--writer-core", action="store_true", help=CORE_OF_THE_WRITER.replace("\n", " ")
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--client", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.client:
        _client_run(*args.client)
        return

    import openai

    import agenttrail
    from agenttrail.ingest.instrument import capture_of

    cores = agent_core() if args.writer_core else None
    port = free_port()
    print(f"load average at the start: {load_average()}")
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        _wait(port)
        if args.instructions:
            _instructions(port, args.calls)
            return
        with tempfile.TemporaryDirectory() as folder:
            base = f"http://127.0.0.1:{port}/v1"
            plain = openai.OpenAI(api_key="sk-bench", base_url=base, max_retries=0)
            live = agenttrail.instrument(
                openai.OpenAI(api_key="sk-bench", base_url=base, max_retries=0),
                log=Path(folder) / "bench.db",
            )
            capture = capture_of(live)
            assert capture is not None
            nothing: Callable[[], object] = lambda: None  # noqa: E731
            _calls(plain, 20, nothing), _calls(live, 20, capture.flush)  # warm up both
            if cores is not None:  # the writer process started at the first recorded call
                for child in children_of(os.getpid()) - {server.pid}:
                    os.sched_setaffinity(child, {cores[1]})
                print(f"CPU {cores[0]}: client and upstream; CPU {cores[1]}: the writer")
            _report(
                f"{args.calls} non-streaming calls, a new conversation each",
                *_best(
                    lambda: _calls(plain, args.calls, nothing),
                    lambda: _calls(live, args.calls, capture.flush),
                ),
                args.calls,
            )
            _report(
                f"a tool loop of {args.turns} calls, history growing",
                *_best(
                    lambda: _loop(plain, args.turns, nothing),
                    lambda: _loop(live, args.turns, capture.flush),
                ),
                args.turns,
            )
            without, with_ = [], []
            for _ in range(REPEATS):
                without.append(statistics.median(_first_chunks(plain, args.streams, nothing)))
                with_.append(statistics.median(_first_chunks(live, args.streams, capture.flush)))
            capture.flush()
            print(
                f"the capture core alone (Capture.write, a new conversation each): "
                f"{_writes(Path(folder), args.calls) * 1e6:.0f} µs of CPU per exchange"
            )
            own, rest = _handovers(Path(folder), args.calls)
            print(
                f"the hand-over alone (Capture.record to the writer process), CPU per "
                f"exchange: the caller's thread {own * 1e6:.0f} µs, the agent's other threads "
                f"{rest * 1e6:.0f} µs"
            )
            first, then = min(without), min(with_)
            print(
                f"first streamed chunk, median of {args.streams} (best of {REPEATS}): without "
                f"{first * 1e3:.3f} ms, with {then * 1e3:.3f} ms, difference "
                f"{(then - first) * 1e3:+.3f} ms"
            )
            written = capture.written
            print(f"capture: {written} exchanges written, {capture.failures} failures")
            plain.close()
            live.close()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            capture.close()  # the writer process exits, and its CPU time is counted here
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            writer_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            print(
                f"the writer process: {writer_s / max(written, 1) * 1e6:.0f} µs of CPU per "
                f"exchange (all its life, start-up included, over {written} exchanges)"
            )
            for gap_ms in (1.5, 20.0):
                writer_s, agent_s = _paced(Path(folder), args.calls, gap_ms / 1000)
                print(
                    f"{args.calls} exchanges handed over one every {gap_ms} ms: the writer "
                    f"process {writer_s * 1e6:.0f} µs of CPU per exchange, the agent's "
                    f"process {agent_s * 1e6:.0f} µs"
                )
            print(f"load average at the end: {load_average()}")
    finally:
        server.terminate()
        server.wait(10)


def _client_run(mode: str, calls: str, port: str) -> None:
    """``--client``: ``calls`` new conversations through a client of its own, instrumented
    (``live``) or not (``plain``), flushed at the end (what valgrind counts)."""
    import openai

    import agenttrail
    from agenttrail.ingest.instrument import capture_of

    client = openai.OpenAI(
        api_key="sk-bench", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0
    )
    flush: Callable[[], object] = lambda: None  # noqa: E731
    with tempfile.TemporaryDirectory() as folder:
        if mode == "live":
            client = agenttrail.instrument(client, log=Path(folder) / "bench.db")
            capture = capture_of(client)
            assert capture is not None
            flush = capture.flush
        _calls(client, int(calls), flush)
        client.close()


_CALLGRIND = ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null")


def _instructions(port: int, calls: int) -> None:
    """``--instructions``: the agent's process's instructions per call, with and without."""
    import re
    import shutil

    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    few = max(calls // 5, 1)
    runs = {
        (mode, n): subprocess.Popen(
            [*_CALLGRIND, sys.executable, __file__, "--client", mode, str(n), str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for mode in ("plain", "live")
        for n in (few, few + calls)
    }
    counted: dict[tuple[str, int], int] = {}
    for key, run in runs.items():
        _, err = run.communicate()
        found = re.search(r"Collected : (\d+)", err)
        if run.returncode != 0 or found is None:
            raise SystemExit(f"valgrind {key}: {err.strip().splitlines()[-1:]}")
        counted[key] = int(found.group(1))
    per_call = {
        mode: (counted[mode, few + calls] - counted[mode, few]) / calls
        for mode in ("plain", "live")
    }
    plain, live = per_call["plain"], per_call["live"]
    print(
        f"instructions of the agent's process per call (callgrind, {calls} calls): without "
        f"{plain:,.0f}, with {live:,.0f}, overhead {live - plain:+,.0f} "
        f"({(live / plain - 1) * 100:+.2f} %)"
    )


def _report(what: str, plain: Timing, live: Timing, n: int) -> None:
    (wall0, cpu0, own0), (wall1, cpu1, own1) = plain, live
    print(
        f"{what}: wall {wall0 / n * 1e6:.0f} -> {wall1 / n * 1e6:.0f} µs/call "
        f"(ratio {wall1 / wall0:.3f}, {(wall1 / wall0 - 1) * 100:+.1f} %); "
        f"CPU of the process {cpu0 / n * 1e6:.0f} -> {cpu1 / n * 1e6:.0f} µs/call "
        f"({(cpu1 - cpu0) / n * 1e6:+.0f}); of the caller's thread {own0 / n * 1e6:.0f} -> "
        f"{own1 / n * 1e6:.0f} µs/call ({(own1 - own0) / n * 1e6:+.0f})"
    )


def _wait(port: int) -> None:
    import socket

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit("the upstream did not start")


if __name__ == "__main__":
    main()
