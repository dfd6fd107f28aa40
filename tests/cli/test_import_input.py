"""``agenttrail import`` as people use it: a folder walked (Claude Code's project folders), ``-``
for standard input, gzip input, and a progress bar on a terminal only.

The transcripts are the real Claude Code files of ``../shared/realdata`` (``tests/formats/
_recordings.py`` cites them), laid out in a temporary folder the way Claude Code keeps them:
``projects/<project>/<session>.jsonl`` and ``<session>/subagents/agent-<id>.jsonl``.
"""

from __future__ import annotations

import gzip
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REALDATA, read_terminal, run_cli
from tests.formats._recordings import CLAUDE_CODE_SPOTTER, INSPECT_DEDUPLICATION

SHORT = CLAUDE_CODE_SPOTTER / "short.jsonl"
HEAVY = CLAUDE_CODE_SPOTTER / "tool_heavy.jsonl"
SUBAGENT = CLAUDE_CODE_SPOTTER / "agent-aac57f5.jsonl"


def _session_ids(*paths: Path, db: Path) -> list[str]:
    done = run_cli("import", *map(str, paths), "--db", str(db))
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_projects_folder_is_walked_for_its_transcripts(tmp_path: Path) -> None:
    project = tmp_path / "projects" / "-home-me-code"
    (project / "ae4a77f8" / "subagents").mkdir(parents=True)
    (project / ".cache").mkdir()
    shutil.copy(SHORT, project / "55604662.jsonl")
    shutil.copy(SUBAGENT, project / "ae4a77f8" / "subagents" / SUBAGENT.name)
    (project / "d6e0bada.jsonl.gz").write_bytes(gzip.compress(HEAVY.read_bytes()))
    (project / "notes.md").write_text("not a transcript")
    (project / ".cache" / "x.jsonl").write_text("not JSON")  # hidden: never read
    walked = _session_ids(tmp_path / "projects", db=tmp_path / "walked.db")
    one_by_one = _session_ids(SHORT, HEAVY, SUBAGENT, db=tmp_path / "files.db")
    assert sorted(walked) == sorted(one_by_one) and len(walked) == 3


def test_a_folders_file_that_is_no_transcript_is_skipped_and_named(tmp_path: Path) -> None:
    # Claude Code (2.1 and later) keeps a sessions-index.json beside a project's transcripts:
    # `import ~/.claude/projects` was refused whole for it ("unknown format"). Found in a
    # folder, such a file, or an empty one, is skipped and named; named by the user, refused;
    # a malformed transcript is refused either way. (The index below is written for this
    # test, in the shape Claude Code's issues show: version, entries, originalPath.)
    project = tmp_path / "projects" / "-home-me-code"
    project.mkdir(parents=True)
    shutil.copy(SHORT, project / "55604662.jsonl")
    index = project / "sessions-index.json"
    index.write_text('{"version": 1, "entries": [], "originalPath": "/home/me/code"}\n')
    empty = project / "started.jsonl"
    empty.write_text("")
    fifo = project / "live.jsonl"  # not a regular file: never opened for reading
    os.mkfifo(fifo)
    db = tmp_path / "log.db"
    done = run_cli("import", str(tmp_path / "projects"), "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == _session_ids(SHORT, db=tmp_path / "alone.db")
    skipped = [line for line in done.stderr.splitlines() if line.startswith("skipped: ")]
    assert skipped == [
        f"skipped: {fifo}: not a regular file (a FIFO); import reads regular files only",
        f"skipped: {index}: unknown format (not one of: jsonl, otlp, fountain, inspect, "
        "claude_code, anthropic, langfuse, toolbench, openai); name it with agenttrail "
        "import --format",
        f"skipped: {empty}: empty file",
    ]
    named = run_cli("import", str(index), "--db", str(tmp_path / "named.db"))
    assert named.returncode == 2 and named.stderr.startswith(f"error: {index}: unknown format")
    assert not (tmp_path / "named.db").exists()
    (project / "55604662.jsonl").unlink()
    nothing = run_cli("import", str(tmp_path / "projects"), "--db", str(tmp_path / "none.db"))
    assert nothing.returncode == 2
    assert nothing.stderr.endswith("error: nothing to import: 3 files skipped\n")
    assert not (tmp_path / "none.db").exists()
    (project / "cut.jsonl").write_text('{"type": "user", "message": {"role": "us')
    cut = run_cli("import", str(tmp_path / "projects"), "--db", str(tmp_path / "cut.db"))
    assert cut.returncode == 2 and f"error: {project / 'cut.jsonl'}:1: invalid JSON" in cut.stderr


def _agenttrail(*args: str, input: bytes) -> subprocess.CompletedProcess[bytes]:
    """The real command in a subprocess, fed ``input`` as bytes on a pipe."""
    return subprocess.run(
        [sys.executable, "-m", "agenttrail.cli", *args],
        input=input,
        capture_output=True,
        check=False,
    )


def test_stdin_is_read_plain_or_gzipped(tmp_path: Path) -> None:
    expected = _session_ids(SHORT, INSPECT_DEDUPLICATION, db=tmp_path / "files.db")
    db = str(tmp_path / "stdin.db")
    plain = _agenttrail("import", "-", "--db", db, input=SHORT.read_bytes())
    assert plain.returncode == 0, plain.stderr
    zipped = _agenttrail(
        "import", "-", "--db", db, input=gzip.compress(INSPECT_DEDUPLICATION.read_bytes())
    )
    assert zipped.returncode == 0, zipped.stderr
    assert [plain.stdout.decode().strip(), zipped.stdout.decode().strip()] == expected
    assert zipped.stderr.decode() == "<stdin>: 55 events written\n"


def test_stdin_named_twice_is_refused_as_such(tmp_path: Path) -> None:
    # `import - -` read the transcript, then said "<stdin>: empty file" of the second `-`.
    db = tmp_path / "log.db"
    done = _agenttrail("import", "-", "-", "--db", str(db), input=SHORT.read_bytes())
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr == b"error: - is named 2 times: standard input is read once\n"
    assert not db.exists()


def test_a_truncated_gzip_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    cut = tmp_path / "short.jsonl.gz"
    cut.write_bytes(gzip.compress(SHORT.read_bytes())[:-40])
    db = tmp_path / "log.db"
    done = run_cli("import", str(SHORT), str(cut), "--db", str(db))
    assert done.returncode == 2
    assert done.stderr == f"error: {cut}: gzip stream is cut short (truncated file?)\n"
    assert not db.exists()


def test_a_log_given_to_import_is_named_as_a_database(tmp_path: Path) -> None:
    # A new user imported a log file: "not UTF-8 text (byte 106: b'\\xcd')" told them nothing.
    log = tmp_path / "agenttrail.db"
    assert run_cli("import", str(SHORT), "--db", str(log)).returncode == 0
    db = tmp_path / "other.db"
    done = run_cli("import", str(log), "--db", str(db))
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {log}: a SQLite database, not a file to import (a log is copied into "
        "another with agenttrail migrate --from FILE --to URL)\n"
    )
    assert not db.exists()


def test_a_file_read_as_another_format_says_what_it_looks_like(tmp_path: Path) -> None:
    # A new user forced --format openai on an export: "line 2: invalid JSON: Extra data".
    log = tmp_path / "agenttrail.db"
    (sid,) = _session_ids(SHORT, db=log)
    export = tmp_path / "s.jsonl"
    assert run_cli("export", sid, "--db", str(log), "-o", str(export)).returncode == 0
    db = tmp_path / "other.db"
    done = run_cli("import", str(export), "--format", "openai", "--db", str(db))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {export}:2: invalid JSON: Extra data")
    assert done.stderr.endswith(" (read as --format openai; it looks like jsonl)\n")
    assert not db.exists()


def test_the_progress_bar_shows_on_a_terminal_and_never_on_a_pipe(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "agenttrail.cli", "import", str(REALDATA)]
    piped = subprocess.run(
        [*args, "--db", str(tmp_path / "a.db")], capture_output=True, check=False
    )
    assert piped.returncode == 0
    assert "reading" not in piped.stderr.decode() and b"\x1b[" not in piped.stderr
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [*args, "--db", str(tmp_path / "b.db")], stdout=subprocess.PIPE, stderr=follower
    ) as shown:
        os.close(follower)
        terminal = read_terminal(leader)
        ids = shown.communicate()[0].split()
    os.close(leader)
    assert shown.returncode == 0 and len(ids) == 37  # the ids still go to stdout, alone
    assert b"reading" in terminal and b"writing" in terminal and b"37/37" in terminal
