"""The hash chain: verify passes on intact logs and finds the first bad seq after any change.

The attacker owns the database: on SQLite they drop the guard triggers, on PostgreSQL they
switch every trigger off (``session_replication_role = replica``, foreign keys included),
then change, delete or insert rows. Each test runs on both backends.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import struct
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from agenttrail.log import chain
from agenttrail.log import digests as digests_module
from agenttrail.log.chain import CHAIN_TAG, GENESIS_HASH, chain_hasher, event_hash, verify
from agenttrail.log.digests import (
    chain_hasher_v2,
    chain_rows_v2,
    key_hash,
    key_hasher,
    payload_digest,
)
from agenttrail.log.store import LogStore, open_store
from agenttrail.log.store._backend import CHAIN_PAGE_ROWS
from agenttrail.model import NewEvent, NewSession, events
from tests.conftest import is_postgres, owner_connection, postgres_schema, run_cli


def _fill(store: LogStore, session_id: str = "s", n: int = 5) -> None:
    store.create_session(NewSession(id=session_id))
    for i in range(n):
        store.append(session_id, events.message("user" if i % 2 else "assistant", f"m{i} é"))


def _attack(db: str | Path, *statements: str, params: tuple[object, ...] = ()) -> None:
    """Run ``statements`` (``?`` placeholders) as the database's owner, around every guard."""
    if is_postgres(str(db)):
        with owner_connection(str(db)) as pg:
            pg.execute("SET session_replication_role = replica")
            for statement in statements:
                pg.execute(statement.replace("?", "%s"), params if "?" in statement else ())
        return
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'trigger'"
        ).fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        for statement in statements:
            conn.execute(statement, params if "?" in statement else ())
    finally:
        conn.close()


def _documented_head(tag: bytes, prev: bytes, seq: int, created: str, sid: str) -> bytes:
    """A row's preimage up to its payload part (docs/log-format.md, "The hash chain" and
    Chain v2): built here with struct, independently of chain.py and digests.py."""
    return (
        tag
        + prev
        + struct.pack(">Q", seq)
        + struct.pack(">I", len(created))
        + created.encode()
        + struct.pack(">I", len(sid.encode()))
        + sid.encode()
    )


def _documented_hash(prev: bytes, seq: int, created: str, sid: str, payload: bytes) -> bytes:
    """A v1 row's hash: the preimage ends with the payload's length and bytes."""
    head = _documented_head(b"agenttrail-chain-v1\x00", prev, seq, created, sid)
    return hashlib.sha256(head + struct.pack(">Q", len(payload)) + payload).digest()


def test_the_hash_is_the_documented_preimage_hashed_with_sha256() -> None:
    prev, seq, created, sid, payload = (
        bytes(range(32)),
        7,
        "2026-06-24T10:00:05.000000Z",
        "sé",
        b"\xa0",
    )
    assert event_hash(prev, seq, created, sid, payload) == _documented_hash(
        prev, seq, created, sid, payload
    )
    assert bytes(32) == GENESIS_HASH


@given(
    st.text(min_size=1, max_size=40),
    st.text(max_size=40),
    st.integers(min_value=1, max_value=2**63 - 1),
    st.binary(min_size=32, max_size=32),
)
def test_a_sessions_key_hasher_gives_the_documented_key_hash(
    sid: str, key: str, seq: int, prev: bytes
) -> None:
    # docs/log-format.md's k_j, built here with struct, independently of digests.py
    def field(text: str) -> bytes:
        data = text.encode("utf-8", "surrogatepass")
        return b"\x01" + struct.pack(">I", len(data)) + data

    preimage = b"agenttrail-key-v2\x00" + prev + field(sid) + field(key) + b"\x03"
    documented = hashlib.sha256(preimage + struct.pack(">q", seq)).digest()
    assert key_hasher(sid)(prev, key, seq) == documented == key_hash(prev, (sid, key, seq))


def test_an_intact_log_verifies(store: LogStore) -> None:
    _fill(store, "a")
    _fill(store, "b", 3)
    store.create_session(NewSession(id="empty"))
    verdicts = {v.session_id: v for v in verify(store)}
    assert all(v.ok for v in verdicts.values())
    assert verdicts["a"].events == 5 and verdicts["empty"].events == 0
    assert verdicts["a"].head_hash == store.get_session("a").head_hash


def test_cli_verify_names_the_session_and_first_bad_seq_after_a_change(db_url: str) -> None:
    with open_store(db_url) as store:
        _fill(store, "s", 6)
        _fill(store, "t", 2)
        _fill(store, "u", 1)
    assert run_cli("verify", "--db", db_url).returncode == 0
    one = run_cli("show", "u", "--db", db_url).stdout.splitlines()[-1]
    assert one.startswith("chain intact: 1 event, head ")  # one event, not "1 events"
    _attack(
        db_url,
        "UPDATE session_events SET payload = ? WHERE session_id = 's' AND seq = 3",
        params=(b"\xa0",),
    )
    result = run_cli("verify", "--db", db_url)
    assert result.returncode == 1
    assert "FAIL  s  seq 3" in result.stdout
    assert "ok    t" in result.stdout
    assert run_cli("verify", "t", "--db", db_url).returncode == 0
    # The transcript says so too, on its last line.
    shown = run_cli("show", "s", "--db", db_url)
    assert shown.stdout.splitlines()[-1].startswith(
        "⚠ chain broken at seq 3: payload does not match its digest"
    )
    assert "⚠ the chain breaks at seq 3" in shown.stdout  # on the row itself
    # An export carries the rows as stored, and says on stderr that they do not verify.
    for format in ("jsonl", "md"):
        exported = run_cli("export", "s", "--format", format, "--db", db_url)
        assert exported.returncode == 0 and exported.stdout
        assert exported.stderr == (
            "warning: session s: the chain breaks at seq 3: payload does not match its "
            "digest; exported as stored (agenttrail verify)\n"
        )
    assert run_cli("export", "t", "--db", db_url).stderr == ""
    assert (
        run_cli("show", "t", "--db", db_url)
        .stdout.splitlines()[-1]
        .startswith("chain intact: 2 events, head ")
    )


def test_cli_verify_catches_a_deleted_row(db_url: str) -> None:
    with open_store(db_url) as store:
        _fill(store, "s", 6)
    _attack(db_url, "DELETE FROM session_events WHERE seq = 4")
    result = run_cli("verify", "s", "--db", db_url)
    assert (result.returncode, "seq 4" in result.stdout) == (1, True), result.stdout


def test_cli_verify_catches_a_deleted_last_row_by_the_session_head(db_url: str) -> None:
    with open_store(db_url) as store:
        _fill(store, "s", 6)
    _attack(db_url, "DELETE FROM session_events WHERE seq = 6")
    result = run_cli("verify", "--db", db_url)
    assert result.returncode == 1
    assert "FAIL  s  seq 6: seq 6 is missing (head is seq 6)" in result.stdout


def test_cli_verify_catches_an_inserted_row(db_url: str) -> None:
    with open_store(db_url) as store:
        _fill(store, "s", 4)
        forged = next(iter(store.read("s", after_seq=3))).hash
    # A row appended by hand with a correctly chained hash: only the head gives it away.
    data = b"\xa1dtypeex"
    created = "2026-06-24T10:00:05.000000Z"
    salt = bytes(32)
    digest = payload_digest(salt, data)
    _attack(
        db_url,
        "INSERT INTO session_events (session_id, seq, created_at, payload, hash, salt, digest) "
        "VALUES ('s', 5, ?, ?, ?, ?, ?)",
        params=(created, data, chain_hasher_v2("s")(forged, 5, created, digest), salt, digest),
    )
    result = run_cli("verify", "--db", db_url)
    assert result.returncode == 1
    assert "FAIL  s  seq 5: rows beyond the session head" in result.stdout


def test_rows_moved_to_an_unknown_session_are_reported(db_url: str) -> None:
    with open_store(db_url) as store:
        _fill(store, "s", 3)
    _attack(db_url, "UPDATE session_events SET session_id = 'ghost' WHERE seq = 3")
    with open_store(db_url) as store:
        bad = {v.session_id: v.bad_seq for v in verify(store) if not v.ok}
    assert bad == {"s": 3, "ghost": 1}


_COLUMNS = ("session_id", "seq", "created_at", "payload", "hash")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    row=st.integers(1, 4),
    column=st.sampled_from(_COLUMNS),
    position=st.integers(0, 10_000),
    flip=st.integers(1, 255),
)
def test_verify_detects_any_single_byte_change_of_any_stored_row(
    backend: str, request: pytest.FixtureRequest, row: int, column: str, position: int, flip: int
) -> None:
    with _fresh_log(backend, request) as db:
        with open_store(db) as store:
            _fill(store, "sess", 4)
            store.append("sess", events.tool_result("c1", "x", output="∑ " * 40))
        value = _stored(db, column, row)
        if column == "seq":
            changed: object = value ^ flip
        else:
            raw = bytearray(value.encode() if isinstance(value, str) else value)
            raw[position % len(raw)] ^= flip
            changed = bytes(raw)
            if isinstance(value, str):
                # Text that is still UTF-8 stays text; anything else lands as a BLOB.
                with contextlib.suppress(UnicodeDecodeError):
                    changed = bytes(raw).decode("utf-8")
                if is_postgres(db) and (not isinstance(changed, str) or "\x00" in changed):
                    reject()  # PostgreSQL text holds only UTF-8 without NUL: not storable
        try:
            _attack(
                db,
                f"UPDATE session_events SET {column} = ? WHERE session_id = 'sess' AND seq = ?",
                params=(changed, row),
            )
        except (sqlite3.IntegrityError, psycopg.errors.IntegrityError):
            reject()  # the primary key (or seq > 0) makes this change impossible to store
        with open_store(db) as store:
            verdicts = verify(store)
        assert not all(v.ok for v in verdicts)
        assert any(v.session_id == "sess" and not v.ok for v in verdicts)


@contextlib.contextmanager
def _fresh_log(backend: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new, empty log for one Hypothesis example."""
    if backend == "postgresql":
        with postgres_schema(request.getfixturevalue("postgres_url")) as url:
            yield url
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield str(Path(tmp) / "t.db")


def _stored(db: str, column: str, seq: int) -> Any:
    query = f"SELECT {column} FROM session_events WHERE session_id = 'sess' AND seq = ?"
    if is_postgres(db):
        with owner_connection(db) as pg:
            row = pg.execute(query.replace("?", "%s"), (seq,)).fetchone()
            assert row is not None
            return row[0]
    conn = sqlite3.connect(db)
    try:
        return conn.execute(query, (seq,)).fetchone()[0]
    finally:
        conn.close()


# -- the C check and the Python check ----------------------------------------------------------


@pytest.fixture(scope="module")
def c_check() -> Any:
    """``agenttrail.log._speedups``; CI (``AGENTTRAIL_REQUIRE_SPEEDUPS``) fails without it."""
    if chain._speedups is None:
        if os.environ.get("AGENTTRAIL_REQUIRE_SPEEDUPS"):
            pytest.fail(
                "agenttrail.log._speedups was not built (a C compiler and OpenSSL 3 headers)"
            )
        pytest.skip("agenttrail.log._speedups was not built; verify runs the Python check only")
    return chain._speedups


_SEQ_CHANGES = st.sampled_from([-1, 1, 2, 2**70, -(2**70)])
_ODD_VALUES = st.sampled_from([None, 1.0, "text", b"bytes", 7, "2026-06-24T10:00:05.000000Zé"])


@st.composite
def _pages(draw: st.DrawFn) -> tuple[str, bytes, list[tuple[Any, ...]], int]:
    """A page of rows as a store returns them, chained by the documented layout (not by
    chain.py), then perhaps one change to one row."""
    sid = draw(st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40))
    first_seq = draw(st.integers(1, 2**40))
    prev = draw(st.binary(min_size=32, max_size=32))
    rows: list[tuple[Any, ...]] = []
    link = prev
    for offset in range(draw(st.integers(1, 6))):
        created = draw(
            st.sampled_from(["2026-06-24T10:00:05.000000Z", "", "2026-06-24T10:00:05Z"])
            | st.text(st.characters(max_codepoint=127), max_size=40)
        )
        payload = draw(st.binary(max_size=3000))
        digest = _documented_hash(link, first_seq + offset, created, sid, payload)
        rows.append((first_seq + offset, created, payload, digest, None, None))
        link = digest
    change = draw(st.sampled_from(["none", "seq", "created_at", "payload", "hash", "type"]))
    if change != "none":
        index = draw(st.integers(0, len(rows) - 1))
        row = list(rows[index])
        if change == "seq":
            row[0] += draw(_SEQ_CHANGES)
        elif change == "type":
            row[draw(st.integers(0, 3))] = draw(_ODD_VALUES)
        else:
            column = {"created_at": 1, "payload": 2, "hash": 3}[change]
            raw = bytearray(row[column].encode() if column == 1 else row[column])
            if raw:
                raw[draw(st.integers(0, len(raw) - 1))] ^= draw(st.integers(1, 255))
            else:
                raw = bytearray(b"\x00")
            row[column] = raw.decode("latin-1") if column == 1 else bytes(raw)
        rows[index] = tuple(row)
    return sid, prev, rows, first_seq


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page=_pages())
def test_the_c_check_finds_the_same_first_bad_row_as_the_python_check(
    c_check: Any, page: tuple[str, bytes, list[tuple[Any, ...]], int]
) -> None:
    sid, prev, rows, first_seq = page
    python = chain._first_bad_row(chain_hasher(sid), prev, first_seq, rows)
    in_c = c_check.first_bad_row(CHAIN_TAG, sid.encode(), prev, rows, first_seq)
    assert in_c == (-1 if python is None else python[0])


def test_the_c_check_refuses_arguments_of_the_wrong_shape(c_check: Any) -> None:
    with pytest.raises(ValueError, match="prev_hash must be 32 bytes"):
        c_check.first_bad_row(CHAIN_TAG, b"s", b"short", [], 1)
    with pytest.raises(TypeError, match="6-tuple"):
        c_check.first_bad_row(CHAIN_TAG, b"s", GENESIS_HASH, [(1, "x", b"")], 1)
    with pytest.raises(ValueError, match="first_seq out of range"):
        c_check.first_bad_row(
            CHAIN_TAG, b"s", GENESIS_HASH, [(1, "x", b"", GENESIS_HASH, None, None)], 2**63 - 1
        )
    assert c_check.first_bad_row(CHAIN_TAG, b"s", GENESIS_HASH, [], 1) == -1


def _documented_v2(prev: bytes, seq: int, created: str, sid: str, digest: bytes) -> bytes:
    """A v2 row's hash: the preimage ends with the payload's salted digest."""
    head = _documented_head(b"agenttrail-chain-v2\x00", prev, seq, created, sid)
    return hashlib.sha256(head + digest).digest()


@settings(max_examples=200, deadline=None)
@given(
    sid=st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40),
    prev=st.binary(min_size=32, max_size=32),
    first_seq=st.integers(1, 2**40),
    rows=st.lists(
        st.tuples(
            st.text(st.characters(max_codepoint=127), max_size=40),
            st.binary(max_size=3000),
            st.binary(min_size=32, max_size=32),
        ),
        max_size=6,
    ),
)
def test_new_v2_rows_are_chained_by_the_documented_layout_in_c_and_in_python(
    c_check: Any, sid: str, prev: bytes, first_seq: int, rows: list[tuple[str, bytes, bytes]]
) -> None:
    digests, hashes, link = [], [], prev
    for seq, (created, payload, salt) in enumerate(rows, start=first_seq):
        digests.append(hashlib.sha256(salt + payload).digest())
        hashes.append(link := _documented_v2(link, seq, created, sid, digests[-1]))
    assert chain_rows_v2(sid, prev, first_seq, rows) == (digests, hashes)  # in C
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(digests_module, "_speedups", None)
        assert chain_rows_v2(sid, prev, first_seq, rows) == (digests, hashes)


def test_chaining_new_rows_in_c_refuses_rows_of_the_wrong_shape(c_check: Any) -> None:
    tag, good = b"agenttrail-chain-v2\x00", ("2026-06-24T10:00:05.000000Z", b"", bytes(32))
    with pytest.raises(ValueError, match="prev_hash must be 32 bytes"):
        c_check.chain_rows_v2(tag, b"s", b"short", 1, [good])
    with pytest.raises(ValueError, match="salt must be 32 bytes"):
        c_check.chain_rows_v2(tag, b"s", GENESIS_HASH, 1, [(good[0], b"", b"short")])
    with pytest.raises(TypeError, match="ASCII str, bytes, bytes"):
        c_check.chain_rows_v2(tag, b"s", GENESIS_HASH, 1, [("é", b"", bytes(32))])
    with pytest.raises(ValueError, match="first_seq out of range"):
        c_check.chain_rows_v2(tag, b"s", GENESIS_HASH, 2**63 - 1, [good])
    assert c_check.chain_rows_v2(tag, b"s", GENESIS_HASH, 1, []) == ([], [])


@pytest.mark.parametrize("check", ["c", "python"])
def test_verify_finds_a_change_deep_in_a_long_session_and_stops_reading(
    db_url: str, check: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if check == "c":
        request.getfixturevalue("c_check")
    else:
        monkeypatch.setattr(chain, "_speedups", None)
    pages = CHAIN_PAGE_ROWS * 3
    with open_store(db_url) as store:
        store.create_session(NewSession(id="long"))
        store.append_batch(
            "long", [NewEvent(events.message("user", f"m{i}")) for i in range(pages)]
        )
        (intact,) = verify(store, ["long"])
        assert (intact.ok, intact.events) == (True, pages)
    bad = CHAIN_PAGE_ROWS * 2 + 7
    _attack(
        db_url,
        "UPDATE session_events SET payload = ? WHERE session_id = 'long' AND seq = ?",
        params=(b"\xa0", bad),
    )
    before = set(threading.enumerate())
    with open_store(db_url) as store:
        (verdict,) = verify(store, ["long"])
    assert (verdict.bad_seq, verdict.events) == (bad, bad)
    assert verdict.reason == "payload does not match its digest"
    # the read-ahead thread is gone (a count would also see an earlier test's thread end)
    assert set(threading.enumerate()) - before == set()


def test_verify_of_a_session_being_appended_to_reports_no_break(db_url: str) -> None:
    # The head and the rows come from one snapshot: rows appended while verify reads must
    # not look like rows beyond the head (they did when the head was read first).
    with open_store(db_url) as store:
        store.create_session(NewSession(id="live"))
        store.append_batch(
            "live", [NewEvent(events.message("user", "x" * 200)) for _ in range(2000)]
        )
    stop = threading.Event()
    appended = 0

    def writer() -> None:
        nonlocal appended
        with open_store(db_url) as other:
            while not stop.is_set():
                other.append_batch("live", [NewEvent(events.message("user", "y"))] * 3)
                appended += 3

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        with open_store(db_url) as store:
            verdicts = [verify(store, ["live"])[0] for _ in range(8)]
    finally:
        stop.set()
        thread.join()
    assert appended > 0
    assert [v.reason for v in verdicts if not v.ok] == []
    assert len({v.events for v in verdicts}) > 1  # appends did land between the runs


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [
        ("head_hash", "abc", "head_hash 'abc' is not 32 bytes"),
        ("head_seq", "six", "head_seq 'six' is not an integer"),
        ("metadata", "{not json", "metadata is not a JSON object"),
    ],
)
def test_cli_verify_names_a_session_row_changed_into_another_type(
    tmp_path: Path, column: str, value: str, said: str
) -> None:
    # SQLite keeps whatever type a hand edit writes (PostgreSQL's column types refuse these).
    db = tmp_path / "agenttrail.db"
    with open_store(db) as store:
        _fill(store, "s", 3)
    _attack(db, f"UPDATE sessions SET {column} = ? WHERE id = 's'", params=(value,))
    for command in (["sessions"], ["show", "s"], ["verify", "s"]):
        result = run_cli(*command, "--db", str(db))
        assert result.returncode == 1, command
        assert result.stderr == f"error: session 's': {said}\n", command
    # Verifying every session reports the row as that session's problem, not as an error.
    result = run_cli("verify", "--db", str(db))
    assert (result.returncode, result.stderr) == (1, "0 of 1 sessions intact\n")
    assert result.stdout == f"FAIL  s  session row: {said}\n"


# Each backend with the damage to a session row its column types allow: SQLite keeps any type;
# in PostgreSQL the owner drops the column's constraint first.
_SQLITE_ROW_DAMAGE = {
    "head_hash": (
        "UPDATE sessions SET head_hash = 'abc' WHERE id = 's'",
        "head_hash 'abc' is not 32 bytes",
    ),
    "head_seq": (
        "UPDATE sessions SET head_seq = 'six' WHERE id = 's'",
        "head_seq 'six' is not an integer",
    ),
    "metadata": (
        "UPDATE sessions SET metadata = '{not json' WHERE id = 's'",
        "metadata is not a JSON object",
    ),
}
_POSTGRES_ROW_DAMAGE = {
    "head_hash": (
        "ALTER TABLE sessions DROP CONSTRAINT sessions_head_hash_check; "
        "UPDATE sessions SET head_hash = '\\x616263' WHERE id = 's'",
        "head_hash b'abc' is not 32 bytes",
    ),
    "head_seq": (
        "ALTER TABLE sessions ALTER COLUMN head_seq DROP NOT NULL; "
        "UPDATE sessions SET head_seq = NULL WHERE id = 's'",
        "head_seq None is not an integer",
    ),
    "metadata": _SQLITE_ROW_DAMAGE["metadata"],
}


@pytest.mark.parametrize(
    ("backend", "damage"),
    [("sqlite", d) for d in _SQLITE_ROW_DAMAGE] + [("postgresql", d) for d in _POSTGRES_ROW_DAMAGE],
)
def test_verify_reports_a_damaged_session_row_as_its_session_and_checks_the_others(
    db_url: str, damage: str
) -> None:
    damages = _POSTGRES_ROW_DAMAGE if is_postgres(db_url) else _SQLITE_ROW_DAMAGE
    statement, said = damages[damage]
    with open_store(db_url) as store:
        _fill(store, "s", 3)
        _fill(store, "t", 4)
        t_head = store.get_session("t").head_hash
    _attack(db_url, *statement.split("; "))
    result = run_cli("verify", "--db", db_url)
    assert (result.returncode, result.stderr) == (1, "1 of 2 sessions intact\n")
    assert result.stdout.splitlines() == [
        f"FAIL  s  session row: {said}",
        f"ok    t  4 events  head {t_head.hex()[:16]}",
    ]
    with open_store(db_url) as store:
        s, t = verify(store)
    assert (s.session_id, s.ok, s.bad_seq, s.reason) == ("s", False, None, said)
    assert (t.session_id, t.ok, t.events, t.head_hash) == ("t", True, 4, t_head)
    assert run_cli("verify", "t", "--db", db_url).returncode == 0


# -- event rows changed into other types: each is that session's first bad seq ------------------

_SQLITE_DAMAGE = {
    # The naive edit: replace() on a BLOB gives TEXT, here not even UTF-8.
    "payload-replaced": (
        "UPDATE session_events SET payload = replace(payload, 'Paris', 'Lyon!') "
        "WHERE session_id = 's' AND seq = 3",
        "payload is text, not bytes",
    ),
    "payload-cast-to-text": (
        "UPDATE session_events SET payload = CAST(payload AS TEXT) "
        "WHERE session_id = 's' AND seq = 3",
        "payload is text, not bytes",
    ),
    "hash-as-hex-text": (
        "UPDATE session_events SET hash = hex(hash) WHERE session_id = 's' AND seq = 3",
        "hash is text, not bytes",
    ),
    "created_at-as-blob": (
        "UPDATE session_events SET created_at = X'ff00' WHERE session_id = 's' AND seq = 3",
        "created_at is bytes, not text",
    ),
    "payload-as-integer": (
        "UPDATE session_events SET payload = 7 WHERE session_id = 's' AND seq = 3",
        "payload is an integer, not bytes",
    ),
    "seq-as-text": (
        "UPDATE session_events SET seq = 'three' WHERE session_id = 's' AND seq = 3",
        "seq 3 is missing",
    ),
}
_POSTGRES_DAMAGE = {
    "payload-null": (
        "ALTER TABLE session_events ALTER COLUMN payload DROP NOT NULL; "
        "UPDATE session_events SET payload = NULL WHERE session_id = 's' AND seq = 3",
        "payload is NULL, not bytes",
    ),
    "hash-null": (
        "ALTER TABLE session_events ALTER COLUMN hash DROP NOT NULL; "
        "UPDATE session_events SET hash = NULL WHERE session_id = 's' AND seq = 3",
        "hash is NULL, not bytes",
    ),
    "created_at-null": (
        "ALTER TABLE session_events ALTER COLUMN created_at DROP NOT NULL; "
        "UPDATE session_events SET created_at = NULL WHERE session_id = 's' AND seq = 3",
        "created_at is NULL, not text",
    ),
}


# Each backend with the damage its column types allow (the other refuses it outright).
@pytest.mark.parametrize(
    ("backend", "damage"),
    [("sqlite", d) for d in _SQLITE_DAMAGE] + [("postgresql", d) for d in _POSTGRES_DAMAGE],
)
def test_a_column_changed_into_another_type_is_named_by_verify_and_by_every_reader(
    db_url: str, damage: str
) -> None:
    damages = _POSTGRES_DAMAGE if is_postgres(db_url) else _SQLITE_DAMAGE
    statement, said = damages[damage]
    with open_store(db_url) as store:
        for sid in ("s", "t"):
            store.create_session(NewSession(id=sid))
            for i in range(5):
                store.append(sid, events.message("user", f"Paris, {i}"))
    _attack(db_url, *statement.split("; "))
    result = run_cli("verify", "--db", db_url)
    assert (result.returncode, result.stderr) == (1, "1 of 2 sessions intact\n")
    assert f"FAIL  s  seq 3: {said}\n" in result.stdout
    assert "ok    t  5 events" in result.stdout
    assert run_cli("verify", "t", "--db", db_url).returncode == 0
    # The commands that read the session name the same row in one line, never a traceback.
    where = (
        "seq 'three': seq is text, not an integer" if damage == "seq-as-text" else f"seq 3: {said}"
    )
    expected = (
        f"error: session 's', {where} (the row was changed by hand; agenttrail verify checks "
        "the whole log)\n"
    )
    for command in (["show"], ["show", "--json"], ["export"], ["replay"], ["fountain"]):
        read = run_cli(*command, "s", "--db", db_url)
        assert (read.returncode, read.stderr) == (1, expected), command
    assert run_cli("show", "t", "--db", db_url).returncode == 0


def test_a_model_call_whose_time_was_changed_into_text_shows_unpriced(tmp_path: Path) -> None:
    """A priced call's ``created_at`` changed into text that is no time (SQLite takes it):
    ``show`` prints the transcript, its cost unknown and the chain's break, no traceback."""
    db = tmp_path / "log.db"
    meta = events.meta(model="gpt-4o", provider="openai", usage=events.usage(100, 20))
    with open_store(str(db), create=True) as store:
        store.create_session(NewSession(id="s"))
        store.append("s", events.message("assistant", "Paris.", meta=meta))
    assert "cost: $0.00" in run_cli("show", "s", "--db", str(db)).stdout
    _attack(db, "UPDATE session_events SET created_at = 'noon' WHERE session_id = 's'")
    result = run_cli("show", "s", "--db", str(db))
    assert (result.returncode, result.stderr) == (0, "")
    assert "usage: 1 model call · 100 in · 20 out\ncost: unknown\n" in result.stdout
    assert "⚠ chain broken at seq 1" in result.stdout


# -- idempotency keys: chained per session, so a changed, moved or deleted key is named -------


@pytest.mark.parametrize(
    ("attack", "problem"),
    [
        # The key of seq 2 changed into the key of a later source line: re-importing that
        # line would now write nothing.
        (
            "UPDATE session_event_keys SET key = 'line-9' WHERE key = 'line-1'",
            "key row 2 (seq 2) does not chain",
        ),
        ("UPDATE session_event_keys SET seq = 3 WHERE key = 'line-1'", "key row 2 (seq 3)"),
        (
            "DELETE FROM session_event_keys WHERE key = 'line-1'",
            "key row 2 (seq 3) does not chain",
        ),
        (
            "DELETE FROM session_event_keys WHERE key = 'line-3'",
            "the key head says 4 key rows, there are 3",
        ),
        ("UPDATE sessions SET key_count = 5 WHERE id = 's'", "the key head says 5 key rows"),
    ],
)
def test_a_changed_idempotency_key_is_named_by_verify(
    db_url: str, attack: str, problem: str
) -> None:
    with open_store(db_url) as store:
        store.create_session(NewSession(id="s"))
        for n in range(4):
            store.append("s", events.message("user", f"m{n}"), key=f"line-{n}")
        store.append("s", events.message("user", "m4"))  # no key
        assert store.key_chain("s").rows_chained == 4
    assert run_cli("verify", "--db", db_url).returncode == 0
    _attack(db_url, attack)
    result = run_cli("verify", "--db", db_url)
    assert result.returncode == 1
    assert f"FAIL  s  {problem}" in result.stdout


# -- the log's own rows: tombstones and log keys, chained in the order written ---------------


@pytest.mark.parametrize(
    ("attack", "problem"),
    [
        (
            "UPDATE tombstones SET reason = 'asked by the user' WHERE session_id = 'gone'",
            "tombstone row 1 (session 'gone') does not chain",
        ),
        (
            "UPDATE tombstones SET head_seq = 1 WHERE session_id = 'later'",
            "tombstone row 2 (session 'later') does not chain",
        ),
        (
            "DELETE FROM tombstones WHERE session_id = 'later'",
            "the tombstone head says 2 tombstone rows, there are 1",
        ),
        (
            "UPDATE log_keys SET key = ? WHERE name = 'redaction'",
            "log key row 1 (name 'redaction') does not chain",
        ),
        ("DELETE FROM log_keys", "the log key head says 1 log key rows, there are 0"),
    ],
)
def test_a_changed_tombstone_or_log_key_is_named_by_verify(
    db_url: str, attack: str, problem: str
) -> None:
    with open_store(db_url) as store:
        for sid in ("gone", "later"):
            _fill(store, sid, 2)
            store.remove_session(sid, reason="retention")
        _fill(store, "s", 2)
        store.append(
            "s", events.message("user", "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345")
        )
        chains = store.log_chains()
        assert (chains["tombstones"].rows_chained, chains["log_keys"].rows_chained) == (2, 1)
    assert run_cli("verify", "--db", db_url).returncode == 0
    _attack(db_url, attack, params=(bytes(32),) if "?" in attack else ())
    result = run_cli("verify", "--db", db_url)
    assert result.returncode == 1
    assert f"FAIL  log  {problem}" in result.stdout
    assert "ok    s  " in result.stdout  # the sessions are intact
