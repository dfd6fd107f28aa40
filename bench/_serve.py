"""What the benchmarks that talk to ``agenttrail serve`` share: a real server in a process of
its own on a free loopback port, with the token it prints at start-up."""

from __future__ import annotations

import contextlib
import json
import os
import signal
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


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used, from ``/proc/PID/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_of(pid: int) -> set[int]:
    """The processes process ``pid`` started that are alive now (of any of its threads), from
    ``/proc/PID/task/*/children``."""
    return {
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    }


CORE_OF_THE_WRITER = """the writer process is bound to a CPU of its own, and every other process to
another: on a machine where the upstream is a provider's API (elsewhere) and the agent uses one
core, the writer has the second core to itself. On a loopback of two cores the upstream must
run somewhere: it shares the agent's core, where it runs while the agent waits for it. Linux
only (sched_setaffinity); needs two CPUs."""


def agent_core() -> tuple[int, int]:
    """Bind this process, and every process it starts from now, to its first allowed CPU
    (:data:`CORE_OF_THE_WRITER`); return that CPU and the one the writer gets.

    Raises:
        SystemExit: fewer than two CPUs are allowed.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--writer-core needs two CPUs")
    os.sched_setaffinity(0, {cpus[0]})
    return cpus[0], cpus[1]


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

    def cpu_s(self) -> float:
        """The server's CPU seconds (user + system) so far."""
        return cpu_s(self.proc.pid)

    def peak_mib(self) -> float:
        """The server's peak resident memory so far (``VmHWM``), in MiB."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmHWM"))
        return int(line.split()[1]) / 1024


def _answering(served: Served) -> Served:
    """``served`` once it answers (at most 10 s of tries)."""
    for _ in range(200):
        try:
            httpx.get(f"{served.base}/v1/sessions", headers=served.headers)
            break
        except httpx.ConnectError:
            time.sleep(0.05)
    return served


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
        yield _answering(served)
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def serving_app(db: Path) -> Iterator[Served]:
    """The app ``agenttrail serve`` runs (``create_app`` under uvicorn, the same settings but
    the port), in a process of its own started from this file, until the block ends;
    :func:`committer_stats` reads the group committer's counters once it has stopped.

    For the figures the CLI cannot give: how many requests each commit carried."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, str(db), str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    served = Served(proc, f"http://127.0.0.1:{port}", "")
    try:
        assert proc.stdout is not None
        served = Served(proc, served.base, proc.stdout.readline().strip())
        yield _answering(served)
    finally:
        # SIGINT: uvicorn stops gracefully, then raises it again, which Python turns into
        # KeyboardInterrupt, so the counters are still printed (SIGTERM would end it there).
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def committer_stats(served: Served) -> dict[str, int]:
    """``{"requests": …, "commits": …}`` of a stopped :func:`serving_app` server."""
    assert served.proc.stdout is not None
    return dict(json.loads(served.proc.stdout.read().strip().splitlines()[-1]))


def _run_app(db: str, port: int) -> None:
    """Serve the app on ``port`` over the log at ``db``; print an admin token first and the
    committer's counters when stopped (SIGINT)."""
    import uvicorn

    from agenttrail.log.store import open_store
    from agenttrail.server import create_app, mint_token
    from agenttrail.server.auth import RIGHTS

    secret = b"bench-secret-of-thirty-two-bytes"
    with open_store(db) as store:
        app = create_app(store, secret=secret)
        print(mint_token(secret, rights=RIGHTS), flush=True)
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, ws="websockets-sansio", log_level="warning"
        )
        with contextlib.suppress(KeyboardInterrupt):
            uvicorn.Server(config).run()
        committer = getattr(app.state, "committer", None)  # None: a build before group commit
        counts = (committer.requests, committer.commits) if committer else (0, 0)
        print(json.dumps(dict(zip(("requests", "commits"), counts, strict=True))))


if __name__ == "__main__":
    _run_app(sys.argv[1], int(sys.argv[2]))
