"""SIGKILL of ``agenttrail serve`` under concurrent appends, on both backends: every append
it acknowledged is in the log, at the seqs it answered, with group commit on.

Each trial starts a real server, lets eight clients append to three sessions at once (single
events and batches of three, so that the server groups them into shared commits), and kills
the server with SIGKILL after a random time: no handler runs, nothing is flushed politely.
A client counts an append as acknowledged only when it has read the whole 201 answer; an
append the server committed but whose answer was lost in the kill may be there (it was never
acknowledged), but nothing acknowledged may be missing, and no batch may be there in part.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from agenttrail.evidence.audit import audit
from agenttrail.log.store import open_store
from agenttrail.model import NewSession
from agenttrail.server import mint_token
from agenttrail.server.auth import RIGHTS
from tests.conftest import agenttrail_serve

TRIALS = 3
"""Kills per backend: bounded, each a few seconds (the server's start-up)."""

CLIENTS = 8

SESSIONS = ("k0", "k1", "k2")

KILL_AFTER_S = (0.5, 1.5)
"""Range of the random time the clients append before the server is killed (seconds)."""

SECRET = "kill-server-test-secret-0123456789abcdef"


def _append_until_refused(
    url: str, token: str, client: str, acked: dict[str, list[int]], lock: threading.Lock
) -> None:
    """Append until the server is gone; record each acknowledged tag with its seqs."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=10) as http:
        for i in range(10_000):
            sid = SESSIONS[(hash(client) + i) % len(SESSIONS)]
            tag = f"{client}.{i}"
            size = 3 if i % 2 else 1
            body = {"events": [{"payload": {"type": "x", "tag": tag}}] * size}
            try:
                answer = http.post(f"/v1/sessions/{sid}/events", json=body)
            except httpx.HTTPError:
                return  # killed: this append was never acknowledged
            if answer.status_code != 201:
                return
            with lock:
                acked[tag] = answer.json()["seqs"]


def test_a_killed_server_loses_no_acknowledged_append(db_url: str, tmp_path: Path) -> None:
    rng = random.Random("kill-server")
    with open_store(db_url) as store:
        for sid in SESSIONS:
            store.create_session(NewSession(sid))
    token = mint_token(SECRET.encode(), rights=RIGHTS)
    acked: dict[str, list[int]] = {}
    for trial in range(TRIALS):
        lock = threading.Lock()
        with agenttrail_serve(db_url, tmp_path, {"AGENTTRAIL_SECRET": SECRET}) as served:
            clients = [
                threading.Thread(
                    target=_append_until_refused,
                    args=(served.url, token, f"{trial}/{n}", acked, lock),
                )
                for n in range(CLIENTS)
            ]
            for c in clients:
                c.start()
            time.sleep(rng.uniform(*KILL_AFTER_S))
            served.proc.send_signal(signal.SIGKILL)
            served.proc.wait(timeout=30)
            for c in clients:
                c.join(timeout=30)
        with open_store(db_url) as store:
            for sid in SESSIONS:
                stored = list(store.read(sid))
                assert [e.seq for e in stored] == list(range(1, len(stored) + 1))  # no gap
            where: dict[str, list[int]] = defaultdict(list)
            for sid in SESSIONS:
                for event in store.read(sid):
                    where[event.payload["tag"]].append(event.seq)
            lost = {tag: seqs for tag, seqs in acked.items() if where.get(tag) != seqs}
            assert lost == {}, f"acknowledged but not stored as answered: {lost}"
            sizes: Any = {len(seqs) for seqs in where.values()}
            assert sizes <= {1, 3}  # a batch is there whole or not at all
            assert all(a.ok for a in audit(store, list(SESSIONS)))
    assert len(acked) > CLIENTS, "the clients got too few answers: the trials tested little"
    print(f"kill serve: {TRIALS} kills, {len(acked)} acknowledged appends checked, 0 lost")
