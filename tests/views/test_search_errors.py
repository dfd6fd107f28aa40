"""``--errors``: what it picks is what every view marks as a failure (an ``error`` event, and a
tool result or shell command that failed by ``agenttrail.model.tool_status``), on both
backends; the upgrade of a log indexed by schema version 5, whose rows missed failed shell
commands and results that say ``error:`` (schema/*-0006.sql); and the sample session's
failed ``go build``, found through the CLI."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from agenttrail.ingest.sample import record_sample
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewSession, events
from agenttrail.model.search import SearchFilter
from agenttrail.views.search import bring_up_to_date, search
from tests.conftest import owner_connection, run_cli

# Events written for this test; the failures were picked by hand, by the rule the views mark
# them by (docs/specs.md, W1): an error field, a non-zero exit code, is_error true, or output
# that begins "error:".
SESSION = [
    events.tool_call("c1", "run", {"cmd": "make"}),  # 1
    events.tool_result("c1", output="error: no rule to make target 'all'"),  # 2 failed
    events.tool_call("c2", "run", {"cmd": "ls /gone"}),  # 3
    # 4 failed: its flag says ok, its exit code says failed
    {
        **events.tool_result("c2", output="ls: /gone: no such file"),
        "exit_code": 2,
        "is_error": False,
    },
    events.tool_call("c3", "run", {"cmd": "date"}),  # 5
    events.tool_result("c3", output="Sat Dec  5 20:00:00 UTC 2026", exit_code=0),  # 6 ok
    events.shell("go build ./...", "./main.go:3:1: undefined: foo", 1),  # 7 failed
    events.shell("go vet ./...", "", 0),  # 8 ok
    events.error("model overloaded"),  # 9
    events.tool_call("c4", "read", {"path": "a.txt"}),  # 10
    events.tool_result("c4", output="", error="permission denied"),  # 11 failed
    events.tool_call("c5", "read", {"path": "b.txt"}),  # 12
    events.tool_result("c5", output="the errors: none"),  # 13 ok: not at its start
]
FAILED = [2, 4, 7, 9, 11]


def _errors(store: LogStore) -> dict[str, list[int]]:
    where = SearchFilter(errors=True)
    found = search(store, "", store.sessions(), where=where, hits_per_session=50)
    return {m.session_id: [h.seq for h in m.hits] for m in found}


def _write(store: LogStore) -> None:
    store.create_session(NewSession("s"))
    for payload in SESSION:
        store.append("s", payload)
    store.create_session(NewSession("only-a-shell"))
    store.append("only-a-shell", events.shell("make", "make: *** [all] Error 2", 2))
    store.append("only-a-shell", events.message("user", "why?"))


def test_errors_are_what_the_views_mark_as_failed(store: LogStore) -> None:
    _write(store)
    assert _errors(store) == {"s": FAILED, "only-a-shell": [1]}
    assert store.flagged_sessions(errors=True) == {"s", "only-a-shell"}


def test_a_log_indexed_by_schema_version_5_is_indexed_again(db_url: str, backend: str) -> None:
    with open_store(db_url) as store:
        _write(store)
        bring_up_to_date(store)
    # Back to what schema version 5 indexed: the same rows, without the failures its rule
    # (a result's own is_error, error field or exit code, in that order; never a shell
    # command) did not see.
    unflag = "UPDATE search_events SET error = 0 WHERE session_id = 's' AND seq IN (2, 4, 7)"
    older = "UPDATE search_events SET error = 0 WHERE session_id = 'only-a-shell'"
    if backend == "sqlite":
        with closing(sqlite3.connect(db_url)) as raw:
            raw.execute(unflag)
            raw.execute(older)
            raw.execute("PRAGMA user_version = 5")
            raw.commit()
    else:
        with owner_connection(db_url) as raw:
            raw.execute(unflag)
            raw.execute(older)
            raw.execute("DELETE FROM agenttrail_schema WHERE version = 6")
    with open_store(db_url, create=False) as store:  # migrates: the index is made anew
        assert _errors(store) == {"s": FAILED, "only-a-shell": [1]}
    if backend == "sqlite":
        with closing(sqlite3.connect(db_url)) as raw:
            assert raw.execute("PRAGMA user_version").fetchone() == (6,)
    else:
        with owner_connection(db_url) as raw:
            assert raw.execute("SELECT max(version) FROM agenttrail_schema").fetchone() == (6,)


def test_the_sample_sessions_failed_build_is_found_by_the_cli(tmp_path: Path) -> None:
    # ingest/sample.py records `go build ./...` exiting 1, the scene the README's quick start
    # shows as a failure; `search --errors` did not find it.
    db = str(tmp_path / "log.db")
    with open_store(db) as store:
        session_id = record_sample(store)
    result = run_cli("search", "--errors", "--json", "--db", db)
    assert result.returncode == 0, result.stderr
    (match,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert match["session_id"] == session_id
    shells = [hit for hit in match["hits"] if hit["type"] == "shell"]
    assert len(shells) == 1 and "go build" in shells[0]["snippet"]
