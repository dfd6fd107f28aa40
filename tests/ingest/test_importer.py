"""The importer (agenttrail.ingest.importer) on real stores: every file read before anything is
written, one transaction per session, a second import writes nothing, and agenttrail's own
export matched by its chain hashes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from agenttrail.codec import normalize_timestamp, now_timestamp
from agenttrail.errors import (
    FormatError,
    InputError,
    NotATranscript,
    SessionExists,
    SessionNotFound,
)
from agenttrail.formats import ImportedSession
from agenttrail.formats._common import iter_jsonl
from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest.importer import (
    DEFAULT_MAX_IMPORT_BYTES,
    import_paths,
    read_paths,
    write_sessions,
    write_together,
)
from agenttrail.ingest.sample import SAMPLE_SESSION_ID, record_sample
from agenttrail.log.store import LogStore, open_store
from agenttrail.log.store._rules import as_new_session
from agenttrail.model import NewEvent, NewSession, events
from tests import mortgage_model
from tests.conftest import REALDATA, run_cli, session_made_before_the_id_rule
from tests.formats._recordings import INSPECT_BROWSER, INSPECT_TOOL_ERRORS, TOOLBENCH

# marot/spotter test/fixtures/transcripts/{tool_heavy,short}.jsonl (the real data's SOURCES.md,
# tests/conftest.py REALDATA)
TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"
SHORT = REALDATA / "claude-code-spotter" / "short.jsonl"

DAY_ONE, DAY_TWO = "2026-01-01T09:00:00.000000Z", "2026-01-02T09:00:00.000000Z"


def _rows(store: LogStore, session_id: str) -> list[tuple[int, str, bytes, bytes]]:
    return list(store.read_rows(session_id))


def _export(
    store: LogStore, session_id: str, path: Path, *, upto: int | None = None, stated: bool = True
) -> Path:
    session = store.get_session(session_id) if stated else None
    events = list(store.read(session_id))[:upto]  # as exported when the session was that long
    lines = list(jsonl_from_events(events, session=session))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def exported(store: LogStore, tmp_path: Path) -> Path:
    """The sample session, recorded into ``store`` and exported to a file."""
    record_sample(store)
    return _export(store, SAMPLE_SESSION_ID, tmp_path / "sample.jsonl")


def _holding(path: Path, batch: list[NewEvent], like: LogStore | None = None) -> LogStore:
    """A log at ``path`` whose sample session holds ``batch`` and nothing else; with the
    session fields of the sample session in ``like`` (so that its chain starts the same)."""
    log = open_store(path)
    new = NewSession(SAMPLE_SESSION_ID)
    if like is not None:
        new = as_new_session(like.get_session(SAMPLE_SESSION_ID))
    log.create_session(new)
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


def test_a_walked_file_is_skipped_only_when_the_caller_says_it(tmp_path: Path) -> None:
    # read_paths skips a folder's file that is no transcript only with someone to tell:
    # without on_skipped it is refused as a named file is, never dropped unsaid.
    index = tmp_path / "sessions-index.json"
    index.write_text('{"version": 1, "entries": []}')
    with pytest.raises(NotATranscript):
        read_paths([index, SHORT], max_payload_bytes=1 << 20, walked={index})
    told: list[NotATranscript] = []
    parsed = read_paths(
        [index, SHORT], max_payload_bytes=1 << 20, walked={index}, on_skipped=told.append
    )
    assert [path for path, _ in parsed] == [SHORT]
    assert [e.path for e in told] == [str(index)]


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


def test_a_file_changed_since_its_import_is_said_to_differ(store: LogStore, tmp_path: Path) -> None:
    # A transcript edited after its import: its lines' keys are in the log, so nothing is
    # written for them, and "already present" hid that the file no longer says what the log
    # holds. A secret the log stored redacted, and an event erased since, are no change.
    copy = tmp_path / "short.jsonl"
    secret = "mix phx.server doesnt seem to start, key AKIAIOSFODNN7EXAMPLE"
    copy.write_text(SHORT.read_text().replace("mix phx.server doesnt seem to start", secret))
    (first,) = import_paths(store, [copy])
    stored = list(store.read(first.session_id))
    user = next(e for e in stored if e.payload.get("role") == "user")
    assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps(user.payload)  # stored redacted
    assert import_paths(store, [copy])[0].warnings == []
    answer = next(e for e in stored if "Let me check" in json.dumps(e.payload))
    store.erase(first.session_id, [answer.seq], by="me", reason="test")
    assert import_paths(store, [copy])[0].warnings == []
    copy.write_text(copy.read_text().replace("Request interrupted by user", "Request edited"))
    (again,) = import_paths(store, [copy])
    edited = next(e for e in stored if "Request interrupted" in json.dumps(e.payload))
    assert (again.written, again.skipped) == (0, len(stored))
    assert again.warnings == [
        f"{copy}: 1 event already in the log under the same key reads otherwise now (seq "
        f"{edited.seq}): the file was edited since, or this agenttrail reads it otherwise; the "
        "log keeps what it had"
    ]
    assert list(store.read(first.session_id))[edited.seq - 1].payload == edited.payload


@pytest.mark.parametrize("source", ["transcript", "export"])
def test_a_session_retention_removed_is_not_imported_again_and_says_why(
    store: LogStore, exported: Path, source: str
) -> None:
    if source == "transcript":
        path, session_id = SHORT, import_paths(store, [SHORT])[0].session_id
    else:  # recorded, then exported (the fixture)
        path, session_id = exported, SAMPLE_SESSION_ID
    store.remove_session(session_id, reason="policy R-7")
    with pytest.raises(SessionExists) as refused:
        import_paths(store, [path])
    message = str(refused.value)
    assert message.startswith(f"{path}: session {session_id!r} was removed from this log on ")
    assert "(policy R-7), and a removed session's id is not used again" in message
    assert store.head(session_id) is None


def test_a_session_without_a_title_or_start_takes_them_from_its_events(
    store: LogStore, tmp_path: Path
) -> None:
    # An export by older agenttrail (chain v1) carries neither: no `session` line.
    store.create_session(NewSession("bare", chain_version=1))
    store.append_batch(
        "bare",
        [
            NewEvent(events.message("system", "be brief", actor="system"), DAY_ONE),
            NewEvent(events.message("user", "Does harvey.go compile cleanly?"), DAY_TWO),
        ],
    )
    with open_store(tmp_path / "copy.db") as copy:
        import_paths(copy, [_export(store, "bare", tmp_path / "bare.jsonl", stated=False)])
        session = copy.get_session("bare")
    assert (session.title, session.started) == ("Does harvey.go compile cleanly?", DAY_ONE)


def _source_times(value: object) -> set[str]:
    """Every time an Inspect log states (its ``timestamp``, ``created`` and ``completed``
    fields), normalised."""
    if isinstance(value, list):
        return set().union(*map(_source_times, value)) if value else set()
    if not isinstance(value, dict):
        return set()
    found = {
        normalize_timestamp(item)
        for key, item in value.items()
        if key in ("timestamp", "created", "completed") and isinstance(item, str)
    }
    return found.union(*map(_source_times, value.values()))


@pytest.mark.parametrize("path", [INSPECT_BROWSER, INSPECT_TOOL_ERRORS])
def test_an_event_the_source_gives_no_time_takes_one_from_the_source(
    store: LogStore, path: Path
) -> None:
    # Both real Inspect logs have events without a time of their own (the browser log's
    # last ones, every event of the other); each had the import's time, years after the
    # eval. Now every stored time is one the file states.
    [report] = import_paths(store, [path])
    stated = _source_times(json.loads(path.read_text(encoding="utf-8")))
    times = [event.created_at for event in store.read(report.session_id)]
    assert set(times) <= stated, set(times) - stated
    assert max(times) <= max(stated)


def test_a_source_that_states_no_time_has_the_time_of_the_import(store: LogStore) -> None:
    before = now_timestamp()
    [report] = import_paths(store, [TOOLBENCH])  # a ToolBench answer tree states no time
    times = {event.created_at for event in store.read(report.session_id)}
    assert len(times) == 1 and before <= times.pop() <= now_timestamp()
    assert store.get_session(report.session_id).started is None


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


def test_an_altered_line_the_log_holds_already_is_refused(
    store: LogStore, exported: Path, tmp_path: Path
) -> None:
    # The lines the log holds are not written again, so the store computes no hash of
    # theirs: the importer does, and an altered one still refuses the file.
    lines = exported.read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(lines[2])
    record["payload"]["content"] = "altered"
    lines[2] = json.dumps(record) + "\n"
    altered = tmp_path / "altered.jsonl"
    altered.write_text("".join(lines), encoding="utf-8")
    with open_store(tmp_path / "copy.db") as copy:
        import_paths(copy, [_export(store, SAMPLE_SESSION_ID, tmp_path / "head.jsonl", upto=5)])
        rows = _rows(copy, SAMPLE_SESSION_ID)
        with pytest.raises(FormatError) as refused:
            import_paths(copy, [altered])
        assert (refused.value.line, refused.value.field) == (3, "hash")
        assert "the export, or the log it came from, was altered" in str(refused.value)
        assert _rows(copy, SAMPLE_SESSION_ID) == rows  # the 13 lines after them not written


def test_an_export_over_a_session_that_differs_is_refused_naming_the_seq(
    store: LogStore, exported: Path, tmp_path: Path
) -> None:
    first = next(iter(store.read(SAMPLE_SESSION_ID)))
    batch = [
        NewEvent(first.payload, first.created_at, salt=first.salt),  # the same first event
        NewEvent(events.message("user", "other")),
    ]
    with _holding(tmp_path / "copy.db", batch, like=store) as copy:
        with pytest.raises(InputError) as refused:
            import_paths(copy, [exported])
        assert str(refused.value) == (
            f"{exported}: session {SAMPLE_SESSION_ID} already exists with different events "
            "(they differ at seq 2)"
        )
        assert copy.get_session(SAMPLE_SESSION_ID).head_seq == 2


def test_a_session_whose_trace_row_cannot_be_stored_is_not_written_at_all(
    store: LogStore, tmp_path: Path
) -> None:
    # The session's events and its trace rows commit in one transaction: a row refused (its
    # tool name holds a lone surrogate, which a database text column cannot keep) leaves no
    # event behind without it.
    loan = {"principal": 300_000, "annual_rate": 0.065, "years": 30}
    envelope = json.dumps(mortgage_model.run_model(loan))
    batch = [
        NewEvent(events.message("user", "payment?"), DAY_ONE, "u"),
        NewEvent(events.tool_call("c1", "run\udc80model", loan), DAY_ONE, "c"),
        NewEvent(events.tool_result("c1", None, output=envelope), DAY_ONE, "r"),
    ]
    imported = ImportedSession(NewSession("loan", title="loan"), batch)
    with pytest.raises(InputError, match="trace row tool"):
        write_sessions(store, [(tmp_path / "loan.jsonl", imported)])
    with pytest.raises(SessionNotFound):
        store.get_session("loan")
    good = ImportedSession(
        NewSession("loan2", title="loan"),
        [*batch[:1], NewEvent(events.tool_call("c1", "run_model", loan), DAY_ONE, "c"), batch[2]],
    )
    (report,) = write_sessions(store, [(tmp_path / "loan.jsonl", good)])
    assert report.written == 3
    assert [(r.call_seq, r.result_seq, r.turn_seq) for r in store.traces("loan2")] == [(2, 3, 1)]


@pytest.mark.parametrize("write", ["write_sessions", "write_together"])
def test_a_call_written_after_its_envelope_result_gets_the_row(
    store: LogStore, tmp_path: Path, write: str
) -> None:
    # Pairing is by id wherever the two sit: a result written first (an exporter can send a
    # tool's result before the model call that names it) is joined by its call later, in a
    # batch that holds no envelope of its own; the row is written with that call.
    loan = {"principal": 300_000, "annual_rate": 0.065, "years": 30}
    envelope = json.dumps(mortgage_model.run_model(loan))
    first = [
        NewEvent(events.message("user", "payment?"), DAY_ONE, "u"),
        NewEvent(events.tool_result("c1", None, output=envelope), DAY_ONE, "r"),
    ]
    later = [NewEvent(events.tool_call("c1", "run_model", loan), DAY_TWO, "c")]
    for batch in (first, later):
        imported = ImportedSession(NewSession("loan", title="loan"), batch)
        if write == "write_sessions":
            write_sessions(store, [(tmp_path / "loan.jsonl", imported)])
        else:
            write_together(store, tmp_path / "loan.jsonl", [imported])
        if batch is first:
            assert store.traces("loan") == []  # no call yet: nothing to join
    assert [(r.call_seq, r.result_seq, r.turn_seq) for r in store.traces("loan")] == [(3, 2, 1)]


# -- the id rule (docs/log-format.md, Session ids) ---------------------------------------------

_FITS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
"""The rule as docs/log-format.md words it, written out here rather than taken from the code."""


def _with_session_id(path: Path, session_id: str) -> Path:
    """A copy of the SHORT transcript whose every ``sessionId`` is ``session_id``."""
    lines = []
    for line in SHORT.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "sessionId" in record:
            record["sessionId"] = session_id
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_every_real_file_imports_under_an_id_the_rule_admits(store: LogStore) -> None:
    readable = [p for p in sorted(REALDATA.rglob("*")) if p.is_file() and p.name != "SOURCES.md"]
    reports = []
    for path in readable:
        try:
            reports += import_paths(store, [path])
        except FormatError:
            continue  # not one of our formats (Inspect, Langfuse, ToolBench): refused as before
    assert len(reports) >= 20
    assert all(_FITS.fullmatch(r.session_id) for r in reports)
    assert sorted(s.id for s in store.sessions()) == sorted({r.session_id for r in reports})


def test_every_real_session_exported_and_imported_again_is_the_same_bytes(
    store: LogStore, db_url: str, tmp_path: Path
) -> None:
    # The oracle is the original log: every row's bytes, chain hash and salt, the keys with
    # their chain and the trace rows come back equal through `agenttrail import` of exports.
    readable = [p for p in sorted(REALDATA.rglob("*")) if p.is_file() and p.name != "SOURCES.md"]
    for path in readable:
        with contextlib.suppress(FormatError):  # not one of our formats: refused as before
            import_paths(store, [path])
    ids = [s.id for s in store.sessions()]
    assert len(ids) >= 20
    files = [str(tmp_path / f"{n}.jsonl") for n in range(len(ids))]
    for sid, file in zip(ids, files, strict=True):
        exported = run_cli("export", sid, "-o", file, "--db", db_url)
        assert exported.returncode == 0, exported.stderr
    target = tmp_path / "copy.db"
    done = run_cli("import", *files, "--db", str(target))
    assert done.returncode == 0, done.stderr
    with open_store(target) as copy:
        for sid in ids:
            assert _rows(copy, sid) == _rows(store, sid)
            assert copy.key_chain(sid) == store.key_chain(sid)
            assert copy.trace_chain(sid) == store.trace_chain(sid)
            assert copy.head(sid) == store.head(sid)


def test_a_source_id_outside_the_rule_is_imported_under_one_derived_from_it(
    store: LogStore, tmp_path: Path
) -> None:
    slash = _with_session_id(tmp_path / "a.jsonl", "team/run 1")
    dots = _with_session_id(tmp_path / "b.jsonl", "..")
    (first,) = import_paths(store, [slash])
    assert _FITS.fullmatch(first.session_id) and first.written > 0
    session = store.get_session(first.session_id)
    assert session.metadata["sourceSessionId"] == "team/run 1"
    (again,) = import_paths(store, [slash])  # the same id again: nothing new is written
    assert (again.session_id, again.written) == (first.session_id, 0)
    (other,) = import_paths(store, [dots])
    assert _FITS.fullmatch(other.session_id) and other.session_id != first.session_id


def test_a_session_imported_before_the_rule_is_still_found_by_its_own_id(
    store: LogStore, db_url: str, tmp_path: Path
) -> None:
    session_made_before_the_id_rule(db_url, "team/run 1")
    (report,) = import_paths(store, [_with_session_id(tmp_path / "a.jsonl", "team/run 1")])
    assert report.session_id == "team/run 1" and report.written > 0
    assert [s.id for s in store.sessions()] == ["team/run 1"]


def test_an_export_whose_id_is_outside_the_rule_is_refused_before_anything_is_written(
    store: LogStore, db_url: str, tmp_path: Path
) -> None:
    session_made_before_the_id_rule(db_url, "old id")
    store.append("old id", events.message("user", "hi"))
    export = _export(store, "old id", tmp_path / "old.jsonl")
    assert import_paths(store, [export])[0].written == 0  # back into its own log: found
    fresh = open_store(tmp_path / "fresh.db")
    try:
        with pytest.raises(FormatError) as refused:
            import_paths(fresh, [SHORT, export])
        message = str(refused.value)
        assert message.startswith(f"{export}: field 'session_id': session id 'old id' ")
        assert "does not follow the id rule" in message and "\n" not in message
        assert fresh.sessions() == []  # SHORT, read first, was not written either
    finally:
        fresh.close()


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
    for path, kind in (("/dev/zero", "a character device"), (str(fifo), "a FIFO")):
        result = _import_capped(path, cwd=tmp_path)
        assert (result.returncode, result.stdout) == (2, ""), result.stderr
        assert result.stderr == (
            f"error: {path}: not a regular file ({kind}); import reads regular files only\n"
        )
    # a folder is walked (tests/cli/test_import_input.py); one with nothing to import is named
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "notes.md").write_text("no transcript")
    result = _import_capped(str(folder), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr.startswith(f"error: {folder}: no file to import in this folder (looked")
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
