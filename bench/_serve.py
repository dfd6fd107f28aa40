"""What the benchmarks that talk to ``agenttrail serve`` share: a real server in a process of
its own on a free loopback port, with the token it prints at start-up."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx


def load_average() -> str:
    """The load average over 1, 5 and 15 minutes (``/proc/loadavg``), to report beside a
    figure: the machine is shared."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Served:
    """A running ``agenttrail serve``: its process, base URL and token."""

    proc: subprocess.Popen[str]
    base: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header of its token."""
        return {"Authorization": f"Bearer {self.token}"}

    def peak_mib(self) -> float:
        """The server's peak resident memory so far (``VmHWM``), in MiB."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmHWM"))
        return int(line.split()[1]) / 1024


@contextmanager
def serving(db: Path, workspace: Path) -> Iterator[Served]:
    """``agenttrail serve --db DB --workspace WORKSPACE`` until the block ends, once it
    answers; stopped with SIGTERM."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agenttrail.cli", "serve", "--port", str(port),
         "--db", str(db), "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        token = proc.stdout.readline().split(": ", 1)[1].strip()
        served = Served(proc, f"http://127.0.0.1:{port}", token)
        for _ in range(200):
            try:
                httpx.get(f"{served.base}/v1/sessions", headers=served.headers)
                break
            except httpx.ConnectError:
                time.sleep(0.05)
        yield served
    finally:
        proc.terminate()
        proc.wait(10)
