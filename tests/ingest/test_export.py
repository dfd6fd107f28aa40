"""An export of one session imported a chunk at a time (``agenttrail.ingest.export``).

The session is our own loan-advice session (``tests/loan_session.py``: tool results that
are response envelopes, so trace rows), made longer than three chunks with messages and one
more envelope in its last chunk. It is exported as ``agenttrail export`` writes it and
imported into a log on each backend. What the chunked reading must give is what reading the
whole file gives (``read_paths`` then ``write_sessions``, the importer's other path): the
same rows, hashes and trace rows; the same refusals, with nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import FormatError
from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest import export
from agenttrail.ingest.importer import import_paths, read_paths, write_sessions
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession
from agenttrail.model import events as payloads
from tests import mortgage_model
from tests.conftest import run_cli
from tests.loan_session import record_loan_session

SESSION = "loan-advice-long"
FILLER = 3 * export.CHUNK_EVENTS + 500
"""Messages after the loan session's turns: its events span three chunks and a part."""


def _long_session(store: LogStore, secret_at: int | None = None) -> bytes:
    """The export of the long session, as ``agenttrail export`` writes it; with a secret in
    filler message ``secret_at`` (a log that redacts nothing holds it)."""
    record_loan_session(store, SESSION)
    filler = [
        NewEvent(
            payloads.message("user" if i % 2 else "assistant", f"message {i}: {'x' * (i % 300)}"),
            f"2026-03-02T15:{i // 6000 % 60:02d}:{i // 100 % 60:02d}.{i % 100:06d}Z",
        )
        for i in range(FILLER)
    ]
    if secret_at is not None:
        filler[secret_at] = NewEvent(
            payloads.message("user", "my key is AKIAIOSFODNN7EXAMPLE"), filler[secret_at].created_at
        )
    store.append_batch(SESSION, filler)
    inputs = {"principal": 180_000, "annual_rate": 0.055, "years": 20}
    envelope = json.dumps(mortgage_model.run_model(inputs), indent=2)
    last = "2026-03-02T16:00:00.000000Z"
    store.append_batch(
        SESSION,
        [
            NewEvent(payloads.tool_call("call-last", "run_model", inputs), last),
            NewEvent(payloads.tool_result("call-last", "run_model", output=envelope), last),
        ],
    )
    return _exported(store)


def _exported(store: LogStore, session_id: str = SESSION) -> bytes:
    events = list(store.read(session_id))
    lines = jsonl_from_events(events, session=store.get_session(session_id))
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _records(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def _file(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


def _traces(store: LogStore) -> list[tuple[Any, ...]]:
    return [
        (t.call_seq, t.result_seq, t.turn_seq, t.status, t.record_hash, t.stated_hash)
        for t in store.traces(SESSION)
    ]


def _left_to_the_whole_reading(store: LogStore, path: Path) -> None:
    """The chunked reading opens ``path`` as an export, reads it, and leaves it to the whole
    reading, nothing written."""
    opening = export.opening(path)
    assert opening is not None
    assert export.append(store, path, opening) is None
    assert store.sessions() == []


@pytest.fixture
def source(tmp_path: Path) -> bytes:
    with open_store(tmp_path / "source.db") as store:
        return _long_session(store)


def test_a_long_export_is_imported_a_chunk_at_a_time(
    store: LogStore, source: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "export.jsonl"
    path.write_bytes(source)
    opening = export.opening(path)
    assert opening is not None and opening.session_id == SESSION
    count = len(_records(source))
    assert count > 3 * export.CHUNK_EVENTS
    assert export.append(store, path, opening) == count
    assert _exported(store) == source  # every row, hash and session field reproduced
    # the trace rows are those reading the whole file writes, the last chunk's envelope too
    with open_store(tmp_path / "whole.db") as whole:
        write_sessions(whole, read_paths([path], max_payload_bytes=whole.max_payload_bytes))
        assert _exported(whole) == source
        assert _traces(store) == _traces(whole)
    assert len(_traces(store)) == 6  # five envelopes of the loan session's turns, and the last
    assert _traces(store)[-1][1] == count


def test_a_line_altered_in_a_later_chunk_leaves_nothing(
    store: LogStore, source: bytes, tmp_path: Path
) -> None:
    records = _records(source)
    at = 2 * export.CHUNK_EVENTS + 17
    records[at]["payload"]["content"] += " (and one more thing)"
    path = _file(tmp_path / "altered.jsonl", records)
    _left_to_the_whole_reading(store, path)  # the chunks before it were rolled back
    with pytest.raises(FormatError) as caught:
        import_paths(store, [path])
    assert (caught.value.line, caught.value.field) == (at + 1, "hash")
    assert store.sessions() == []


def test_an_export_cut_short_leaves_nothing(store: LogStore, source: bytes, tmp_path: Path) -> None:
    records = _records(source)[: -export.CHUNK_EVENTS // 2]
    path = _file(tmp_path / "cut.jsonl", records)
    _left_to_the_whole_reading(store, path)
    with pytest.raises(FormatError, match="the file was cut short"):
        import_paths(store, [path])


def test_a_secret_in_a_later_chunk_is_named_by_its_event(store: LogStore, tmp_path: Path) -> None:
    with open_store(tmp_path / "verbatim.db", redact=False) as verbatim:
        source = _long_session(verbatim, secret_at=export.CHUNK_EVENTS + 3)
    path = tmp_path / "secret.jsonl"
    path.write_bytes(source)
    at = next(i for i, r in enumerate(_records(source), start=1) if "AKIA" in str(r["payload"]))
    assert at > export.CHUNK_EVENTS
    _left_to_the_whole_reading(store, path)
    with pytest.raises(FormatError, match=f"^{path}: event {at} holds a secret "):
        import_paths(store, [path])
    assert store.sessions() == []


def test_what_is_not_one_new_session_is_read_whole(
    store: LogStore, source: bytes, tmp_path: Path
) -> None:
    records = _records(source)
    # a second session after the first: the file is read whole, and both are imported
    with open_store(tmp_path / "other.db") as log:
        record_loan_session(log, "loan-advice-other")
        other = _exported(log, "loan-advice-other")
    path = tmp_path / "two.jsonl"
    path.write_bytes(source + other)
    _left_to_the_whole_reading(store, path)
    reports = import_paths(store, [path])
    assert [(r.session_id, r.written) for r in reports] == [
        (SESSION, len(records)),
        ("loan-advice-other", len(_records(other))),
    ]
    # the session again, once in the log: compared line by line, nothing written
    single = tmp_path / "export.jsonl"
    single.write_bytes(source)
    opening = export.opening(single)
    assert opening is not None
    assert export.append(store, single, opening) is None
    [again] = import_paths(store, [single])
    assert (again.written, again.skipped) == (0, len(records))


def test_what_opens_no_such_export_is_not_read_here(tmp_path: Path, source: bytes) -> None:
    first = _records(source)[0]
    cases = {
        "empty": b"",
        "a v1 line": json.dumps({k: v for k, v in first.items() if k != "salt"}).encode(),
        "no session field": json.dumps({k: v for k, v in first.items() if k != "session"}).encode(),
        "no hash": json.dumps({k: v for k, v in first.items() if k != "hash"}).encode(),
        "an id against the rule": json.dumps({**first, "session_id": "a b"}).encode(),
        "not JSON": b"{" + source[:200],
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data + b"\n")
        assert export.opening(path) is None, name
    assert export.opening(tmp_path) is None  # a folder
    assert export.opening(tmp_path / "missing.jsonl") is None


def test_the_command_imports_it_and_refuses_an_altered_one(source: bytes, tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_bytes(source)
    db = tmp_path / "imported.db"
    done = run_cli("import", str(path), "--db", str(db))
    assert (done.returncode, done.stdout.split()[0]) == (0, SESSION), done.stderr
    again = run_cli("export", SESSION, "--db", str(db))
    assert again.stdout.encode("utf-8") == source
    records = _records(source)
    records[-1]["payload"]["output"] = records[-1]["payload"]["output"].replace("180000", "1")
    altered = _file(tmp_path / "altered.jsonl", records)
    fresh = tmp_path / "fresh.db"
    refused = run_cli("import", str(altered), "--db", str(fresh))
    assert refused.returncode != 0
    assert refused.stderr.startswith(f"error: {altered}:{len(records)}: field 'hash': ")
    assert "Traceback" not in refused.stderr
    assert not fresh.exists()  # the log the refused import made is gone


def test_a_refused_export_leaves_no_log_made_or_changed(source: bytes, tmp_path: Path) -> None:
    # the log was made (and an old one migrated, an empty file set up) before the file was
    # checked; a refused import then removed a new log another import was writing
    records = _records(source)
    del records[-3]  # a line dropped near the end: refused by the reading, at the next line
    folder = tmp_path / "out"
    folder.mkdir()
    altered = _file(folder / "altered.jsonl", records)
    refused = run_cli("import", str(altered), "--db", str(folder / "fresh.db"))
    assert refused.returncode == 2 and "field 'seq'" in refused.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["altered.jsonl"]
    empty = folder / "empty.db"
    empty.write_bytes(b"")
    assert run_cli("import", str(altered), "--db", str(empty)).returncode == 2
    assert empty.read_bytes() == b""
    nowhere = tmp_path / "no-such-folder" / "x.db"
    said = run_cli("import", str(altered), "--db", str(nowhere)).stderr
    assert said.startswith(f"error: {altered}:{len(records) - 1}: field 'seq'"), said


def test_a_new_log_appears_whole_once_the_import_commits(source: bytes, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    path = folder / "export.jsonl"
    path.write_bytes(source)
    db = folder / "new.db"
    done = run_cli("import", str(path), "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["export.jsonl", "new.db"]
    assert run_cli("export", SESSION, "--db", str(db)).stdout.encode("utf-8") == source


def test_a_secret_under_a_redactions_field_of_another_shape_is_refused(
    store: LogStore, tmp_path: Path
) -> None:
    # Redactor.finds skipped as many findings as the field had characters: the key was stored
    with open_store(tmp_path / "verbatim.db", redact=False) as verbatim:
        sid = verbatim.create_session(NewSession(title="odd")).id
        odd = {**payloads.message("user", "my key AKIAIOSFODNN7EXAMPLE"), "redactions": "x"}
        verbatim.append_batch(sid, [NewEvent(payloads.message("user", "hello")), NewEvent(odd)])
        events = list(verbatim.read(sid))
        lines = jsonl_from_events(events, session=verbatim.get_session(sid))
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(FormatError, match="event 2 holds a secret"):
        import_paths(store, [path])
    assert store.sessions() == []


def test_session_fields_stated_again_on_a_later_line_are_read_as_before(
    store: LogStore, source: bytes, tmp_path: Path
) -> None:
    # the whole reading takes the last statement (and the chain then refuses it); the chunked
    # one took the first and imported the file
    records = _records(source)
    records[5000]["session"] = {**records[0]["session"], "title": "Edited title"}
    path = _file(tmp_path / "late.jsonl", records)
    _left_to_the_whole_reading(store, path)
    with pytest.raises(FormatError, match="hash does not match"):
        import_paths(store, [path])
    assert store.sessions() == []
