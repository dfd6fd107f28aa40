"""``GET /v1/summaries``, read a page of sessions at a time from one snapshot
(``agenttrail.log.store._snapshot``), answers what ``GET …/summary`` answers for each
session, on both backends: for real imported sessions, a session with trace rows, keys, an
erasure, an agent turn in flight, an empty one, and sessions whose rows were changed by hand.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import SNAPSHOT_EVENTS, SNAPSHOT_SESSIONS, LogStore, open_store
from agenttrail.model import NewEvent, NewSession
from agenttrail.server import create_app, mint_token
from tests.conftest import REALDATA, serving
from tests.loan_session import SESSION_ID, record_loan_session
from tests.log.test_chain import _attack

SECRET = b"summaries-test-secret-0123456789abcdef0123456789"
REAL = [
    REALDATA / "claude-code-spotter" / "tool_heavy.jsonl",
    REALDATA / "claude-code-spotter" / "agent-aac57f5.jsonl",
    REALDATA / "harvey" / "rec-tools.spmd",
    REALDATA / "harvey" / "rec-agentscene.spmd",
    REALDATA / "inspect_ai" / "log_tool_call_error.json",
    REALDATA / "langfuse-framework-traces" / "pydantic-ai-tools-2025-12-04.json",
    REALDATA / "toolbench" / "10_ChatGPT_DFS_woFilter_w2.json",
]


@pytest.fixture
def store(db_url: str) -> Iterator[LogStore]:
    with open_store(db_url) as opened:
        yield opened


def _served(store: LogStore) -> Iterator[httpx.Client]:
    token = mint_token(SECRET, rights=["read"])
    with serving(create_app(store, secret=SECRET)) as port:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as http:
            yield http


def _each(http: httpx.Client, ids: list[str]) -> list[dict[str, Any]]:
    """The summary of each session, one ``…/summary`` request each, with its id."""
    found = []
    for sid in ids:
        answer = http.get(f"/v1/sessions/{sid}/summary")
        assert answer.status_code == 200, answer.text
        found.append({"id": sid, **answer.json()})
    return found


def test_the_list_is_each_sessions_summary(store: LogStore, db_url: str) -> None:
    imported = [report.session_id for report in import_paths(store, REAL)]
    assert len(imported) == len(REAL)
    record_loan_session(store)  # trace rows
    assert store.traces(SESSION_ID)
    keyed = store.create_session(NewSession("keyed")).id
    store.append_batch(keyed, [NewEvent({"type": "x", "i": i}, key=f"k{i}") for i in range(3)])
    erased = store.create_session(NewSession("erased")).id
    store.append_batch(erased, [NewEvent({"type": "message", "role": "user", "content": "pw"})])
    store.erase(erased, [1], by="admin", reason="a secret")
    store.acquire_turn(imported[0], turn_id="t1", holder="agent", ttl_s=600)  # live
    store.create_session(NewSession("empty"))
    # Rows changed by hand: a payload (the chain breaks), a trace row (its chain breaks), a key.
    for sid in ("bad-payload", "bad-trace", "bad-key"):
        record_loan_session(store, sid)
    _attack(
        db_url,
        "UPDATE session_events SET created_at = '2020-01-01T00:00:00.000000Z' "
        "WHERE session_id = 'bad-payload' AND seq = 3",
        "UPDATE trace_rows SET tool = 'other' WHERE session_id = 'bad-trace'",
        "UPDATE session_event_keys SET seq = seq + 1 WHERE session_id = 'bad-key'",
    )
    ids = [s.id for s in store.sessions()]
    for http in _served(store):
        listed = http.get("/v1/summaries")
        assert listed.status_code == 200
        summaries = listed.json()["summaries"]
        assert summaries == _each(http, ids)
    by_id = {s["id"]: s for s in summaries}
    assert by_id[imported[0]]["live"] is True
    assert by_id[SESSION_ID]["chain"]["ok"] is True
    assert by_id["bad-payload"]["chain"]["bad_seq"] == 3
    assert by_id["bad-trace"]["chain"]["trace_problems"]
    assert by_id["bad-key"]["chain"]["trace_problems"]  # the key chain's problem
    assert by_id["erased"]["chain"]["erased"] == [1]
    assert by_id["empty"]["events"] == 0


def test_sessions_past_a_page_are_listed_in_order(store: LogStore) -> None:
    for i in range(SNAPSHOT_SESSIONS + 2):
        sid = f"s{i:04d}"
        store.append_batch(
            sid, [NewEvent({"type": "x", "i": i})] * (1 + i % 2), create=NewSession(sid)
        )
    ids = [s.id for s in store.sessions()]
    for http in _served(store):
        summaries = http.get("/v1/summaries").json()["summaries"]
        assert [s["id"] for s in summaries] == ids
        edge = slice(SNAPSHOT_SESSIONS - 2, SNAPSHOT_SESSIONS + 2)  # both sides of the page
        assert summaries[edge] == _each(http, ids[edge])


def test_long_sessions_are_paged_by_events(store: LogStore) -> None:
    """Pages are cut at ``SNAPSHOT_EVENTS`` events too, and a session longer than that is
    read from the store itself: the list still answers each session's summary, in order."""
    half = SNAPSHOT_EVENTS // 2 + 1
    for sid, length in (("a", 1), ("b", half), ("c", half), ("d", SNAPSHOT_EVENTS + 1), ("e", 2)):
        said = [
            NewEvent({"type": "message", "role": "user", "content": f"{sid} {i}"})
            for i in range(length)
        ]
        store.append_batch(sid, said, create=NewSession(sid))
    ids = [s.id for s in store.sessions()]
    for http in _served(store):
        summaries = http.get("/v1/summaries").json()["summaries"]
        assert summaries == _each(http, ids)
    assert {s["id"]: s["events"] for s in summaries}["d"] == SNAPSHOT_EVENTS + 1
