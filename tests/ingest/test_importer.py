"""The importer (agenttrail.ingest.importer) on real stores: every file read before anything is
written, one transaction per session, a second import writes nothing, and agenttrail's own
export matched by its chain hashes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agenttrail.errors import FormatError, InputError
from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest.importer import import_paths, read_paths, write_sessions
from agenttrail.ingest.sample import SAMPLE_SESSION_ID, record_sample
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events
from tests.conftest import REALDATA, session_made_before_the_id_rule

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
