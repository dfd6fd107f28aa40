"""HTTP ingest, live latency and memory of ``agenttrail serve`` on loopback.

    python bench/server.py [--events 4000] [--clients 4] [--samples 400]

Starts a real ``agenttrail serve`` in a subprocess on a fresh SQLite log and measures:
- single appends: one event per POST, ``--clients`` concurrent clients;
- batched appends: 100 events per POST, ``--clients`` concurrent clients;
- append → subscriber latency: one WebSocket subscriber; each event carries the wall time it
  was posted at, the subscriber takes the difference on arrival (p50, p99, ms);
- server memory: its peak resident set (VmHWM) after all of the above (MiB).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
from _serve import serving  # bench/_serve.py, beside this script
from websockets.sync.client import connect

BATCH = 100
"""Events per batched POST."""


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--samples", type=int, default=400)
    args = parser.parse_args()
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
