"""Live-feed clients that vanish mid-stream (a TCP reset, no close frame) while writers append
over REST, against a real ``agenttrail serve`` process on loopback: the server lives, no
append fails, and a subscriber that resumes with ``afterSeq`` loses and repeats nothing
(docs/server.md, Live delivery)."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from agenttrail.log.store import open_store
from agenttrail.model import NewEvent, NewSession
from agenttrail.server import mint_token
from tests._wire import RawFeed
from tests.conftest import agenttrail_serve

SECRET = "fault-test-secret-0123456789abcdef0123456789abcdef"
BACKLOG = 2000
"""Events of about 1 KiB there before the test: a subscriber from ``afterSeq=0`` is sent pages
of them in bursts, so a client that vanishes does so while the server writes to it."""
WRITERS, PER_WRITER = 4, 200
TOTAL = BACKLOG + WRITERS * PER_WRITER
DROPS = 50
"""Subscribers that vanish, each after reading a few messages (some after none)."""
RESUMERS = 4
"""Subscribers that vanish and come back with ``afterSeq`` until they have every event."""


def test_clients_that_vanish_kill_nothing_and_resumers_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db, create=True) as store:
        sid = store.create_session(NewSession("faults")).id
        store.append_batch(sid, [NewEvent({"type": "x", "pad": "p" * 1000})] * BACKLOG)
    with agenttrail_serve(str(db), tmp_path, {"AGENTTRAIL_SECRET": SECRET}) as served:
        feed = served.url.replace("http://", "ws://") + f"/v1/sessions/{sid}/live"
        read = mint_token(SECRET.encode(), rights=["read"])
        append = {"Authorization": f"Bearer {mint_token(SECRET.encode(), rights=['append'])}"}
        failed: list[str] = []
        writing = threading.Event()

        def write(n: int) -> int:
            done = 0
            with httpx.Client(base_url=served.url, headers=append, timeout=30) as http:
                for i in range(PER_WRITER):
                    try:
                        r = http.post(
                            f"/v1/sessions/{sid}/events", json={"payload": {"type": "x", "w": n}}
                        )
                    except httpx.HTTPError as e:
                        failed.append(f"writer {n}, append {i}: {e!r}")
                        continue
                    if r.status_code != 201:
                        failed.append(f"writer {n}, append {i}: {r.status_code} {r.text}")
                    done += 1
            return done

        def vanish(n: int) -> int:
            rng = random.Random(n)
            writing.wait()
            for done in range(DROPS // 2):
                try:
                    with RawFeed(f"{feed}?afterSeq=0&token={read}") as client:
                        for _ in range(rng.choice((0, 1, 3, 20))):
                            if client.recv() is None:
                                break
                        client.drop(reset=rng.random() < 0.5, linger_s=rng.choice((0, 0.01, 0.05)))
                except OSError as e:
                    failed.append(f"dropper {n}, connection {done}: {e!r}")
                    return done
                time.sleep(rng.uniform(0, 0.1))
            return DROPS // 2

        def resume(n: int) -> list[int]:
            rng = random.Random(100 + n)
            seqs: list[int] = []
            deadline = time.monotonic() + 60
            while len(seqs) < TOTAL and time.monotonic() < deadline:
                last = seqs[-1] if seqs else 0
                try:
                    with RawFeed(f"{feed}?afterSeq={last}&token={read}") as client:
                        for _ in range(rng.randint(1, 150)):
                            message = client.recv()
                            if message is None:  # closed: 4408 (fell behind), resume as told
                                break
                            if message["type"] == "append":
                                seqs.append(message["seq"])
                            if len(seqs) == TOTAL:
                                break
                        client.drop(reset=rng.random() < 0.5)
                except OSError as e:
                    failed.append(f"resumer {n} after seq {last}: {e!r}")
                    return seqs
            return seqs

        with ThreadPoolExecutor(WRITERS + 2 + RESUMERS) as pool:
            resumers = [pool.submit(resume, n) for n in range(RESUMERS)]
            droppers = [pool.submit(vanish, n) for n in range(2)]
            writers = [pool.submit(write, n) for n in range(WRITERS)]
            writing.set()
            appended = sum(f.result() for f in writers)
            dropped = sum(f.result() for f in droppers)
            received = [f.result() for f in resumers]

        died = served.proc.poll()
        assert died is None, f"the server died (exit {died}): {served.stderr()}"
        assert failed == []
        assert (appended, dropped) == (TOTAL - BACKLOG, DROPS)
        for seqs in received:
            assert seqs == list(range(1, TOTAL + 1))
        head = httpx.get(
            f"{served.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {served.admin}"}
        )
        assert head.json()["events"] == TOTAL
        assert "Traceback" not in served.stderr()
