"""SIGKILL of a writer mid-append, on both backends: every acknowledged event is in the log,
nothing is half-written, and the chain verifies.

Each trial starts a real writer process, lets it append for a random time and kills it with
SIGKILL — no handler runs, no connection is closed politely. SQLite rolls an unfinished
transaction back when the file is next opened (its WAL); PostgreSQL when the connection drops.
The writer reports each append it got an answer for on a pipe before it starts the next one,
so an acknowledged event that is missing would be a lost event. An append that committed but
was not yet reported is allowed to be there: it was never acknowledged.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agenttrail.errors import AgentTrailError
from agenttrail.evidence.audit import audit
from agenttrail.formats import read_file
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewSession
from tests.conftest import REALDATA, ROOT, is_postgres, postgres_schema
from tests.faults._writer import BATCH

TRIALS = 5
"""Kills per kind of writer and backend: bounded, each about a second."""

IMPORT_TRIALS = 3
"""Kills of ``agenttrail import`` per backend (each a few seconds: the whole corpus)."""

KILL_AFTER_S = (0.0, 0.4)
"""Range of the random time a writer appends before it is killed (seconds after ``ready``)."""

WAIT_S = 30.0
"""Bound on any one wait (seconds)."""

# The importable files of the corpus (the real data's SOURCES.md): every session each holds.
# glob, not iterdir: without the corpus this is empty and the tests that use it are skipped
# (tests/_environment.py), where iterdir would stop the whole run at collection.
IMPORTED = sorted(
    p
    for folder in ("claude-code-spotter", "claude-code-simonw", "anthropic-sdk-python", "harvey")
    for p in (REALDATA / folder).glob("*")
)


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # The repository for tests/, then the caller's path: a checkout run with its src on
        # PYTHONPATH must give the child that agenttrail, not the one installed.
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        },
    )


def _kill_while_appending(mode: str, db_url: str, session_id: str, rng: random.Random) -> list[str]:
    """One trial: start a writer, kill it after a random time; its acknowledgement lines."""
    child = _spawn("-m", "tests.faults._writer", mode, db_url, session_id)
    assert child.stdout is not None
    ready = child.stdout.readline()
    assert ready == "ready\n", child.stderr.read() if child.stderr else ready
    time.sleep(rng.uniform(*KILL_AFTER_S))
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate(timeout=WAIT_S)
    assert child.returncode == -signal.SIGKILL
    lines = out.splitlines()
    complete = lines if out.endswith("\n") else lines[:-1]  # a line cut by the kill: not acked
    return [line for line in complete if line.startswith("ack ")]


def _verified(store: LogStore, session_ids: list[str]) -> None:
    verdicts = audit(store, session_ids)
    assert [a.ok for a in verdicts] == [True] * len(session_ids), verdicts


@pytest.mark.parametrize("mode", ["single", "batch"])
def test_a_killed_writer_loses_no_acknowledged_event_and_leaves_no_half_batch(
    db_url: str, mode: str
) -> None:
    rng = random.Random(f"kill-{mode}")
    with open_store(db_url) as store:
        session_id = store.create_session(NewSession("killed-writer")).id
    acked: dict[str, list[int]] = {}
    for _ in range(TRIALS):
        for line in _kill_while_appending(mode, db_url, session_id, rng):
            _, tag, *seqs = line.split()
            acked[tag] = [int(s) for s in seqs]
        with open_store(db_url) as store:
            stored = list(store.read(session_id))
            assert [e.seq for e in stored] == list(range(1, len(stored) + 1))  # no gap
            by_tag: dict[str, list[int]] = defaultdict(list)
            for event in stored:
                by_tag[event.payload["tag"]].append(event.seq)
            for tag, seqs in acked.items():  # every acknowledged event, at its seq
                assert by_tag[tag] == seqs
            size = 1 if mode == "single" else BATCH
            assert set(Counter({t: len(s) for t, s in by_tag.items()}).values()) <= {size}
            if mode == "single":
                keys = dict(store.event_keys(session_id))
                assert all(keys[tag] == seqs[0] for tag, seqs in acked.items())
            _verified(store, [session_id])
    assert acked, "no writer got as far as one append: the trials tested nothing"
    events = sum(len(seqs) for seqs in acked.values())
    print(f"kill {mode}: {TRIALS} kills, {events} acknowledged events checked, 0 lost")


@contextmanager
def _fresh_log(db_url: str, tmp_path: Path, name: str) -> Iterator[str]:
    """A log nobody has written yet, on the backend of ``db_url``."""
    if not is_postgres(db_url):
        yield str(tmp_path / f"{name}.db")
        return
    with postgres_schema(db_url.rsplit("schema=", 1)[0].rstrip("?&")) as url:
        yield url


def _import(db: str) -> subprocess.Popen[str]:
    return _spawn("-m", "agenttrail.cli", "import", *map(str, IMPORTED), "--db", db)


def _kill_once_sessions_are_in(child: subprocess.Popen[str], db: str, count: int) -> None:
    """SIGKILL ``child`` as soon as the log holds ``count`` sessions: mid-import, at a point
    the trial drew, whatever the machine's speed."""
    deadline = time.monotonic() + WAIT_S
    while child.poll() is None and time.monotonic() < deadline:
        try:
            with open_store(db, create=False) as store:
                if len(store.sessions()) >= count:
                    break
        except AgentTrailError:
            pass  # not a log yet: the import has not begun writing
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=WAIT_S)


def test_a_killed_import_writes_each_session_whole_or_not_at_all(
    db_url: str, tmp_path: Path
) -> None:
    rng = random.Random("kill-import")
    expected = {s.session.id: len(s.events) for path in IMPORTED for s in read_file(path, None)}
    landed = []
    for n in range(IMPORT_TRIALS):
        with _fresh_log(db_url, tmp_path, f"trial-{n}") as db:
            _kill_once_sessions_are_in(_import(db), db, rng.randrange(1, len(expected)))
            with open_store(db) as store:
                for session in store.sessions():
                    assert session.head_seq == expected[session.id]  # whole, never part
                _verified(store, [s.id for s in store.sessions()])
                landed.append(len(store.sessions()))
            if n == IMPORT_TRIALS - 1:  # after a kill, the import completes: nothing in the way
                again = _import(db)
                again.communicate(timeout=WAIT_S)
                assert again.returncode == 0
                with open_store(db) as store:
                    assert {s.id: s.head_seq for s in store.sessions()} == expected
                    _verified(store, list(expected))
    print(f"kill import: {IMPORT_TRIALS} kills; sessions whole: {landed} of {len(expected)}")
