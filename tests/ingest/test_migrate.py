"""``agenttrail migrate``: SQLite → PostgreSQL → SQLite with every chain intact.

What must survive a copy: each session row (fields, ``created_at``, head), each event (seq,
``created_at``, payload bytes, hash), idempotency keys, trace rows (all but their id, which
the target assigns) and tombstones; ``verify`` passes on the target.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from agenttrail import Recorder
from agenttrail.errors import ChainBroken, InputError, SessionExists
from agenttrail.ingest.migrate import migrate
from agenttrail.ingest.sample import record_sample
from agenttrail.log.chain import verify
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.views.search import search
from tests.conftest import (
    owner_connection,
    postgres_schema,
    run_cli,
    session_made_before_the_id_rule,
)
from tests.evidence.test_traces import _session as loan_session


def _fill(store: LogStore) -> None:
    record_sample(store)
    loan_session(store)
    rec = Recorder.start(store, session_id="hard-e", title="t", user="ana", workspace="/w")
    rec.append(events.message("user", "café \udc81 done"), key="client-1")
    rec.append(events.tool_result("c", "read_file", output="x" * (512 * 1024)))
    store.append_batch("hard-e", [NewEvent({"kind": "unknown"}, "2020-01-01T00:00:00.000000Z")])
    store.create_session(NewSession(id="empty", metadata={"k": [1, "ü"]}))
    Recorder.start(store, session_id="gone").append(events.message("user", "bye"))
    store.remove_session("gone", reason="records schedule R-7")


def _contents(store: LogStore) -> dict[str, Any]:
    """Everything a copy must keep, keyed for comparison (trace ids left out)."""
    return {
        "sessions": [dataclasses.astuple(s) for s in store.sessions()],
        "events": {s.id: list(store.read_rows(s.id)) for s in store.sessions()},
        "keys": {s.id: store.event_keys(s.id) for s in store.sessions()},
        "traces": {
            s.id: [dataclasses.replace(t, id=0) for t in store.traces(s.id)]
            for s in store.sessions()
        },
        "tombstones": [dataclasses.astuple(t) for t in store.tombstones()],
    }


def test_sqlite_to_postgresql_and_back_keeps_every_chain(tmp_path: Path, postgres_url: str) -> None:
    source, back = str(tmp_path / "a.db"), str(tmp_path / "back.db")
    with open_store(source) as store:
        _fill(store)
        original = _contents(store)
    with postgres_schema(postgres_url) as pg:
        there = run_cli("migrate", "--from", source, "--to", pg)
        assert there.returncode == 0, there.stderr
        copied = sum(len(rows) for rows in original["events"].values())
        assert f"4 sessions: {copied} events and 1 tombstone copied" in there.stderr
        assert all(line.startswith("ok    ") for line in there.stdout.splitlines())
        assert run_cli("verify", "--db", pg).returncode == 0
        with open_store(pg, create=False) as store:
            assert _contents(store) == original
        with owner_connection(pg) as conn:  # the very bytes, not an equal re-encoding
            row = conn.execute(
                "SELECT payload, hash, salt, digest FROM session_events "
                "WHERE session_id = 'hard-e' AND seq = 1"
            ).fetchone()
        assert row == original["events"]["hard-e"][0][2:]
        again = run_cli("migrate", "--from", source, "--to", pg)  # nothing new: nothing copied
        assert again.returncode == 0
        assert "4 sessions: 0 events and 0 tombstones copied" in again.stderr
        assert "ok    hard-e  0 of 3 events copied, 0 trace rows" in again.stdout
        home = run_cli("migrate", "--from", pg, "--to", back)
        assert home.returncode == 0, home.stderr
    assert run_cli("verify", "--db", back).returncode == 0
    with open_store(back) as store:
        assert _contents(store) == original
        with pytest.raises(SessionExists):  # a removed id stays removed
            store.create_session(NewSession(id="gone"))


def test_a_second_run_copies_only_the_new_events(db_url: str, tmp_path: Path) -> None:
    source = str(tmp_path / "a.db")
    with open_store(source) as src, open_store(db_url) as dst:
        rec = Recorder.start(src, session_id="s")
        rec.append(events.message("user", "one"))
        first = migrate(src, dst)
        assert [(m.session_id, m.events, m.head_seq, m.ok) for m in first.sessions] == [
            ("s", 1, 1, True)
        ]
        rec.append(events.message("assistant", "two"), key="k2")
        rec.append(events.message("user", "three"))
        second = migrate(src, dst)
        assert [(m.events, m.head_seq) for m in second.sessions] == [(2, 3)]
        assert list(dst.read_rows("s")) == list(src.read_rows("s"))
        assert dst.event_keys("s") == [("k2", 2)]
        dst.append("s", events.message("assistant", "only on the target"))
        with pytest.raises(InputError, match="the target has 4 events, the source only 3"):
            migrate(src, dst)


def test_an_erasure_after_an_earlier_copy_reaches_the_copy(db_url: str, tmp_path: Path) -> None:
    # a new user's finding: the second run copied the erasure event but left the erased
    # payload in the copy, which then failed verify for good
    source = str(tmp_path / "a.db")
    with open_store(source) as src, open_store(db_url) as dst:
        rec = Recorder.start(src, session_id="s")
        rec.append(events.message("user", "my card is 4111 1111 1111 1111, zebra"))
        rec.append(events.message("assistant", "noted"))
        assert migrate(src, dst).ok
        assert search(dst, "zebra", dst.sessions())  # indexed on the target
        src.erase("s", [1], by="ana", reason="a card number")
        again = migrate(src, dst)
        assert [(m.events, m.head_seq, m.problem) for m in again.sessions] == [(1, 3, None)]
        assert list(dst.read_rows("s")) == list(src.read_rows("s"))
        assert dst.erasures("s") == src.erasures("s") == [(1, 3)]
        assert search(dst, "zebra", dst.sessions()) == []
        (verdict,) = verify(dst, ["s"])
        assert verdict.ok


def test_a_session_removed_from_the_source_after_a_copy_is_refused_before_any_copy(
    db_url: str, tmp_path: Path
) -> None:
    source = str(tmp_path / "a.db")
    with open_store(source) as src, open_store(db_url) as dst:
        Recorder.start(src, session_id="old").append(events.message("user", "one"))
        assert migrate(src, dst).ok
        src.remove_session("old", reason="records schedule R-7")
        Recorder.start(src, session_id="new").append(events.message("user", "two"))
        with pytest.raises(InputError, match=r"session old was removed from .* by retention"):
            migrate(src, dst)
        assert dst.head("new") is None  # nothing was copied
        dst.remove_session("old", reason="records schedule R-7")
        assert [m.session_id for m in migrate(src, dst).sessions] == ["new"]


def test_a_session_that_differs_on_the_target_is_refused(db_url: str, tmp_path: Path) -> None:
    with open_store(tmp_path / "a.db") as src, open_store(db_url) as dst:
        src.create_session(NewSession(id="s"))
        dst.create_session(NewSession(id="s"))
        src.append("s", {"type": "x", "n": 1})
        src.append("s", {"type": "x", "n": 2})
        dst.append("s", {"type": "x", "n": 9})
        with pytest.raises(InputError, match="differs from the source's at seq 1"):
            migrate(src, dst)
        assert [e.payload["n"] for e in dst.read("s")] == [9]
        with pytest.raises(InputError, match="the same database"):
            migrate(dst, dst)


def test_a_broken_source_chain_is_not_copied(db_url: str, tmp_path: Path) -> None:
    from tests.log.test_chain import _attack

    source = tmp_path / "a.db"
    with open_store(source) as src:
        Recorder.start(src, session_id="s").append(events.message("user", "one"))
        src.append("s", events.message("user", "two"))
    _attack(source, "UPDATE session_events SET payload = ? WHERE seq = 2", params=(b"\xa0",))
    with open_store(source) as src, open_store(db_url) as dst:
        with pytest.raises(ChainBroken, match="seq 2: payload does not match its digest"):
            migrate(src, dst)
        assert dst.sessions() == []  # nothing of the session is written
    result = run_cli("migrate", "--from", str(source), "--to", db_url)
    assert result.returncode == 1
    broken = "session s: chain broken at seq 2: payload does not match its digest (on the source)"
    assert result.stderr == f"error: {broken}\n"


def test_a_source_changed_after_an_earlier_copy_is_refused(db_url: str, tmp_path: Path) -> None:
    # The target already holds every event, so nothing would be copied: the source's own
    # chain is what shows the change.
    from tests.log.test_chain import _attack

    source = tmp_path / "a.db"
    with open_store(source) as src:
        Recorder.start(src, session_id="s").append(events.message("user", "one"))
        src.append("s", events.message("user", "two"))
        src.append("s", events.message("user", "three"))
    assert run_cli("migrate", "--from", str(source), "--to", db_url).returncode == 0
    _attack(source, "UPDATE session_events SET payload = ? WHERE seq = 2", params=(b"\xa0",))
    result = run_cli("migrate", "--from", str(source), "--to", db_url)
    assert result.returncode == 1
    assert result.stderr.startswith("error: session s: chain broken at seq 2: ")
    with open_store(db_url) as dst:
        assert [v.ok for v in verify(dst)] == [True]


def test_a_session_made_before_the_id_rule_is_refused_before_anything_is_copied(
    db_url: str, tmp_path: Path
) -> None:
    # Its chain hashes cover its id, so it cannot be created on the target under another;
    # docs/log-format.md, Session ids. It stays readable and verifiable where it is.
    source = str(tmp_path / "old.db")
    with open_store(source) as store:
        record_sample(store)
        session_made_before_the_id_rule(source, "team/run 1")
        store.append("team/run 1", events.message("user", "hi"))
    result = run_cli("migrate", "--from", source, "--to", db_url)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: session id 'team/run 1' does not follow the id rule: ")
    assert line.endswith("nothing was copied)")
    with open_store(db_url) as target:
        assert target.sessions() == []
    assert run_cli("verify", "--db", source).returncode == 0
