"""Stopping a real ``agenttrail serve`` with SIGTERM or SIGINT while a live subscriber is
connected and a writer appends: it exits 0 within a second, with its store closed (no SQLite
write-ahead log left beside the database) and a log that verifies (docs/server.md)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from agenttrail.log.chain import verify
from agenttrail.log.store import open_store
from agenttrail.model import NewSession
from tests.conftest import agenttrail_serve

SECRET = "fault-test-secret-0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_stops_cleanly_within_a_second(tmp_path: Path, signum: signal.Signals) -> None:
    db = tmp_path / "log.db"
    with open_store(db, create=True) as store:
        sid = store.create_session(NewSession("shutdown")).id
    with agenttrail_serve(str(db), tmp_path, {"AGENTTRAIL_SECRET": SECRET}) as served:
        admin = {"Authorization": f"Bearer {served.admin}"}
        ws_url = served.url.replace("http://", "ws://")
        stop = threading.Event()

        def write() -> None:  # appends in flight when the signal comes
            with httpx.Client(base_url=served.url, headers=admin, timeout=5) as http:
                while not stop.is_set():
                    try:
                        http.post(f"/v1/sessions/{sid}/events", json={"payload": {"type": "x"}})
                    except httpx.HTTPError:
                        return  # the server is going away

        writer = threading.Thread(target=write)
        with connect(f"{ws_url}/v1/sessions/{sid}/live?token={served.admin}") as live:
            writer.start()
            try:
                live.recv(timeout=10)  # the feed is live and the writer is appending
                assert Path(f"{db}-wal").exists()
                started = time.monotonic()
                served.proc.send_signal(signum)
                code = served.proc.wait(timeout=10)
                took = time.monotonic() - started
            finally:
                stop.set()
                writer.join(timeout=10)
        print(f"{signum.name}: exit {code} after {took:.3f} s")
        assert code == 0, served.stderr()
        assert took < 1.0
        assert "Traceback" not in served.stderr()
    assert not Path(f"{db}-wal").exists()
    with open_store(db) as store:
        (verdict,) = verify(store, [sid])
    assert verdict.ok and verdict.events > 0
