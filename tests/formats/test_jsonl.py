"""agenttrail's own export (``agenttrail.formats.jsonl``): export → import → export, and refusals.

Sessions come from third-party recordings, read in place from ``../shared/realdata`` and
imported first, as a user would: the Anthropic SDK's exchanges, the OpenAI cassettes and the
Claude Code transcripts (``tests/formats/_recordings.py`` and ``test_claude_code.py`` cite
their SOURCES.md rows), Harvey's screenplays (SOURCES.md, "Added 2026-12-01: harvey/": examples
from Harvey's docs and files written by its ``recorder.go``, rsdoiel/harvey 26082e7).

The export format is ``docs/log-format.md``, Export: one JSON object per line, the chain hash
included, so that an altered export is refused on import. The ``store`` fixture is a real log
on each backend; each round trip imports into a second, fresh SQLite log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import FormatError
from agenttrail.formats import detect, jsonl, read_file
from agenttrail.formats.jsonl import event_record, jsonl_from_events
from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import Event, NewEvent, NewSession
from agenttrail.model import events as payloads
from tests.conftest import REALDATA, run_cli
from tests.formats._recordings import ANTHROPIC_SDK, CASSETTES, CLAUDE_CODE_SPOTTER, import_events

REAL_FILES = [
    *sorted(ANTHROPIC_SDK.glob("*")),
    *sorted(CASSETTES.glob("*.yaml")),
    *sorted(CLAUDE_CODE_SPOTTER.glob("*.jsonl")),
    REALDATA / "claude-code-simonw" / "sample_session.jsonl",
    *sorted((REALDATA / "harvey").glob("*.spmd")),
]


def exported(events: list[Event], log: LogStore) -> bytes:
    """The bytes ``agenttrail export`` writes: one line per event, each ending in a newline,
    the session's fields on the first (a v2 chain starts from them)."""
    session = log.get_session(events[0].session_id) if events else None
    lines = jsonl_from_events(events, session=session)
    return "".join(line + "\n" for line in lines).encode("utf-8")


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.fixture
def second(tmp_path: Path) -> Iterator[LogStore]:
    """A second, empty log to import an export into."""
    with open_store(tmp_path / "second.db") as opened:
        yield opened


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_export_import_export_is_byte_identical(
    store: LogStore, second: LogStore, tmp_path: Path, path: Path
) -> None:
    events = import_events(store, path)
    assert events, path.name
    first = exported(events, store)
    file = write(tmp_path / "export.jsonl", first)
    assert detect(file, first) is jsonl
    [report] = import_paths(second, [file])
    assert (report.session_id, report.written, report.skipped) == (
        events[0].session_id,
        len(events),
        0,
    )
    again = list(second.read(report.session_id))
    assert exported(again, second) == first
    # every chain hash survives: the second log holds the very rows of the first
    assert [(e.seq, e.created_at, e.data, e.hash) for e in again] == [
        (e.seq, e.created_at, e.data, e.hash) for e in events
    ]
    # and importing the export again writes nothing
    [repeat] = import_paths(second, [file])
    assert (repeat.written, repeat.skipped) == (0, len(events))


def test_every_line_is_the_event_record(store: LogStore) -> None:
    events = import_events(store, CLAUDE_CODE_SPOTTER / "short.jsonl")
    lines = exported(events, store).decode("utf-8").splitlines()
    assert len(lines) == len(events)
    for line, event in zip(lines, events, strict=True):
        record = json.loads(line)
        fields = ["session_id", "seq", "created_at", "actor", "payload", "hash", "salt"]
        fields += ["anomalies", "session"] if event.seq == 1 else ["anomalies"]
        assert list(record) == fields
        # the derived anomalies follow the event's own fields (tested below, by kind)
        record.pop("session", None)
        assert record == json.loads(json.dumps(event_record(event, record["anomalies"])))
        assert record["hash"] == event.hash.hex()


# --- an altered export is refused, naming the line and the field -----------------------------


def _lines(store: LogStore) -> list[dict[str, Any]]:
    events = import_events(store, ANTHROPIC_SDK / "092be1de-d3f8-4c22-a4ea-a7ad54689836.json")
    return [json.loads(line) for line in exported(events, store).decode("utf-8").splitlines()]


def _file(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in records)  # \u escapes: lone surrogates too
    return write(tmp_path / "altered.jsonl", text.encode("utf-8"))


def _refused(path: Path, second: LogStore) -> FormatError:
    with pytest.raises(FormatError) as caught:
        import_paths(second, [path])
    assert second.sessions() == []  # refused before anything was written
    return caught.value


def test_an_altered_payload_is_refused(store: LogStore, second: LogStore, tmp_path: Path) -> None:
    records = _lines(store)
    message = next(i for i, r in enumerate(records) if r["payload"].get("role") == "assistant")
    records[message]["payload"]["content"] += " (and one more thing)"
    error = _refused(_file(tmp_path, records), second)
    assert (error.line, error.field) == (message + 1, "hash")
    assert "the export, or the log it came from, was altered" in str(error)


def test_an_altered_hash_is_refused(store: LogStore, second: LogStore, tmp_path: Path) -> None:
    records = _lines(store)
    records[2]["hash"] = records[2]["hash"][:-1] + ("0" if records[2]["hash"][-1] != "0" else "1")
    error = _refused(_file(tmp_path, records), second)
    assert (error.line, error.field) == (3, "hash")
    assert str(error) == (
        f"{tmp_path / 'altered.jsonl'}:3: field 'hash': hash does not match the line's "
        "contents: the export, or the log it came from, was altered (a JSON tool that "
        "rewrites the file, as jq does, alters it too: 1.0 written as 1, the keys of "
        "session.metadata reordered)"
    )


def test_an_altered_time_is_refused(store: LogStore, second: LogStore, tmp_path: Path) -> None:
    records = _lines(store)
    records[0]["created_at"] = "2020-01-01T00:00:00.000000Z"  # hashed: the chain notices
    error = _refused(_file(tmp_path, records), second)
    assert (error.line, error.field) == (1, "hash")


def test_a_dropped_line_is_refused(store: LogStore, second: LogStore, tmp_path: Path) -> None:
    records = _lines(store)
    del records[1]
    error = _refused(_file(tmp_path, records), second)
    assert (error.line, error.field) == (2, "seq")
    assert "seq 3 where 2 was expected" in str(error)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r.pop("payload"), "payload"),
        (lambda r: r.update(seq="1"), "seq"),
        (lambda r: r.update(payload=["not", "a", "mapping"]), "payload"),
        (lambda r: r.update(created_at="2026-01-01"), "created_at"),
        # another RFC 3339 form under the exported hash: the hash is checked on the line as
        # written, so a changed time is refused (a line without hash is re-chained instead:
        # tests/formats/test_jsonl_session.py)
        (lambda r: r.update(created_at="2026-01-01T00:00:00Z"), "hash"),
        (lambda r: r.update(seq=True), "seq"),
        (lambda r: r.update(hash=None), "hash"),
        (lambda r: r.update(key=7), "key"),
        (lambda r: r.update(session_id=["s"]), "session_id"),
        (lambda r: r.update(session_id="s\udc81"), "session_id"),
    ],
    ids=[
        "no payload",
        "seq as text",
        "payload a list",
        "created_at not RFC 3339",
        "time altered",
        "seq true",
        "hash null",
        "key a number",
        "session_id a list",
        "session_id a lone surrogate",
    ],
)
def test_a_line_of_the_wrong_shape_is_refused(
    store: LogStore, second: LogStore, tmp_path: Path, change: Any, field: str
) -> None:
    records = _lines(store)
    change(records[3])
    error = _refused(_file(tmp_path, records), second)
    assert (error.line, error.field) == (4, field)


def test_a_line_that_is_not_json_is_named(
    store: LogStore, second: LogStore, tmp_path: Path
) -> None:
    lines = exported(import_events(store, CLAUDE_CODE_SPOTTER / "short.jsonl"), store).splitlines()
    lines[4] = b'{"session_id": "short", "seq": 5, '  # cut off
    path = write(tmp_path / "broken.jsonl", b"\n".join(lines) + b"\n")
    error = _refused(path, second)
    assert error.line == 5
    assert str(error).startswith(f"{path}:5: invalid JSON: ")
    assert "cut short" not in str(error)  # a line ended by a newline was written whole
    # a truncated last line is named the same way, and said to be unfinished
    path = write(tmp_path / "cut.jsonl", b"\n".join(lines[:3]) + b"\n" + lines[3][:40])
    error = _refused(path, second)
    assert error.line == 4
    assert "invalid JSON" in str(error)
    assert str(error).endswith(
        "has no newline: the file was cut short, or is still being "
        "written (agenttrail watch follows a transcript as it grows)"
    )


# --- several sessions in one file ------------------------------------------------------------


def test_several_sessions_in_one_file(store: LogStore, second: LogStore, tmp_path: Path) -> None:
    parts = [
        import_events(store, ANTHROPIC_SDK / "10e53c1d-51be-4c64-b5bf-99adb3fa4719.json"),
        import_events(store, CLAUDE_CODE_SPOTTER / "short.jsonl"),
        import_events(store, CASSETTES / "test_chat_completion_tool_calls_with_content.yaml"),
    ]
    ids = [events[0].session_id for events in parts]
    assert len(set(ids)) == 3
    path = write(tmp_path / "three.jsonl", b"".join(exported(events, store) for events in parts))
    sessions = read_file(path)
    assert [s.session.id for s in sessions] == ids
    hashes = [[e.hash for e in ev] for ev in parts]
    assert [s.exported and s.exported.hashes for s in sessions] == [
        [h.hex() for h in ev] for ev in hashes
    ]  # as stated; and as computed from the lines, the store's own
    assert [jsonl.export_hashes(s, len(s.events)) for s in sessions] == hashes
    reports = import_paths(second, [path])
    assert [(r.session_id, r.written) for r in reports] == [
        (i, len(ev)) for i, ev in zip(ids, parts, strict=True)
    ]
    for session_id, events in zip(ids, parts, strict=True):
        assert exported(list(second.read(session_id)), second) == exported(events, store)


def test_interleaved_sessions_are_read_by_session(
    store: LogStore, second: LogStore, tmp_path: Path
) -> None:
    a = import_events(store, ANTHROPIC_SDK / "10e53c1d-51be-4c64-b5bf-99adb3fa4719.json")
    b = import_events(store, CASSETTES / "test_chat_completion_tool_calls_with_content.yaml")
    lines_a = exported(a, store).splitlines(keepends=True)
    lines_b = exported(b, store).splitlines(keepends=True)
    mixed = [line for pair in zip(lines_a, lines_b, strict=False) for line in pair]
    mixed += lines_a[len(lines_b) :] + lines_b[len(lines_a) :]
    path = write(tmp_path / "mixed.jsonl", b"".join(mixed))
    import_paths(second, [path])
    assert exported(list(second.read(a[0].session_id)), second) == exported(a, store)
    assert exported(list(second.read(b[0].session_id)), second) == exported(b, store)


def test_one_altered_session_refuses_the_whole_file(
    store: LogStore, second: LogStore, tmp_path: Path
) -> None:
    good = import_events(store, ANTHROPIC_SDK / "10e53c1d-51be-4c64-b5bf-99adb3fa4719.json")
    records = _lines(store)
    records[-1]["payload"]["actor"] = "user"
    text = exported(good, store) + _file(tmp_path, records).read_bytes()
    error = _refused(write(tmp_path / "two.jsonl", text), second)
    assert (error.line, error.field) == (len(good) + len(records), "hash")


# --- anomalies travel with the export ---------------------------------------------------------

UNPAIRED = [
    payloads.message("user", "look around"),
    payloads.tool_call("a", "ls", {}),  # 2 paired with 3
    payloads.tool_result("a", "ls", output="x.py"),
    payloads.tool_call("", "ls", {}),  # 4 missing_id
    payloads.tool_call("b", "cat", {"path": "x.py"}),  # 5 no_result
    payloads.tool_result("zz", "cat", output="?"),  # 6 orphan_result
    payloads.tool_call("d", "grep", {}),  # 7, 8, 9 duplicate_id
    payloads.tool_call("d", "grep", {}),
    payloads.tool_result("d", "grep", output="1"),
    payloads.tool_call("e", "wc", {}),  # 10, 11, 12 duplicate_result
    payloads.tool_result("e", "wc", output="1"),
    payloads.tool_result("e", "wc", output="2"),
    payloads.tool_result(None, "wc", output="3"),  # 13 missing_id
]
"""A session with every pairing anomaly (views/pairing.py), the expected kind of each seq
written beside it by hand."""

UNPAIRED_KINDS = {
    4: ["missing_id"],
    5: ["no_result"],
    6: ["orphan_result"],
    7: ["duplicate_id"],
    8: ["duplicate_id"],
    9: ["duplicate_id"],
    10: ["duplicate_result"],
    11: ["duplicate_result"],
    12: ["duplicate_result"],
    13: ["missing_id"],
}


def test_the_export_names_each_events_anomalies(
    db_url: str, second: LogStore, tmp_path: Path
) -> None:
    with open_store(db_url) as log:
        log.append_batch(
            "unpaired", [NewEvent(p) for p in UNPAIRED], create=NewSession(id="unpaired")
        )
    done = run_cli("export", "unpaired", "--db", db_url)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert {r["seq"]: r["anomalies"] for r in records if r["anomalies"]} == UNPAIRED_KINDS
    assert [r["anomalies"] for r in records[:3]] == [[], [], []]
    # import ignores the derived field, altered or not (it is not hashed) ...
    records[1]["anomalies"] = ["orphan_result"]
    path = _file(tmp_path, records)
    [report] = import_paths(second, [path])
    assert report.written == len(UNPAIRED)
    # ... and export → import → export gives the same bytes, anomalies included
    again = run_cli("export", "unpaired", "--db", str(tmp_path / "second.db"))
    assert again.stdout == done.stdout
