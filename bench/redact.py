"""Redaction's cost: append throughput with the default detectors on, as a ratio of the same
appends with redaction off, in the same run; and the detectors alone against detect-secrets.

    python bench/redact.py [--events 5000] [--single 500] [--batch 100] [--postgres URL]

What is appended: an agent's session, over and over — a user message, an assistant message
of about 1 KiB of prose with two tool calls, and their two tool results, a JSON document of
about 2 KiB each (a ``ls``-like listing, an HTTP API's answer); one event in 50 carries a
secret (an API key in a prompt, AWS credentials in a tool's output). Measured:

- batched append (``--batch`` events per transaction) and single append (one per
  transaction), redaction on / off, SQLite (and PostgreSQL with ``--postgres``);
- the redactor alone (payloads per second), and detect-secrets 1.5 (Yelp; its default
  plugins, ``scan_line`` over every string of the same payloads, a line at a time), when it
  is installed: ``pip install detect-secrets``;
- a worst case: a 1 MiB base64 image in one payload, redactor alone (MiB/s).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agenttrail.log.redact import Redactor, RedactRules
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events

REPEATS = 5
"""Each measurement runs this many times and keeps its best (a shared VM's noise only ever
slows a run down)."""

PROSE = (
    "I looked at the failing build. The linker cannot find the symbol because the module was "
    "renamed in the last commit, and two call sites still use the old path. I will read both "
    "files, patch the imports, then run the tests again to be sure nothing else depends on it. "
)
KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zQ7"
CREDENTIALS = {"AccessKeyId": "ASIAIOSFODNN7EXAMPLE", "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG"}


def _session_events(i: int) -> list[dict[str, Any]]:
    """Five events of a turn; the first of every tenth turn carries a secret (1 event in 50)."""
    secret = i % 10 == 0
    listing = [{"name": f"src/module_{n}.py", "size": 1200 + n, "mode": "0644"} for n in range(24)]
    answer: dict[str, Any] = {"status": 200, "items": listing[:12], "next": None}
    if secret:
        answer["credentials"] = CREDENTIALS
    calls = [
        {"type": "tool_call", "id": f"c{i}a", "name": "list_files", "arguments": {"path": "src"}},
        {"type": "tool_call", "id": f"c{i}b", "name": "http_get", "arguments": {"url": "/v1/x"}},
    ]
    return [
        events.message("user", f"Fix the build{f' (key {KEY})' if secret else ''}, please."),
        events.message("assistant", PROSE * 4),
        *calls,
        {"type": "tool_result", "toolCallId": f"c{i}a", "output": json.dumps(listing)},
        {"type": "tool_result", "toolCallId": f"c{i}b", "output": json.dumps(answer)},
    ]


def _payloads(n: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    turn = 0
    while len(found) < n:
        found += _session_events(turn)
        turn += 1
    return found[:n]


def _best(run: Callable[[], None], setup: Callable[[], None] | None = None) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        if setup is not None:
            setup()
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _append_rates(
    off: LogStore, on: LogStore, payloads: list[dict[str, Any]], single: int, batch: int
) -> dict[str, float]:
    """Batched and single appends per second into fresh sessions, redaction off and on, the
    four measured in turn in each of :data:`REPEATS` rounds (a shared machine's load then
    weighs on both sides alike), best of each kept."""
    best: dict[str, float] = {}
    for _ in range(REPEATS):
        for name, store in (("off", off), ("on", on)):
            session = store.create_session(NewSession()).id
            start = time.perf_counter()
            for first in range(0, len(payloads), batch):
                chunk = [NewEvent(p) for p in payloads[first : first + batch]]
                store.append_batch(session, chunk)
            rate = len(payloads) / (time.perf_counter() - start)
            best[f"batched {name}"] = max(best.get(f"batched {name}", 0.0), rate)
            session = store.create_session(NewSession()).id
            start = time.perf_counter()
            for payload in payloads[:single]:
                store.append(session, payload)
            rate = single / (time.perf_counter() - start)
            best[f"single {name}"] = max(best.get(f"single {name}", 0.0), rate)
    return best


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _detect_secrets_rate(payloads: list[dict[str, Any]]) -> float | None:
    """Payloads per second through detect-secrets' default plugins, or None without it."""
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    with default_settings():

        def run() -> None:
            for payload in payloads:
                for text in _strings(payload):
                    for line in text.splitlines():
                        for _ in scan_line(line):
                            pass

        return len(payloads) / _best(run)


def _stores(url: str | None, folder: Path) -> Iterator[tuple[str, LogStore, LogStore]]:
    yield "SQLite", open_store(folder / "off.db", redact=False), open_store(folder / "on.db")
    if url:
        schemas = [f"bench_redact_{uuid.uuid4().hex[:8]}" for _ in range(2)]
        sep = "&" if "?" in url else "?"
        off, on = (f"{url}{sep}schema={s}" for s in schemas)
        yield "PostgreSQL", open_store(off, redact=False), open_store(on)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--single", type=int, default=500)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--postgres", metavar="URL")
    args = parser.parse_args()
    payloads = _payloads(args.events)
    size = sum(len(json.dumps(p)) for p in payloads) / len(payloads)
    print(f"{len(payloads)} events, {size:.0f} bytes of JSON each on average, 1 in 50 a secret")

    with tempfile.TemporaryDirectory() as folder:
        for name, off, on in _stores(args.postgres, Path(folder)):
            with off, on:
                rates = _append_rates(off, on, payloads, args.single, args.batch)
            for kind in ("batched", "single"):
                what = f"batched append ({args.batch}/tx)" if kind == "batched" else "single append"
                low, high = rates[f"{kind} off"], rates[f"{kind} on"]
                print(f"{name} {what}: off {low:,.0f}/s, on {high:,.0f}/s = {high / low:.0%}")
            if name == "PostgreSQL":
                _drop_schemas(off.url, on.url)

    redactor = Redactor(RedactRules(), key=lambda: os.urandom(32))
    ours = len(payloads) / _best(lambda: [redactor.payload(p) for p in payloads])
    print(f"redactor alone: {ours:,.0f} payloads/s")
    sample = payloads[:250]  # detect-secrets is too slow for the whole set
    theirs = _detect_secrets_rate(sample)
    if theirs is None:
        print("detect-secrets: not installed")
    else:
        print(f"detect-secrets (default plugins): {theirs:,.0f} payloads/s = {theirs / ours:.2%}")
    image = {"type": "message", "content": base64.b64encode(os.urandom(768 * 1024)).decode()}
    mib = len(image["content"]) / 2**20
    print(
        f"1 MiB of base64 in one payload: {mib / _best(lambda: redactor.payload(image)):.0f} MiB/s"
    )


def _drop_schemas(*urls: str) -> None:
    import psycopg

    for url in urls:
        base, _, schema = url.partition("?schema=")
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main()
