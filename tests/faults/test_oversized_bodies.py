"""Oversized request bodies against a real ``agenttrail serve`` process on loopback: several
200 MB bodies at once, without a token or above the cap, each refused quickly, and the
server's memory stays bounded (docs/server.md, Limits; ``agenttrail.server.guard``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from agenttrail.server import mint_token
from tests._wire import Reply, stream_request
from tests.conftest import agenttrail_serve

SECRET = "fault-test-secret-0123456789abcdef0123456789abcdef"
BODY = 200 * 1024 * 1024
"""Each body as sent: what the server would hold if it read the body before refusing it."""
CAP = 8 * 1024 * 1024
"""The server's body cap (``AGENTTRAIL_MAX_BODY_BYTES``)."""
MIB = 1024 * 1024


def _body() -> Iterator[bytes]:
    """:data:`BODY` bytes, 1 MiB at a time; the test never holds more than one piece."""
    piece = b"x" * MIB
    for _ in range(BODY // MIB):
        yield piece


def _peak_kib(pid: int) -> int:
    """The process's peak resident memory so far, ``VmHWM`` in /proc/PID/status (KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/PID/status")


def test_oversized_bodies_are_refused_before_they_are_read(tmp_path: Path) -> None:
    env = {"AGENTTRAIL_SECRET": SECRET, "AGENTTRAIL_MAX_BODY_BYTES": str(CAP)}
    with agenttrail_serve(str(tmp_path / "log.db"), tmp_path, env) as served:
        append = {"Authorization": f"Bearer {mint_token(SECRET.encode(), rights=['append'])}"}
        sid = httpx.post(f"{served.url}/v1/sessions", json={}, headers=append).json()["id"]
        path = f"/v1/sessions/{sid}/events"
        before = _peak_kib(served.proc.pid)

        def send(kind: str) -> tuple[str, Reply, float]:
            started = time.monotonic()
            if kind == "no token, declared":
                reply = stream_request(served.url, path, _body(), length=BODY)
            elif kind == "no token, chunked":
                reply = stream_request(served.url, path, _body())
            elif kind == "forged token, declared":
                forged = {"Authorization": "Bearer abc.def.ghi"}
                reply = stream_request(served.url, path, _body(), headers=forged, length=BODY)
            else:  # a good token, chunked: read up to the cap, then refused
                reply = stream_request(served.url, path, _body(), headers=append)
            return kind, reply, time.monotonic() - started

        kinds = ["no token, declared", "no token, chunked", "forged token, declared"] * 2
        kinds += ["token, chunked"] * 2
        with ThreadPoolExecutor(len(kinds)) as pool:
            results = list(pool.map(send, kinds))
        peak = _peak_kib(served.proc.pid)
        print(f"server peak memory: {before / 1024:.0f} MiB before, {peak / 1024:.0f} MiB after")

        for kind, reply, took in results:
            expected = 413 if kind == "token, chunked" else 401
            assert reply.status == expected, (kind, reply)
            assert took < 10 and reply.sent < BODY, (kind, took, reply.sent)
            if expected == 413:
                assert reply.json()["limit"] == CAP
                assert "AGENTTRAIL_MAX_BODY_BYTES" in reply.json()["detail"]
        # Reading the bodies would cost 8 × 200 MB; refusing them, at most the cap for each
        # request with a good token (2 × 8 MiB) and uvicorn's buffers.
        assert peak - before < 64 * 1024, f"peak grew by {(peak - before) / 1024:.0f} MiB"
        assert served.proc.poll() is None
        assert httpx.get(f"{served.url}/v1/sessions/{sid}", headers=append).status_code == 403
        events = httpx.get(
            f"{served.url}/v1/sessions/{sid}/events",
            headers={"Authorization": f"Bearer {served.admin}"},
        )
        assert events.json()["events"] == []
