"""What only the PostgreSQL backend has: guard triggers and privileges, the schema and its
version table, URLs and login errors, retries of conflicts, LISTEN for server replicas, and the
translation of psycopg errors by SQLSTATE. The contract both backends keep is in
``test_store_contract.py``.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path

import psycopg
import pytest

from agenttrail.codec import encode_payload
from agenttrail.errors import (
    AppendOnlyViolation,
    InputError,
    StoreError,
)
from agenttrail.log.chain import event_hash, verify
from agenttrail.log.store import Appended, LogStore, open_store
from agenttrail.log.store._pg_connect import Listener
from agenttrail.log.store.postgres import parse_url, postgres_error
from agenttrail.model import NewSession
from tests.conftest import owner_connection, postgres_schema, run_cli

# PostgreSQL counterparts of the statements above, run by the role that owns the tables (the
# application's role is refused even earlier, by privileges: see the next test). There is no
# INSERT OR REPLACE; ON CONFLICT DO UPDATE and MERGE are the ways to overwrite a row, and
# TRUNCATE the way around DELETE triggers.
_PG_REFUSED = [
    "UPDATE session_events SET payload = '\\xa0' WHERE seq = 1",
    "DELETE FROM session_events WHERE seq = 1",
    "INSERT INTO session_events VALUES ('s', 1, 'x', '\\xa0', '\\x00', NULL, NULL) "
    "ON CONFLICT (session_id, seq) DO UPDATE SET payload = excluded.payload",
    "MERGE INTO session_events e USING (VALUES ('s', 5)) v (sid, seq) "
    "ON e.session_id = v.sid AND e.seq = v.seq "
    "WHEN NOT MATCHED THEN INSERT VALUES (v.sid, v.seq, 'x', '\\xa0', '\\x00', NULL, NULL)",
    "MERGE INTO session_events e USING (VALUES ('s', 1)) v (sid, seq) "
    "ON e.session_id = v.sid AND e.seq = v.seq WHEN MATCHED THEN UPDATE SET payload = '\\xa0'",
    "INSERT INTO session_events VALUES ('s', 9, 'x', '\\xa0', '\\x00', NULL, NULL)",
    # The next seq, but no head moved to cover it: only an append inserts rows.
    "INSERT INTO session_events VALUES ('s', 3, '2026-06-24T10:00:05.000000Z', '\\xa0', "
    "sha256('x'), NULL, NULL)",
    "TRUNCATE session_events",
    "TRUNCATE sessions CASCADE",
    "UPDATE session_event_keys SET seq = 2",
    "DELETE FROM session_event_keys",
    "TRUNCATE session_event_keys",
    "DELETE FROM sessions",
    "INSERT INTO sessions (id, created_at) VALUES ('s', 'x') "
    "ON CONFLICT (id) DO UPDATE SET head_seq = 0",
    "UPDATE sessions SET head_seq = 0",
    "UPDATE sessions SET id = 't'",
    # Forward, or sideways: the head must still be the last event when the statement commits.
    "UPDATE sessions SET head_seq = 5",
    "UPDATE sessions SET head_hash = sha256('x')",
]


def _two_events(url: str) -> list[tuple[int, bytes, bytes]]:
    with open_store(url) as store:
        store.create_session(NewSession(id="s"))
        store.append("s", {"type": "x"}, key="k")
        store.append("s", {"type": "y"})
        return [(e.seq, e.data, e.hash) for e in store.read("s")]


@pytest.mark.parametrize("statement", _PG_REFUSED)
def test_postgresql_refuses_to_change_stored_events(postgres_url: str, statement: str) -> None:
    with postgres_schema(postgres_url) as url:
        before = _two_events(url)
        with owner_connection(url) as conn:
            owner = conn.execute(
                "SELECT tableowner FROM pg_tables WHERE tablename = "
                "'session_events' AND schemaname = current_schema()"
            ).fetchone()
            assert owner == conn.execute("SELECT current_user").fetchone()
            with pytest.raises(psycopg.errors.RestrictViolation, match="agenttrail"):
                conn.execute(statement)
        with open_store(url) as store:
            assert [(e.seq, e.data, e.hash) for e in store.read("s")] == before
            assert store.get_session("s").head_seq == 2
            assert store.event_keys("s") == [("k", 1)]


@pytest.mark.parametrize(
    "statement",
    [
        # The writer may UPDATE payload and salt (erasure), which the trigger then refuses
        # unless it is an erasure (test_erase.py); every other column is refused by rights.
        "UPDATE session_events SET hash = '\\xa0' WHERE seq = 1",
        "UPDATE session_events SET digest = '\\xa0' WHERE seq = 1",
        "DELETE FROM erasures",
        "DELETE FROM session_events WHERE seq = 1",
        "TRUNCATE session_events",
        "UPDATE session_event_keys SET seq = 2",
        "DELETE FROM session_event_keys",
        "UPDATE trace_rows SET status = 'verified'",
        "DELETE FROM trace_rows",
        "TRUNCATE trace_rows",
        "DELETE FROM sessions",
        "UPDATE sessions SET title = 'rewritten'",
        "INSERT INTO tombstones (session_id, head_seq, head_hash, deleted_at, reason) "
        "VALUES ('s', 2, sha256('x'), 'x', 'x')",
        "DELETE FROM tombstones",
        "DROP TRIGGER session_events_no_update ON session_events",
        "ALTER TABLE session_events DISABLE TRIGGER USER",
        "DELETE FROM agenttrail_schema",
    ],
)
def test_the_application_role_has_no_right_to_change_stored_events(
    postgres_url: str, statement: str
) -> None:
    # docs/log-format.md, Privileges: the guard rails are triggers and, in PostgreSQL, also
    # privileges. The store's connections work as agenttrail_writer; as that role these are
    # refused before any trigger runs.
    with postgres_schema(postgres_url) as url:
        _two_events(url)
        with open_store(url) as store, store._connection() as conn:  # type: ignore[attr-defined]
            assert conn.execute("SELECT current_user").fetchone() == ("agenttrail_writer",)
        with owner_connection(url) as conn:
            conn.execute("SET ROLE agenttrail_writer")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        with open_store(url) as store:
            assert [e.seq for e in store.read("s")] == [1, 2]


def test_both_schemas_have_the_same_tables_and_columns(postgres_url: str, tmp_path: Path) -> None:
    # One contract, two DDL files (Phoenix's test_ddl_assets.py): the same rows in each, so
    # that migrate copies column for column. PostgreSQL adds `pos` (SQLite's rowid) and keeps
    # its schema version in a table (SQLite: PRAGMA user_version); SQLite's search index has
    # its FTS5 tables (search_text, search_grams and their shadow tables), PostgreSQL GIN indexes
    # instead.
    with open_store(tmp_path / "t.db") as store:
        conn = store._conn  # type: ignore[attr-defined]
        tables = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")
            if not r[0].startswith(("search_text", "search_grams"))
        ]
        lite = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    with postgres_schema(postgres_url) as url:
        open_store(url).close()
        with owner_connection(url) as pg:
            rows = pg.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
            ).fetchall()
    postgres: dict[str, list[str]] = {}
    for table, column in rows:
        if column != "pos" and table != "agenttrail_schema":
            postgres.setdefault(str(table), []).append(str(column))
    assert postgres == lite


def test_a_refusal_reaches_callers_as_an_agenttrail_error(postgres_url: str) -> None:
    with postgres_schema(postgres_url) as url, open_store(url) as store:
        sid = store.create_session(NewSession()).id
        store.append(sid, {"type": "x"})
        translate = store._translate  # type: ignore[attr-defined]
        with store._connection() as pg:  # type: ignore[attr-defined]
            denied = "permission denied for table session_events"
            with pytest.raises(AppendOnlyViolation, match=denied), translate():
                pg.execute("DELETE FROM session_events")
            with pytest.raises(AppendOnlyViolation, match="append-only"), translate():
                pg.execute(
                    "INSERT INTO session_events VALUES (%s, 7, 'x', '\\xa0', '\\x00', NULL, NULL)",
                    (sid,),
                )
            with pytest.raises(AppendOnlyViolation, match="head only moves forward"), translate():
                pg.execute("UPDATE sessions SET head_seq = 0")
        assert [e.seq for e in store.read(sid)] == [1]


def test_postgresql_errors_are_translated_by_sqlstate_not_by_message(postgres_url: str) -> None:
    # restrict_violation (23001) is what every guard of schema/postgres-0001.sql raises,
    # whatever its words; the default SQLSTATE of RAISE (P0001) is not a refusal even when
    # its message says "append-only"; class 22 (data) is bad input.
    where = "PostgreSQL database 'test', schema 'x'"
    errors: list[psycopg.Error] = []
    with owner_connection(postgres_url) as conn:
        for statement in (
            "DO $$ BEGIN RAISE EXCEPTION 'other words' USING ERRCODE = 'restrict_violation'; "
            "END $$",
            "DO $$ BEGIN RAISE EXCEPTION 'agenttrail: append-only'; END $$",
            "SELECT 1 / 0",
        ):
            with pytest.raises(psycopg.Error) as raised:
                conn.execute(statement)
            errors.append(raised.value)
    refused, raised_plain, division = (postgres_error(where, e) for e in errors)
    assert type(refused) is AppendOnlyViolation and str(refused) == f"{where}: other words"
    assert type(raised_plain) is StoreError
    assert str(raised_plain) == f"{where}: agenttrail: append-only"
    assert type(division) is InputError and str(division) == f"{where}: division by zero"


def test_a_schema_that_is_not_a_log_is_refused(postgres_url: str) -> None:
    with postgres_schema(postgres_url) as url:
        schema = url.rsplit("schema=", 1)[1]
        with pytest.raises(InputError, match=f"no agenttrail log in schema '{schema}'"):
            open_store(url, create=False)  # reading never turns a schema into a log
        with owner_connection(url) as conn:
            found = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,))
            assert found.fetchone() == (0,)
            conn.execute(f"CREATE SCHEMA {schema}; CREATE TABLE {schema}.other (x int)")
        with pytest.raises(InputError, match="holds tables but no agenttrail log"):
            open_store(url)
        with owner_connection(url) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            )
            assert tables.fetchall() == [("other",)]


def test_a_postgresql_log_keeps_its_schema_version_in_a_table(postgres_url: str) -> None:
    with postgres_schema(postgres_url) as url:
        open_store(url).close()
        open_store(url, create=False).close()  # the second open migrates nothing
        with owner_connection(url) as conn:
            assert conn.execute("SELECT version FROM agenttrail_schema").fetchall() == [
                (1,),
                (2,),
                (3,),
                (4,),
                (5,),
                (6,),
            ]
            conn.execute("INSERT INTO agenttrail_schema VALUES (99, 'later')")
        with pytest.raises(StoreError, match="schema version 99 is newer"):
            open_store(url)


def test_postgresql_urls(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with postgres_schema(postgres_url) as url:
        secret = url.replace("postgresql://postgres@", "postgres://postgres:s3cret-pw@")
        assert secret != url
        with open_store(secret) as store:
            assert store.url.startswith("postgres://postgres@") and "s3cret" not in store.url
            assert store.url.endswith(url.rsplit("?", 1)[1])
        monkeypatch.setenv("AGENTTRAIL_DATABASE_URL", url)
        with open_store() as store:
            assert store.url == url
            sid = store.create_session(NewSession()).id
        with open_store(url, create=False) as store:
            assert [s.id for s in store.sessions()] == [sid]
    with pytest.raises(InputError, match="not a plain identifier"):
        open_store(f"{postgres_url}?schema=x;drop")


def test_an_unreachable_server_or_a_refused_login_is_one_line_naming_host_and_database(
    postgres_url: str,
) -> None:
    server = parse_url(postgres_url)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]  # nothing listens there once the socket closes
    cases = [
        (
            f"postgresql://postgres:pw-hunter2@127.0.0.1:{closed_port}/{server.dbname}",
            f"PostgreSQL database '{server.dbname}' cannot be reached at 127.0.0.1:{closed_port}",
        ),
        (
            f"postgresql://no_such_role:pw-hunter2@{server.host}:{server.port}/{server.dbname}",
            f"PostgreSQL refused the login to database '{server.dbname}' on "
            f"{server.host}:{server.port} as 'no_such_role'",
        ),
    ]
    for url, expected in cases:
        with pytest.raises(StoreError) as raised:
            open_store(url)
        message = str(raised.value)
        assert message.startswith(expected), message
        assert "\n" not in message and "hunter2" not in message
        result = run_cli("sessions", "--db", url)
        assert result.returncode == 1
        assert result.stderr.startswith(f"error: {expected}"), result.stderr
        assert result.stderr.count("\n") == 1 and "hunter2" not in result.stderr


# -- PostgreSQL: conflicts are retried, a bounded number of times -----------------------------


def _wait_until_blocked_by(conn: psycopg.Connection[tuple[object, ...]], url: str) -> None:
    """Wait until some backend waits for a lock that ``conn``'s transaction holds."""
    pid = conn.info.backend_pid
    with owner_connection(url) as watcher:
        for _ in range(500):
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                (pid,),
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the store never waited for the outside transaction")


def _deadlock(url: str, store: LogStore) -> dict[str, object]:
    """An outside transaction takes key 'k' of session 's', the store's append (with that
    key) locks the session row and waits for the key, then the outside transaction asks for
    the session row: a real deadlock, which PostgreSQL breaks by aborting the store's side
    (its deadlock_timeout runs out first)."""
    outcome: dict[str, object] = {}

    def append() -> None:
        try:
            outcome["appended"] = store.append("s", {"type": "x"}, key="k")
        except StoreError as e:
            outcome["error"] = e

    with owner_connection(url) as other:
        other.execute("SET deadlock_timeout = '60s'")  # this side waits; the store's detects
        other.execute("BEGIN")
        other.execute("INSERT INTO session_event_keys VALUES ('s', 'k', 1)")
        writer = threading.Thread(target=append)
        writer.start()
        _wait_until_blocked_by(other, url)
        other.execute("SELECT 1 FROM sessions WHERE id = 's' FOR UPDATE")
        other.execute("ROLLBACK")
        writer.join(timeout=60)
    return outcome


def test_a_deadlock_is_retried_and_the_append_lands_once(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with postgres_schema(postgres_url) as url, open_store(url) as store:
        store.create_session(NewSession(id="s"))
        with caplog.at_level(logging.WARNING, logger="agenttrail.log.store.postgres"):
            outcome = _deadlock(url, store)
        assert "error" not in outcome
        assert outcome["appended"] == Appended(1, store.get_session("s").head_hash)
        assert [(e.seq, e.payload) for e in store.read("s")] == [(1, {"type": "x"})]
        assert store.event_keys("s") == [("k", 1)]
        retries = [r.getMessage() for r in caplog.records]
        assert len(retries) == 1 and "append retried (attempt 1 of 5): deadlock" in retries[0]


def test_retries_are_bounded_and_the_last_failure_is_named(postgres_url: str) -> None:
    from agenttrail.log.store.postgres import PostgresStore

    with postgres_schema(postgres_url) as url:
        with open_store(url) as store:
            store.create_session(NewSession(id="s"))
        with PostgresStore(url, max_payload_bytes=1 << 20, max_attempts=1) as once:
            outcome = _deadlock(url, once)
            error = outcome.get("error")
            assert isinstance(error, StoreError), outcome
            assert "append gave up after 1 attempts: deadlock detected" in str(error)
            assert isinstance(error.__cause__, psycopg.errors.DeadlockDetected)
            assert list(once.read("s")) == [] and once.event_keys("s") == []


def test_a_serialization_failure_is_retried(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A server (or role) set to SERIALIZABLE: the store's seq-allocating UPDATE meets a row
    # another transaction changed after the store's snapshot was taken, and fails with 40001.
    with postgres_schema(postgres_url) as base:
        url = f"{base}&options=-c%20default_transaction_isolation%3Dserializable"
        with open_store(url) as store:
            store.create_session(NewSession(id="s"))
            outcome: dict[str, object] = {}
            with owner_connection(url) as other:
                other.execute("BEGIN")
                other.execute("UPDATE sessions SET title = 'renamed' WHERE id = 's'")
                writer = threading.Thread(
                    target=lambda: outcome.update(appended=store.append("s", {"type": "x"}))
                )
                with caplog.at_level(logging.WARNING, logger="agenttrail.log.store.postgres"):
                    writer.start()
                    _wait_until_blocked_by(other, url)
                    other.execute("COMMIT")
                    writer.join(timeout=60)
            assert outcome["appended"] == Appended(1, store.get_session("s").head_hash)
            assert [e.seq for e in store.read("s")] == [1]
            assert store.get_session("s").title == "renamed"
        (retry,) = [r.getMessage() for r in caplog.records]
        assert "could not serialize access due to concurrent update" in retry


def test_a_key_written_while_waiting_for_the_lock_makes_the_append_a_duplicate(
    postgres_url: str,
) -> None:
    # Another appender holds the session row and writes key 'k'; ours has looked the key up
    # (not there yet) and waits for the row. When it gets the row it finds the key after all:
    # it rolls back its allocation and retries, and returns the other's seq, writing nothing.
    with postgres_schema(postgres_url) as url, open_store(url) as store:
        store.create_session(NewSession(id="s", chain_version=1))  # a v1 row, written by hand
        data, created = encode_payload({"type": "first"}), "2026-06-24T10:00:05.000000Z"
        digest = event_hash(bytes(32), 1, created, "s", data)
        outcome: dict[str, Appended] = {}
        with owner_connection(url) as other:
            other.execute("BEGIN")
            other.execute("UPDATE sessions SET head_seq = 1 WHERE id = 's'")
            other.execute(
                "INSERT INTO session_events VALUES ('s', 1, %s, %s, %s)", (created, data, digest)
            )
            other.execute("INSERT INTO session_event_keys VALUES ('s', 'k', 1)")
            other.execute("UPDATE sessions SET head_hash = %s WHERE id = 's'", (digest,))
            writer = threading.Thread(
                target=lambda: outcome.update(appended=store.append("s", {"type": "x"}, key="k"))
            )
            writer.start()
            _wait_until_blocked_by(other, url)
            other.execute("COMMIT")
            writer.join(timeout=60)
        assert outcome["appended"] == Appended(1, digest, duplicate=True)
        assert [(e.seq, e.payload) for e in store.read("s")] == [(1, {"type": "first"})]
        assert verify(store)[0].ok


# -- appends wake listeners (server replicas) -------------------------------------------------


def test_a_login_role_that_is_only_a_writer_can_use_but_not_change_the_log(
    postgres_url: str,
) -> None:
    # docs/log-format.md, Privileges: the operator's setup that keeps the application's own
    # credentials away from the evidence.
    role = "agenttrail_test_app"
    server = parse_url(postgres_url)
    with owner_connection(postgres_url) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        with postgres_schema(postgres_url) as owner_url:
            open_store(owner_url).close()  # the owner creates the schema (and agenttrail_writer)
            admin.execute(f"CREATE ROLE {role} LOGIN IN ROLE agenttrail_writer")
            try:
                app_url = owner_url.replace(f"//{server.user}@", f"//{role}@")
                assert app_url != owner_url
                with open_store(app_url) as store:
                    sid = store.create_session(NewSession()).id
                    store.append(sid, {"type": "x"}, key="k")
                    store.acquire_turn(sid, turn_id="t", holder="a", ttl_s=5)
                    store.release_turn(sid, "t")
                    assert store.remove_session(sid, reason="test").head_seq == 1
                app = parse_url(app_url)
                with psycopg.connect(app.conninfo, autocommit=True) as conn:
                    conn.execute(f"SET search_path TO {app.schema}")
                    conn.execute("RESET ROLE")  # its own rights are the writer's, no more
                    for statement in (
                        "DELETE FROM session_events",
                        "UPDATE sessions SET title = 'x'",
                        "DROP TABLE session_events",
                    ):
                        with pytest.raises(psycopg.errors.InsufficientPrivilege):
                            conn.execute(statement)
                with postgres_schema(postgres_url) as fresh:
                    # It cannot set a schema up: one line saying why, naming the database.
                    fresh_app = fresh.replace(f"//{server.user}@", f"//{role}@")
                    with pytest.raises(StoreError, match="permission denied") as raised:
                        open_store(fresh_app)
                    assert "\n" not in str(raised.value)
                    assert f"database '{server.dbname}'" in str(raised.value)
            finally:
                admin.execute(f"DROP ROLE IF EXISTS {role}")


def test_a_listener_reconnects_after_its_connection_is_killed(postgres_url: str) -> None:
    with postgres_schema(postgres_url) as url, open_store(url) as store:
        sid = store.create_session(NewSession()).id
        listener = store.listen()
        try:
            assert listener.wait(1.0) is None
            with owner_connection(url) as admin:
                pid = listener._conn.info.backend_pid  # type: ignore[union-attr]
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            # generous waits (each returns as soon as it has its answer): a loaded machine
            assert listener.wait(10.0) == []  # the loss is noticed (and logged)
            assert listener.wait(10.0) is None  # reconnected: check everything once
            store.append(sid, {"type": "x"})
            assert listener.wait(5.0) == [sid]
        finally:
            listener.close()


class _Relay:
    """A TCP relay to PostgreSQL whose connections can go silent.

    After :meth:`silence`, the connections relayed so far carry nothing either way and stay
    open, as a half-open connection behind a NAT or firewall does: no error, no data.
    Connections made afterwards are relayed as usual.
    """

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._silenced: set[socket.socket] = set()
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(self._upstream)
            self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if source not in self._silenced:
                    sink.sendall(data)
        except OSError:
            return

    def silence(self) -> None:
        self._silenced.update(self._open)

    def close(self) -> None:
        self._server.close()
        for sock in self._open:
            sock.close()


def test_a_listener_whose_connection_goes_silent_reconnects(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with postgres_schema(postgres_url) as url, open_store(url) as store:
        sid = store.create_session(NewSession()).id
        direct = parse_url(url)
        relay = _Relay(direct.host, direct.port)
        relayed = parse_url(
            url.replace(f"@{direct.host}:{direct.port}/", f"@127.0.0.1:{relay.port}/")
        )
        listener = Listener(relayed, heartbeat_s=0.2, lost_after_s=1.0)
        try:
            assert listener.wait(1.0) is None
            store.append(sid, {"type": "x"})
            assert listener.wait(5.0) == [sid]
            relay.silence()  # the LISTEN connection: no error, no notifications
            store.append(sid, {"type": "x"})
            deadline = time.monotonic() + 15
            with caplog.at_level(logging.WARNING, logger="agenttrail.log.store.postgres"):
                while (woken := listener.wait(0.2)) is not None:
                    assert woken == []  # the append's notification never arrives
                    assert time.monotonic() < deadline, "the silent connection went unnoticed"
            assert "LISTEN connection silent" in caplog.text
            store.append(sid, {"type": "x"})  # reconnected through the relay: heard again
            assert listener.wait(5.0) == [sid]
        finally:
            listener.close()
            relay.close()
