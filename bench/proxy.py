"""What ``agenttrail proxy`` adds to a request on loopback: per request and to the first byte.

    python bench/proxy.py [--requests 2000] [--streams 500] [--think-ms 0]

Three processes: a loopback upstream (bench/capture.py's, a real uvicorn answering Chat
Completions calls as JSON or as a stream of 22 chunks 2 ms apart), a real
``agenttrail proxy --upstream`` in front of it writing a fresh SQLite log, and this client
(``httpx.Client``, one kept-alive connection per target). Baseline: the same client straight to
the same upstream, in the same run, the two taking turns request by request (a shared VM's
drift falls on both alike). Measured:

- a non-streaming Chat Completions call, recorded (a new conversation, so a new session, each
  time: the writer's heaviest case): the time from sending to the last byte of the answer;
- a request to a path capture does not record (``/v1/models``, which this upstream answers
  with a 404): the pass-through alone;
- time to first byte of a stream: from sending to the first byte of the first event.

Each figure is given as p50 and p99 of ``--requests`` (or ``--streams``) samples after a
warm-up, direct and through the proxy; "added" is the difference at the same percentile.
``--think-ms`` waits between requests, as an agent does while it runs its tools (the proxy's
writer process then records in the gap instead of beside the next request). Results:
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from _serve import (  # bench/_serve.py, beside this script
    CORE_OF_THE_WRITER,
    agent_core,
    children_of,
    cpu_s,
    free_port,
    load_average,
)

_CHAT = "/v1/chat/completions"

WARMUP = 100
"""Requests per target before measuring (connections, imports, caches)."""

_REQUEST = {
    "model": "gpt-4o-mini",
    "messages": [
        {"role": "system", "content": "You're a helpful assistant."},
        {"role": "user", "content": "What's the weather in Seattle and San Francisco today?"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_current_weather",
                "description": "Get the current weather in a given location",
                "parameters": {
                    "type": "object",
                    "properties": {"location": {"type": "string"}},
                    "required": ["location"],
                },
            },
        }
    ],
}


def _wait(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except ConnectionRefusedError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"a server did not start (exit {proc.poll()})") from None
            time.sleep(0.05)


def _whole(client: httpx.Client, path: str, body: bytes) -> float:
    """Seconds from sending the request to the last byte of its answer."""
    start = time.perf_counter()
    response = client.post(path, content=body, headers={"content-type": "application/json"})
    elapsed = time.perf_counter() - start
    assert response.status_code == (200 if path == _CHAT else 404), response.text
    return elapsed


def _first_byte(client: httpx.Client, path: str, body: bytes) -> float:
    """Seconds from sending a streaming request to the first byte of its first event."""
    headers = {"content-type": "application/json"}
    start = time.perf_counter()
    elapsed = 0.0
    with client.stream("POST", path, content=body, headers=headers) as response:
        for _ in response.iter_raw():
            elapsed = elapsed or time.perf_counter() - start
    return elapsed


def _paired(
    direct: httpx.Client,
    proxied: httpx.Client,
    measure: Callable[[httpx.Client, str, bytes], float],
    path: str,
    body: bytes,
    n: int,
    think_s: float,
) -> tuple[list[float], list[float]]:
    """``n`` samples of ``measure`` straight and through the proxy, taking turns (which goes
    first alternates)."""
    for _ in range(WARMUP):
        measure(direct, path, body)
        measure(proxied, path, body)
    straight: list[float] = []
    through: list[float] = []
    for i in range(n):
        order = ((direct, straight), (proxied, through))
        for client, into in order if i % 2 else order[::-1]:
            into.append(measure(client, path, body))
            if think_s:
                time.sleep(think_s)
    return straight, through


def _stack() -> str:
    """What uvicorn runs the proxy on: its optional ``httptools`` parser and ``uvloop`` loop
    when they are installed (it picks them up), else h11 and asyncio."""
    import importlib.util

    parser = "httptools" if importlib.util.find_spec("httptools") else "h11"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    return f"{parser}, {loop}"


def _writer_cpu_s(pid: int) -> float:
    """CPU seconds used by the children of process ``pid`` that are alive now (the proxy's
    capture writer process, started by one of its threads)."""
    return sum(cpu_s(child) for child in children_of(pid))


def _pct(samples: list[float], q: int) -> float:
    """The ``q``-th percentile in milliseconds (``statistics.quantiles``, inclusive)."""
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1] * 1000


def _report(
    what: str,
    straight: list[float],
    through: list[float],
    cpu_us: float,
    writer_us: float,
    up_us: float,
) -> None:
    cells = [
        f"CPU/request: proxy {cpu_us:,.0f} µs + its writer process {writer_us:,.0f} µs, "
        f"upstream {up_us:,.0f} µs"
    ]
    for q in (50, 99):
        d, p = _pct(straight, q), _pct(through, q)
        cells.append(f"p{q} {d:.3f} → {p:.3f} ms (+{p - d:.3f})")
    print(f"{what:<42} {'   '.join(cells)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--think-ms", type=float, default=0.0)
    parser.add_argument(
        "--writer-core", action="store_true", help=CORE_OF_THE_WRITER.replace("\n", " ")
    )
    args = parser.parse_args()
    cores = agent_core() if args.writer_core else None
    up_port, proxy_port = free_port(), free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "proxy.db"
        serving = [sys.executable, str(Path(__file__).with_name("capture.py")), "--serve"]
        upstream = subprocess.Popen([*serving, str(up_port)], env=env)
        proxy = subprocess.Popen(
            [sys.executable, "-m", "agenttrail.cli", "proxy", "--upstream",
             f"http://127.0.0.1:{up_port}", "--port", str(proxy_port), "--db", str(db)],
            env=env,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait(up_port, upstream)
            _wait(proxy_port, proxy)
            think = args.think_ms / 1000
            body = json.dumps(_REQUEST).encode()
            stream = json.dumps({**_REQUEST, "stream": True}).encode()
            with (
                httpx.Client(base_url=f"http://127.0.0.1:{up_port}", timeout=30) as direct,
                httpx.Client(base_url=f"http://127.0.0.1:{proxy_port}", timeout=30) as proxied,
            ):
                print(
                    f"{args.requests} requests, {args.streams} streams, think {args.think_ms} ms; "
                    f"uvicorn's parser and loop: {_stack()}; load average {load_average()}"
                )
                if cores is not None:  # the proxy starts its writer at the first recorded call
                    _whole(proxied, _CHAT, body)
                    deadline = time.monotonic() + 10
                    while not children_of(proxy.pid) and time.monotonic() < deadline:
                        time.sleep(0.05)
                    for child in children_of(proxy.pid):
                        os.sched_setaffinity(child, {cores[1]})
                    print(f"CPU {cores[0]}: client, proxy, upstream; CPU {cores[1]}: the writer")
                runs = [
                    ("non-streaming call, recorded", _whole, _CHAT, body, args.requests),
                    ("non-streaming call, passed through only", _whole, "/v1/models", body,
                     args.requests),
                    ("time to first byte of a stream, recorded", _first_byte, _CHAT, stream,
                     args.streams),
                ]  # fmt: skip
                for what, measure, path, sent, n in runs:
                    before, up_before = cpu_s(proxy.pid), cpu_s(upstream.pid)
                    writer_before = _writer_cpu_s(proxy.pid)
                    samples = _paired(direct, proxied, measure, path, sent, n, think)
                    # the writer process finishes the last exchanges: let it, then count it
                    time.sleep(0.5)
                    cpu_us = (cpu_s(proxy.pid) - before) / (n + WARMUP) * 1e6
                    writer_us = (_writer_cpu_s(proxy.pid) - writer_before) / (n + WARMUP) * 1e6
                    # the upstream answered each request twice: straight and through the proxy
                    up_us = (cpu_s(upstream.pid) - up_before) / (n + WARMUP) / 2 * 1e6
                    _report(what, *samples, cpu_us, writer_us, up_us)
        finally:
            for proc in (proxy, upstream):
                proc.terminate()
                proc.wait(timeout=30)
        print(f"load average at the end: {load_average()}")
        sessions = subprocess.run(
            [sys.executable, "-m", "agenttrail.cli", "sessions", "--db", str(db), "--json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.count("\n")
        print(f"sessions recorded: {sessions}")


if __name__ == "__main__":
    main()
