"""The importer (agenttrail.ingest.importer) on real stores: every file read before anything is
written, one transaction per session, a second import writes nothing, and agenttrail's own
export matched by its chain hashes."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from agenttrail.errors import FormatError, InputError
from agenttrail.formats._common import iter_jsonl
from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest.importer import (
    DEFAULT_MAX_IMPORT_BYTES,
    import_paths,
    read_paths,
    write_sessions,
)
from agenttrail.ingest.sample import SAMPLE_SESSION_ID, record_sample
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events
from tests.conftest import REALDATA, run_cli

# marot/spotter test/fixtures/transcripts/{tool_heavy,short}.jsonl (the real data's SOURCES.md,
# tests/conftest.py REALDATA)
TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"
SHORT = REALDATA / "claude-code-spotter" / "short.jsonl"

DAY_ONE, DAY_TWO = "2026-01-01T09:00:00.000000Z", "2026-01-02T09:00:00.000000Z"


def _rows(store: LogStore, session_id: str) -> list[tuple[int, str, bytes, bytes]]:
    return list(store.read_rows(session_id))


def _export(store: LogStore, session_id: str, path: Path, *, upto: int | None = None) -> Path:
    lines = list(jsonl_from_events(store.read(session_id)))[:upto]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def exported(store: LogStore, tmp_path: Path) -> Path:
    """The sample session, recorded into ``store`` and exported to a file."""
    record_sample(store)
    return _export(store, SAMPLE_SESSION_ID, tmp_path / "sample.jsonl")


def _holding(path: Path, batch: list[NewEvent]) -> LogStore:
    """A log at ``path`` whose sample session holds ``batch`` and nothing else."""
    log = open_store(path)
    log.create_session(NewSession(SAMPLE_SESSION_ID))
    log.append_batch(SAMPLE_SESSION_ID, batch)
    return log


def test_every_file_is_read_before_anything_is_written(store: LogStore, tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type": "user", "message": {"role": "user", "content": "hi"}}\n{oops\n')
    for bad in (broken, tmp_path / "missing.jsonl"):
        with pytest.raises(FormatError) as refused:
            import_paths(store, [TOOL_HEAVY, SHORT, bad])
        assert str(bad) in str(refused.value)
        assert store.sessions() == []  # not even the good files before it


def test_a_payload_over_the_limit_is_refused_before_anything_is_written(
    db_url: str, tmp_path: Path
) -> None:
    with open_store(db_url, max_payload_bytes=2048) as store:
        with pytest.raises(FormatError) as refused:
            import_paths(store, [SHORT, TOOL_HEAVY])
        assert str(TOOL_HEAVY) in str(refused.value) and "2,048" in str(refused.value)
        assert store.sessions() == []
    parsed = read_paths([SHORT], max_payload_bytes=2048)  # what fits is read, not written
    assert [path for path, _ in parsed] == [SHORT]


def test_each_session_is_written_in_a_transaction_of_its_own(
    exported: Path, tmp_path: Path
) -> None:
    other_first = [NewEvent(events.message("user", "a different first event"))]
    with _holding(tmp_path / "other.db", other_first) as other:
        before = _rows(other, SAMPLE_SESSION_ID)
        parsed = read_paths([SHORT, exported], max_payload_bytes=other.max_payload_bytes)
        with pytest.raises(InputError, match="already exists with different events"):
            write_sessions(other, parsed)
        # The session written before the refused one is in, whole; the refused one is as it was.
        (short,) = other.sessions()[1:]
        assert short.head_seq == len(parsed[0][1].events) > 0
        assert _rows(other, SAMPLE_SESSION_ID) == before


def test_importing_a_file_again_writes_nothing(store: LogStore) -> None:
    (first,) = import_paths(store, [TOOL_HEAVY])
    rows, traces = _rows(store, first.session_id), store.traces(first.session_id)
    assert (first.path, first.written, first.skipped) == (TOOL_HEAVY, len(rows), 0)
    (again,) = import_paths(store, [TOOL_HEAVY])
    assert (again.session_id, again.written, again.skipped) == (first.session_id, 0, len(rows))
    assert _rows(store, first.session_id) == rows
    assert store.traces(first.session_id) == traces


def test_a_session_without_a_title_or_start_takes_them_from_its_events(
    store: LogStore, tmp_path: Path
) -> None:
    store.create_session(NewSession("bare"))  # an export carries neither
    store.append_batch(
        "bare",
        [
            NewEvent(events.message("system", "be brief", actor="system"), DAY_ONE),
            NewEvent(events.message("user", "Does harvey.go compile cleanly?"), DAY_TWO),
        ],
    )
    with open_store(tmp_path / "copy.db") as copy:
        import_paths(copy, [_export(store, "bare", tmp_path / "bare.jsonl")])
        session = copy.get_session("bare")
    assert (session.title, session.started) == ("Does harvey.go compile cleanly?", DAY_ONE)


def test_an_export_is_imported_with_its_seqs_times_and_hashes(
    store: LogStore, exported: Path, tmp_path: Path
) -> None:
    with open_store(tmp_path / "copy.db") as copy:
        (report,) = import_paths(copy, [exported])
        assert (report.written, report.skipped) == (18, 0)
        assert _rows(copy, SAMPLE_SESSION_ID) == _rows(store, SAMPLE_SESSION_ID)
        (again,) = import_paths(copy, [exported])
        assert (again.written, again.skipped) == (0, 18)


def test_an_export_extends_a_copy_that_holds_its_first_events(
    store: LogStore, exported: Path, tmp_path: Path
) -> None:
    with open_store(tmp_path / "copy.db") as copy:
        import_paths(copy, [_export(store, SAMPLE_SESSION_ID, tmp_path / "head.jsonl", upto=5)])
        assert copy.get_session(SAMPLE_SESSION_ID).head_seq == 5
        (report,) = import_paths(copy, [exported])
        assert (report.written, report.skipped) == (13, 5)
        assert _rows(copy, SAMPLE_SESSION_ID) == _rows(store, SAMPLE_SESSION_ID)


def test_an_export_over_a_session_that_differs_is_refused_naming_the_seq(
    store: LogStore, exported: Path, tmp_path: Path
) -> None:
    first = next(iter(store.read(SAMPLE_SESSION_ID)))
    batch = [NewEvent(first.payload, first.created_at), NewEvent(events.message("user", "other"))]
    with _holding(tmp_path / "copy.db", batch) as copy:
        with pytest.raises(InputError) as refused:
            import_paths(copy, [exported])
        assert str(refused.value) == (
            f"{exported}: session {SAMPLE_SESSION_ID} already exists with different events "
            "(they differ at seq 2)"
        )
        assert copy.get_session(SAMPLE_SESSION_ID).head_seq == 2


# -- what import reads: regular files, up to a limit, held once -----------------------------

_CAP_BYTES = 768 * 1024 * 1024
"""Address space of the subprocess below: reading /dev/zero or a sparse file whole would hit
it in well under a second (a MemoryError) instead of filling the machine's memory."""


def _import_capped(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``agenttrail import`` in a real process with its address space capped, killed after
    30 s: a FIFO with no writer would block an in-process run for ever."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (_CAP_BYTES, _CAP_BYTES))

    return subprocess.run(
        [sys.executable, "-m", "agenttrail.cli", "import", *args, "--db", "log.db"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=30,
        preexec_fn=cap,
        check=False,
    )


def test_import_reads_regular_files_only(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    for path, kind in (
        ("/dev/zero", "a character device"),
        (str(fifo), "a FIFO"),
        (str(folder), "a directory"),
    ):
        result = _import_capped(path, cwd=tmp_path)
        assert (result.returncode, result.stdout) == (2, ""), result.stderr
        assert result.stderr == (
            f"error: {path}: not a regular file ({kind}); import reads regular files only\n"
        )
    assert not (tmp_path / "log.db").exists()


def test_a_file_over_the_import_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    sparse = tmp_path / "huge.jsonl"
    with sparse.open("wb") as handle:  # 8 GiB that take no disk: read whole, they would
        handle.truncate(8 << 30)  # not fit under the cap
    result = _import_capped(str(sparse), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr == (
        f"error: {sparse}: file is 8,589,934,592 bytes, above the import limit of "
        f"{DEFAULT_MAX_IMPORT_BYTES:,} bytes (--max-bytes / AGENTTRAIL_MAX_IMPORT_BYTES)\n"
    )
    assert not (tmp_path / "log.db").exists()


def test_the_import_limit_is_set_by_flag_or_environment(tmp_path: Path) -> None:
    size = SHORT.stat().st_size
    db = str(tmp_path / "log.db")
    refused = (
        f"error: {SHORT}: file is {size:,} bytes, above the import limit of {size - 1:,} "
        "bytes (--max-bytes / AGENTTRAIL_MAX_IMPORT_BYTES)\n"
    )
    by_flag = run_cli("import", str(SHORT), "--max-bytes", str(size - 1), "--db", db)
    assert (by_flag.returncode, by_flag.stderr) == (2, refused)
    by_env = run_cli(
        "import", str(SHORT), "--db", db, env={"AGENTTRAIL_MAX_IMPORT_BYTES": str(size - 1)}
    )
    assert (by_env.returncode, by_env.stderr) == (2, refused)
    assert not Path(db).exists()
    bad = run_cli("import", str(SHORT), "--db", db, env={"AGENTTRAIL_MAX_IMPORT_BYTES": "lots"})
    assert (bad.returncode, bad.stderr) == (
        2,
        "error: AGENTTRAIL_MAX_IMPORT_BYTES='lots' is not an integer\n",
    )
    # The flag wins over the environment; a file of exactly the limit is read.
    fits = run_cli(
        "import",
        str(SHORT),
        "--max-bytes",
        str(size),
        "--db",
        db,
        env={"AGENTTRAIL_MAX_IMPORT_BYTES": "1"},
    )
    assert fits.returncode == 0, fits.stderr


def test_a_jsonl_file_is_parsed_without_a_second_copy_of_it(tmp_path: Path) -> None:
    """Lines are decoded one at a time: a 16 MiB file of short lines is not held again as
    one text nor as a list of lines while it is read."""
    line = b'{"type": "summary", "summary": "s", "leafUuid": "u"}\n'
    data = line * ((16 << 20) // len(line))
    tracemalloc.start()
    try:
        for _ in iter_jsonl(tmp_path / "t.jsonl", data):
            pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(data) // 4
