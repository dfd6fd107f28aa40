"""``--tool``: a tool's calls and its results, on real sessions whose results name only their
call's id, on both backends; and the upgrade of a log indexed by schema version 4, whose rows
left such results without a tool (schema/*-0005.sql)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from importlib import resources
from pathlib import Path

import pytest

from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore, open_store
from agenttrail.log.store.sqlite import SCHEMA_VERSION
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.model.search import SearchFilter
from agenttrail.views.search import bring_up_to_date, index_row, search
from tests.conftest import REALDATA, owner_connection, run_cli

# marot/spotter test/fixtures/transcripts/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/
# agent-aac57f5.jsonl (the real data's SOURCES.md): a Claude Code sub-agent's session of 6
# WebSearch and 6 WebFetch calls, whose tool_result blocks carry only tool_use_id.
AGENT = REALDATA / "claude-code-spotter" / "agent-aac57f5.jsonl"


def _expected(path: Path, tool: str, query: str) -> tuple[int, int]:
    """(calls, results) of ``tool`` in a Claude Code transcript whose visible text holds the
    ASCII ``query`` (any case): read from the file's JSON here, not through agenttrail. A call
    shows its name and its input as JSON; a result its content's text."""
    calls = results = 0
    names: dict[str, str] = {}
    for line in path.read_text("utf-8").splitlines():
        message = json.loads(line).get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
                shown = block["name"] + " " + json.dumps(block["input"], ensure_ascii=False)
                calls += block["name"] == tool and query in shown.lower()
            elif block.get("type") == "tool_result" and names.get(block["tool_use_id"]) == tool:
                assert "name" not in block  # the case this test is about
                content = block["content"]
                text = (
                    content
                    if isinstance(content, str)
                    else " ".join(part.get("text", "") for part in content)
                )
                results += query in text.lower()
    return calls, results


def _found(store: LogStore, query: str, tool: str) -> tuple[int, int]:
    """(calls, results) that search finds for ``query`` with ``--tool``."""
    where = SearchFilter(tool=tool)
    (match,) = search(store, query, store.sessions(), where=where, hits_per_session=100)
    kinds = [hit.type for hit in match.hits]
    assert match.total == len(kinds)
    return kinds.count("tool_call"), kinds.count("tool_result")


@pytest.mark.parametrize(
    ("tool", "query"),
    [
        ("WebSearch", "version"),
        ("WebFetch", "version"),
        ("WebFetch", "ve"),
        ("WebSearch", "20"),
        ("WebSearch", "hex"),
    ],
)
def test_a_tools_results_are_found_with_its_calls(store: LogStore, tool: str, query: str) -> None:
    import_paths(store, [AGENT])
    calls, results = _expected(AGENT, tool, query)
    assert calls > 0 and results > 0
    assert _found(store, query, tool) == (calls, results)


def test_a_result_is_named_by_its_call_indexed_by_an_earlier_search(store: LogStore) -> None:
    store.create_session(NewSession("s"))
    store.append("s", events.tool_call("c1", "grep", {"pattern": "zebra"}))
    assert bring_up_to_date(store) == 1  # the call indexed alone
    store.append_batch(
        "s",
        [
            NewEvent(events.tool_result("c1", output="zebra found")),
            NewEvent(events.tool_call("c2", "read_file", {"path": "zebra.txt"})),
            NewEvent(events.tool_result("c2", output="a zebra")),
            NewEvent(events.tool_result("c9", "cat", output="zebra, named by itself")),
        ],
    )
    assert _found(store, "zebra", "grep") == (1, 1)
    assert _found(store, "zebra", "read_file") == (1, 1)
    assert _found(store, "zebra", "cat") == (0, 1)  # no call c9: its own name


def _index_as_version_4(db_url: str, backend: str, store: LogStore) -> None:
    """Put back the index as schema version 4 made it (its tables from *-0003.sql) and fill it
    as agenttrail indexed before version 5: a tool result's tool from its own ``name``."""
    rows = []
    for session in store.sessions():
        for event in store.read(session.id):
            row = index_row(event)  # before a batch's results are named by their calls
            values = (session.id, row.seq, row.created_at, row.type, row.actor, row.tool)
            rows.append((*values, int(row.error), row.model, row.message_id, row.text, row.folded))
    assert all(r[5] is None for r in rows if r[3] == "tool_result")  # what --tool missed
    marks = [(s.id, s.head_seq) for s in store.sessions()]
    old = resources.files("agenttrail.log.store").joinpath(
        f"schema/{'sqlite' if backend == 'sqlite' else 'postgres'}-0003.sql"
    )
    insert = (
        "INSERT INTO search_events (session_id, seq, created_at, type, actor, tool, error, "
        "model, message_id, text, folded) VALUES ({})"
    )
    if backend == "sqlite":
        with closing(sqlite3.connect(db_url)) as raw:
            raw.executescript(
                "DROP TABLE search_grams; DROP TABLE search_text; DROP TABLE search_events; "
                "DROP TABLE search_marks;" + old.read_text("utf-8")
            )
            raw.executemany(insert.format(", ".join("?" * 11)), rows)
            raw.executemany("INSERT INTO search_marks VALUES (?, ?)", marks)
            raw.execute("PRAGMA user_version = 4")
            raw.commit()
        return
    with owner_connection(db_url) as raw:
        raw.execute("DROP TABLE search_events, search_marks")
        raw.execute("DROP FUNCTION agenttrail_grams")
        raw.execute(old.read_text("utf-8"))
        raw.cursor().executemany(insert.format(", ".join(["%s"] * 11)), rows)
        raw.cursor().executemany("INSERT INTO search_marks VALUES (%s, %s)", marks)
        raw.execute("DELETE FROM agenttrail_schema WHERE version >= 5")


def test_a_log_indexed_by_schema_version_4_is_upgraded_and_its_results_found(
    db_url: str, backend: str
) -> None:
    with open_store(db_url) as store:
        import_paths(store, [AGENT])
        _index_as_version_4(db_url, backend, store)
    calls, results = _expected(AGENT, "WebSearch", "version")
    with open_store(db_url, create=False) as store:  # migrates: the index is made anew
        assert _found(store, "version", "WebSearch") == (calls, results)
        assert _found(store, "ve", "WebFetch") == _expected(AGENT, "WebFetch", "ve")
    if backend == "sqlite":
        with closing(sqlite3.connect(db_url)) as raw:
            assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    else:
        with owner_connection(db_url) as raw:
            assert raw.execute("SELECT max(version) FROM agenttrail_schema").fetchone() == (
                SCHEMA_VERSION,
            )


def test_the_cli_finds_a_tools_calls_and_results(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    with open_store(db) as store:
        import_paths(store, [AGENT])
    result = run_cli(
        "search", "version", "--tool", "WebSearch", "--hits", "50", "--json", "--db", db
    )
    assert result.returncode == 0, result.stderr
    (match,) = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [hit["type"] for hit in match["hits"]]
    assert (kinds.count("tool_call"), kinds.count("tool_result")) == _expected(
        AGENT, "WebSearch", "version"
    )
