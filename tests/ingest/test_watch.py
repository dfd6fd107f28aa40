"""``agenttrail watch``: a real watch process follows a transcript the test writes line by line.

The transcripts are real Claude Code files read in place from ``../shared/realdata``
(``SOURCES.md`` rows "claude-code-spotter/<file> | marot/spotter |
test/fixtures/transcripts/<file>" and "claude-code-simonw/sample_session.jsonl |
simonw/claude-code-transcripts | tests/sample_session.jsonl"; see tests/formats/_recordings.py).
After each line the session in the watched log reads (through the growth tests' view,
:func:`tests.formats.test_claude_code_growth.logical`) as a fresh import of the file so far
into another log; a restart writes nothing twice; a half-written line waits for its newline;
SIGTERM ends the process at once with exit 0; a failing log (real PostgreSQL, a revoked grant)
is one error and the file is written once the log is back.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import FormatError
from agenttrail.ingest.importer import import_paths
from agenttrail.ingest.watch import Follower
from agenttrail.log.store import open_store
from tests.conftest import REALDATA, owner_connection, postgres_schema
from tests.formats._recordings import CLAUDE_CODE_SPOTTER
from tests.formats.test_claude_code_growth import logical

SIMONW = REALDATA / "claude-code-simonw" / "sample_session.jsonl"
REAL_FILES = [
    CLAUDE_CODE_SPOTTER / "short.jsonl",
    CLAUDE_CODE_SPOTTER / "tool_heavy.jsonl",
    CLAUDE_CODE_SPOTTER / "agent-aac57f5.jsonl",
    SIMONW,
]

_CHECKS_PER_FILE = 14
"""Line counts compared per file: every line of a short file, an even sample of a long one,
so that a file takes a few seconds."""

_WAIT_S = 10.0
"""Longest a test waits for watch to catch up (it reads within about half a second)."""


class Watch:
    """A real ``agenttrail watch DIR --db DB`` process; its stdout and stderr lines are
    collected as they come."""

    def __init__(self, root: Path, db: Path, *options: str) -> None:
        argv = [sys.executable, "-m", "agenttrail.cli", "watch", str(root), "--db", str(db)]
        self.proc = subprocess.Popen(
            [*argv, *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "400"},
        )
        self.out: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.readers = [
            threading.Thread(target=self._collect, args=(stream, into), daemon=True)
            for stream, into in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr))
        ]
        for reader in self.readers:
            reader.start()

    def _collect(self, stream: Any, into: list[str]) -> None:
        with stream:
            for line in stream:
                into.append(line.rstrip("\n"))

    def wait_for_line(self, test: Callable[[str], bool]) -> str:
        deadline = time.monotonic() + _WAIT_S
        while time.monotonic() < deadline:
            found = [line for line in self.stdout if test(line)]
            if found:
                return found[0]
            assert self.proc.poll() is None, self.stderr
            time.sleep(0.02)
        raise AssertionError(f"no such line; stdout {self.stdout}, stderr {self.stderr}")

    def terminate(self) -> int:
        """SIGTERM; the exit code (a watch that does not exit in time fails the test)."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=_WAIT_S)
        for reader in self.readers:  # all it wrote is collected, and its pipes are closed
            reader.join(timeout=_WAIT_S)
        return code


@contextmanager
def watching(root: Path, db: Path, *options: str) -> Iterator[Watch]:
    watch = Watch(root, db, *options)
    try:
        yield watch
    finally:
        if watch.proc.poll() is None:
            watch.proc.kill()
        watch.proc.wait()
        for reader in watch.readers:
            reader.join(timeout=_WAIT_S)


def _once(source: Path, lines: list[bytes], count: int, tmp_path: Path) -> list[Any]:
    """The logical session of a fresh import of the first ``count`` lines (file named as the
    source: the session id may come from it) into a log of its own; [] when they name no
    session yet."""
    folder = Path(tempfile.mkdtemp(prefix=f"once-{count}-", dir=tmp_path))
    prefix = folder / source.name
    prefix.write_bytes(b"".join(lines[:count]))
    with open_store(str(folder / "log.db")) as store:
        [report] = import_paths(store, [prefix])
        return _view(store, _session_id(source, tmp_path), report.session_id)


def _session_id(source: Path, tmp_path: Path) -> str:
    """The session id of the whole file, as an import gives it."""
    with open_store(str(tmp_path / "whole.db")) as store:
        [report] = import_paths(store, [source])
    return report.session_id


def _view(store: Any, sid: str, present: str | None = None) -> list[Any]:
    if present is not None and present != sid:
        return []
    if sid not in {s.id for s in store.sessions()}:
        return []
    shown, totals = logical(list(store.read(sid)))
    return [shown, totals]


def _until(db: Path, sid: str, expected: list[Any]) -> None:
    """Wait until the watched log's session reads as ``expected``."""
    deadline = time.monotonic() + _WAIT_S
    seen: list[Any] = []
    while time.monotonic() < deadline:
        with open_store(str(db)) as store:
            seen = _view(store, sid)
        if seen == expected:
            return
        time.sleep(0.05)
    assert seen == expected


def _cuts(total: int) -> list[int]:
    step = max(1, -(-total // _CHECKS_PER_FILE))
    return sorted({*range(step, total, step), total})


@pytest.mark.parametrize("source", REAL_FILES, ids=lambda p: p.name)
def test_a_growing_transcript_reads_as_its_import_after_every_line_and_a_restart(
    source: Path, tmp_path: Path
) -> None:
    lines = source.read_bytes().splitlines(keepends=True)
    sid = _session_id(source, tmp_path)
    root, db = tmp_path / "projects" / "p", tmp_path / "watched.db"
    root.mkdir(parents=True)
    live = root / source.name
    live.touch()
    cuts = _cuts(len(lines))
    half = cuts[len(cuts) // 2]
    written = 0
    with watching(root.parent, db) as watch, live.open("ab") as out:
        for cut in [c for c in cuts if c <= half]:
            for line in lines[written:cut]:
                out.write(line)
                out.flush()
            written = cut
            _until(db, sid, _once(source, lines, cut, tmp_path))
        code = watch.terminate()
    assert code == 0, watch.stderr
    assert watch.stderr == []
    assert watch.stdout[0] == f"watching {root.parent} for transcripts (Ctrl-C stops)"
    # lines written while nobody watches are taken up on restart, and nothing twice
    with live.open("ab") as out:
        out.write(b"".join(lines[written:]))
    with open_store(str(tmp_path / "whole.db")) as whole:
        expected = _view(whole, sid)
    with watching(root.parent, db) as watch:
        _until(db, sid, expected)
        assert watch.terminate() == 0
    with open_store(str(db)) as store:
        head = store.get_session(sid).head_seq
    with watching(root.parent, db) as watch:  # nothing new: the file is read, nothing written
        watch.wait_for_line(lambda line: line.startswith(f"session  {sid}  "))
        assert watch.terminate() == 0
    with open_store(str(db)) as store:
        assert store.get_session(sid).head_seq == head
        assert _view(store, sid) == expected
    assert not [line for line in watch.stdout if line.startswith("+")], watch.stdout


def test_a_half_written_line_waits_for_its_newline(tmp_path: Path) -> None:
    source = CLAUDE_CODE_SPOTTER / "short.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    sid = _session_id(source, tmp_path)
    root, db = tmp_path / "projects", tmp_path / "watched.db"
    root.mkdir()
    live, other = root / source.name, root / "z-other.jsonl"
    live.write_bytes(b"".join(lines[:4]))
    with watching(root, db) as watch:
        _until(db, sid, _once(source, lines, 4, tmp_path))
        half = len(lines[4]) // 2
        with live.open("ab") as out:
            out.write(lines[4][:half])
        with pytest.raises(FormatError, match="invalid JSON"):  # what a plain import says
            _once(source, [b"".join(lines[:4]) + lines[4][:half]], 1, tmp_path)
        # A file written after the half line: once its warning is out, watch has read the
        # half line too (inotify reports changes in order, and watch reads each batch whole).
        other.write_text('{"not": "a transcript"}\n', encoding="utf-8")
        deadline = time.monotonic() + _WAIT_S
        while not watch.stderr and time.monotonic() < deadline:
            time.sleep(0.02)
        assert watch.stderr == [f"warning: {other}: not a Claude Code transcript; skipped"]
        with open_store(str(db)) as store:
            assert _view(store, sid) == _once(source, lines, 4, tmp_path)
        with live.open("ab") as out:
            out.write(lines[4][half:])
        _until(db, sid, _once(source, lines, 5, tmp_path))
        with other.open("a", encoding="utf-8") as out:  # still no transcript: no new warning
            out.write('{"still": "not"}\n')
        live.write_bytes(b"".join(lines))  # replaced whole (a rotate): read again by keys
        with open_store(str(tmp_path / "whole.db")) as whole:
            _until(db, sid, _view(whole, sid))
        code = watch.terminate()
    assert code == 0
    assert len(watch.stderr) == 1, watch.stderr


def test_a_failing_log_is_one_error_and_the_file_is_written_once_it_is_back(
    postgres_url: str, tmp_path: Path
) -> None:
    # The log fails for real: the writer role loses INSERT on the events table of this
    # test's schema (what a revoked grant or a read-only replica does), then gets it back.
    source = CLAUDE_CODE_SPOTTER / "short.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    sid = _session_id(source, tmp_path)
    live = tmp_path / source.name
    live.write_bytes(b"".join(lines[:4]))
    with postgres_schema(postgres_url) as url, open_store(url, create=True) as store:
        follower = Follower(store)
        assert [n.kind for n in follower.follow(live)] == ["session", "appended"]
        head = store.get_session(sid).head_seq
        live.write_bytes(b"".join(lines))
        with owner_connection(url) as owner:
            owner.execute("REVOKE INSERT ON session_events FROM agenttrail_writer")
            try:
                [error] = follower.follow(live)
                assert (error.kind, error.path) == ("error", live)
                assert error.text.startswith(f"{live}: ") and "session_events" in error.text
                assert follower.follow(live) == []  # said once, tried again
                assert follower.pending == {live}
            finally:
                owner.execute("GRANT INSERT ON session_events TO agenttrail_writer")
        assert store.get_session(sid).head_seq == head  # nothing half-written
        [appended] = follower.follow(live)
        assert (appended.kind, appended.session_id) == ("appended", sid)
        assert follower.pending == set()
        with open_store(str(tmp_path / "whole.db")) as whole:
            assert _view(store, sid) == _view(whole, sid)


def test_json_prints_each_session_and_batch_as_a_line(tmp_path: Path) -> None:
    source = CLAUDE_CODE_SPOTTER / "short.jsonl"
    root, db = tmp_path / "projects", tmp_path / "watched.db"
    root.mkdir()
    (root / source.name).write_bytes(source.read_bytes())
    with watching(root, db, "--json") as watch:
        line = watch.wait_for_line(lambda line: '"kind":"appended"' in line)
        assert watch.terminate() == 0
    sid = _session_id(source, tmp_path)
    [seen] = [json.loads(line) for line in watch.stdout if '"kind":"session"' in line]
    assert (seen["session_id"], seen["path"]) == (sid, str(root / source.name))
    appended = json.loads(line)
    assert (appended["session_id"], appended["written"]) == (sid, 13)
    assert appended["text"].startswith(f"+13 events  {sid}")
    assert all(line.startswith("{") for line in watch.stdout)
