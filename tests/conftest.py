"""Shared fixtures: real SQLite files in tmp dirs, a real PostgreSQL schema per test, the
third-party data folder, the CLI.

One contract, two backends (Phoenix's ``dialect`` fixture): the ``store`` and
``db_url`` fixtures are parametrised over ``sqlite`` and ``postgresql``, so every test that
takes them runs against both. A PostgreSQL test gets a schema of its own in the server named
by ``--postgres-url`` (default ``$AGENTTRAIL_TEST_POSTGRES_URL``), dropped afterwards; with no
server named, the suite starts one of its own (tests/_environment.py says how, and what the
suite does without the third-party corpus or a browser). ``--backend sqlite`` runs the SQLite
half only.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import uvicorn
from psycopg import sql

from agenttrail.codec import now_timestamp
from agenttrail.log.store import LogStore, open_store
from agenttrail.log.store.postgres import parse_url
from tests._environment import (
    CHROMIUM,
    CHROMIUM_HOW,
    HAS_SHARED,
    ROOT,
    SHARED,
    SHARED_HOW,
    embedded_postgres,
    reads_shared,
    require,
)

__all__ = [
    "CHROMIUM",
    "HARVEY",
    "HAS_SHARED",
    "REALDATA",
    "ROOT",
    "SHARED",
    "V1_LOG",
    "VECTORS",
    "Served",
]

REALDATA = SHARED / "realdata"
VECTORS = SHARED / "vectors"
HARVEY = SHARED / "harvey"
"""Harvey's own Fountain reader and writer as static binaries (``bin/harveyread``,
``bin/harveywrite``), the test oracles of docs/fountain-format.md."""
V1_LOG = ROOT / "tests" / "data" / "v1-log.db"
"""A log written by the code before chain v2 (``tests/data/make_v1_log.py``); copy it before
opening it (opening migrates its schema)."""

BACKENDS = ("sqlite", "postgresql")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agenttrail")
    group.addoption(
        "--backend",
        action="append",
        choices=BACKENDS,
        help="run the store tests against this backend only (repeatable; default: both)",
    )
    group.addoption(
        "--postgres-url",
        default=os.environ.get("AGENTTRAIL_TEST_POSTGRES_URL"),
        help="PostgreSQL server for the postgresql half: each test gets a schema of its own "
        "(default: a throw-away server the suite starts itself)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = config.getoption("--backend") or BACKENDS
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec is not None else None
        if backend is None and "postgres_url" in getattr(item, "fixturenames", ()):
            backend = "postgresql"  # a PostgreSQL-only test (triggers, privileges, replicas)
        (drop if backend is not None and backend not in chosen else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    _skip_what_this_machine_lacks(config, items)


def _skip_what_this_machine_lacks(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests that need the corpus or a browser this machine has not got, and say so
    once, at the top of the run (tests/_environment.py)."""
    lacking: list[tuple[str, list[pytest.Item]]] = []
    if not HAS_SHARED:
        lacking.append((SHARED_HOW, [i for i in items if _reads_shared(i)]))
    if CHROMIUM is None:
        lacking.append((CHROMIUM_HOW, [i for i in items if "browser" in _fixtures(i)]))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for why, skipped in lacking:
        for item in skipped:
            item.add_marker(pytest.mark.skip(reason=why))
        if skipped and reporter is not None:
            reporter.write_line(f"agenttrail: {len(skipped)} tests skipped: {why}", yellow=True)


def _fixtures(item: pytest.Item) -> list[str]:
    names: list[str] = getattr(item, "fixturenames", [])
    return names


def _reads_shared(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    params = dict(callspec.params) if callspec is not None else {}
    if reads_shared(getattr(item, "function", None), params):
        return True
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(reads_shared(d.func, {}) for fixture in defs for d in fixture)


def pytest_configure(config: pytest.Config) -> None:
    if not HAS_SHARED and require("SHARED"):
        raise pytest.UsageError(SHARED_HOW)
    if CHROMIUM is None and require("BROWSER"):
        raise pytest.UsageError(CHROMIUM_HOW)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A path for a fresh SQLite log file."""
    return tmp_path / "agenttrail.db"


@pytest.fixture(scope="session")
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The PostgreSQL server under test: the one ``--postgres-url`` names (a test fails, with
    what to do, when it cannot be reached), else a throw-away server the suite starts on a
    Unix socket of its own and removes at the end."""
    configured = request.config.getoption("--postgres-url")
    if not configured:
        # A folder of its own, not under pytest's base temp: every pytest run on the machine
        # resets /tmp/pytest-of-USER to mode 0700, which would lock the server's own
        # unprivileged user out of its data folder halfway through this run.
        with embedded_postgres(Path(tempfile.mkdtemp(prefix="agenttrail-postgres-"))) as url:
            yield url
        return
    url = str(configured)
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.OperationalError as e:
        reason = str(e).strip().splitlines()[0]
        pytest.fail(
            f"PostgreSQL is not reachable at {parse_url(url).redacted}: {reason}. Start it "
            "(.ci/run does) or run the SQLite half only: pytest --backend sqlite",
            pytrace=False,
        )
    yield url


@contextmanager
def postgres_schema(server_url: str) -> Iterator[str]:
    """An agenttrail URL naming a fresh schema on ``server_url``; the schema is dropped on
    exit, whatever the test did to it."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    separator = "&" if "?" in server_url else "?"
    try:
        yield f"{server_url}{separator}schema={name}"
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgresql``: the backend this run of the test is for."""
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh log's database: a SQLite file path, or a PostgreSQL URL with its own schema."""
    if backend == "sqlite":
        yield str(tmp_path / "agenttrail.db")
        return
    with postgres_schema(request.getfixturevalue("postgres_url")) as url:
        yield url


@pytest.fixture
def store(db_url: str) -> Iterator[LogStore]:
    """A real log on each backend, closed after the test."""
    opened = open_store(db_url)
    try:
        yield opened
    finally:
        opened.close()


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(app: Any, **options: Any) -> Iterator[int]:
    """``app`` on a real uvicorn on loopback, in a thread (``options``: more of
    ``uvicorn.Config``'s, TLS's files say); yields its port once it serves, and stops it on
    exit."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", ws="websockets-sansio", **options
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@dataclass
class Served:
    """A real ``agenttrail serve`` process: the process, its base URL, the admin token it
    printed, and its stderr so far."""

    proc: subprocess.Popen[str]
    url: str
    admin: str
    _stderr: Any

    def stderr(self) -> str:
        """What the server wrote to stderr so far."""
        self._stderr.seek(0)
        return str(self._stderr.read())


@contextmanager
def agenttrail_serve(db: str, workspace: Path, env: dict[str, str], *args: str) -> Iterator[Served]:
    """A real ``agenttrail serve`` process on ``db`` (its own interpreter, as in use) with
    extra ``args``; yields it once it answers, and stops it (SIGTERM) on exit. Its stderr goes
    to a file, so a chatty server never blocks on a full pipe."""
    port = free_port()
    argv = ["serve", "--port", str(port), "--db", db, "--workspace", str(workspace), *args]
    with tempfile.TemporaryFile("w+", encoding="utf-8") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agenttrail.cli", *argv],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        )
        served = Served(proc, f"http://127.0.0.1:{port}", "", stderr)
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            assert first.startswith("admin token (24 h): "), served.stderr()
            served.admin = first.split(": ", 1)[1].strip()
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(f"{served.url}/openapi.json")
                    break
                except httpx.ConnectError:
                    assert proc.poll() is None and time.monotonic() < deadline, served.stderr()
                    time.sleep(0.1)
            yield served
        finally:
            if proc.poll() is None:
                proc.terminate()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()


def is_postgres(url: str) -> bool:
    """True for a PostgreSQL URL (the ``db_url`` of the postgresql half)."""
    return url.startswith(("postgresql://", "postgres://"))


@contextmanager
def owner_connection(url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A connection as the role that owns the log's tables, in the log's schema (autocommit):
    what someone who owns the database uses to go around agenttrail."""
    parsed = parse_url(url)
    with psycopg.connect(parsed.conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(parsed.schema)))
        yield conn


def session_made_before_the_id_rule(url: str, session_id: str, **fields: str) -> None:
    """Write a session row as agenttrail did before the id rule (docs/log-format.md, Session
    ids): an old log's session whose id no new session may have. ``fields`` are text columns
    (``title``, ``user``, ``workspace`` …); append to it through the store as usual."""
    columns = ["id", "metadata", "created_at", *fields]
    values = [session_id, "{}", now_timestamp(), *fields.values()]
    names = ", ".join(f'"{c}"' for c in columns)
    if is_postgres(url):
        with owner_connection(url) as conn:
            marks = ", ".join(["%s"] * len(values))
            conn.execute(f"INSERT INTO sessions ({names}) VALUES ({marks})", values)  # type: ignore[arg-type]
        return
    with closing(sqlite3.connect(url)) as conn:
        conn.execute(
            f"INSERT INTO sessions ({names}) VALUES ({', '.join('?' * len(values))})", values
        )
        conn.commit()


def run_cli(
    *args: str, cwd: Path | None = None, input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ``agenttrail`` command in this process (``agenttrail.cli.main``), as the console
    script would: its own working directory, environment, stdin, stdout and stderr, and the
    exit code it returns. About 17 times cheaper than a subprocess; the entry point itself is
    covered by ``tests/cli/test_entry_point.py``, which runs the real command."""
    from agenttrail.cli import main

    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_pipe = signal.getsignal(signal.SIGPIPE)
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        os.environ.update({"COLUMNS": "200", **(env or {})})
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(input or ""), stdout, stderr
        code = main(list(args))
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        signal.signal(signal.SIGPIPE, saved_pipe)
    return subprocess.CompletedProcess(
        ["agenttrail", *args], code, stdout.getvalue(), stderr.getvalue()
    )


def read_terminal(leader: int) -> bytes:
    """Everything written to the pseudo-terminal whose leader end is ``leader`` (from
    ``pty.openpty()``) until the command on it closes it."""
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the command closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def run_cli_subprocess(
    *args: str, cwd: Path | None = None, input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real ``agenttrail`` command in a subprocess; returns its exit code and output."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agenttrail.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        input=input,
        env=full_env,
        check=False,
    )
