"""Every session a log can hold is reachable: over REST on a real uvicorn (the routes the
viewer calls, with the id escaped as its ``encodeURIComponent`` does) and with the CLI, on
both backends. Ids come from every real file of the corpus, from the edges of the id rule,
and from Hypothesis drawing ids from the rule (docs/log-format.md, Session ids)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail.log.store import LogStore, open_store
from agenttrail.server import create_app, mint_token
from tests.conftest import REALDATA, ROOT, run_cli, serving

SECRET = b"test-secret-not-for-production-0123456789abcdef"

RULE = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}"
"""The rule as docs/log-format.md words it, written out here rather than taken from the code."""

EDGES = ["0", "a..b", "a.", "Z:", "x" * 200, "a_b-c.d:e", "ae4a77f8-aedd-4bc1:agent-aac57f5"]


@pytest.fixture
def served(db_url: str) -> Iterator[tuple[LogStore, httpx.Client]]:
    """A store on each backend, and a client of a real server over it."""
    store = open_store(db_url)
    token = mint_token(SECRET, rights=["read", "append"], session="*")
    try:
        with (
            serving(create_app(store, secret=SECRET)) as port,
            httpx.Client(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            ) as http,
        ):
            yield store, http
    finally:
        store.close()


_UNESCAPED = "-_.!~*'()"


def _path(session_id: str, rest: str = "") -> str:
    # encodeURIComponent leaves A-Z a-z 0-9 - _ . ! ~ * ' ( ) as they are (ECMA-262).
    return f"/v1/sessions/{quote(session_id, safe=_UNESCAPED)}{rest}"


def _reachable(store: LogStore, http: httpx.Client, db_url: str, session_id: str) -> None:
    """The session answers over REST and with the CLI, with every event."""
    head = store.get_session(session_id).head_seq
    got = http.get(_path(session_id))
    assert got.status_code == 200, got.text
    assert got.json()["id"] == session_id
    page = http.get(_path(session_id, "/events"), params={"limit": 1000})
    assert page.status_code == 200, page.text
    assert len(page.json()["events"]) == head
    transcript = http.get(_path(session_id, "/transcript"))
    assert transcript.status_code == 200, transcript.text
    exported = run_cli("export", session_id, "--db", db_url)
    assert exported.returncode == 0, exported.stderr
    assert len(exported.stdout.splitlines()) == head
    shown = run_cli("show", session_id, "--db", db_url)
    assert shown.returncode == 0, shown.stderr


def test_every_imported_real_session_is_reachable(
    served: tuple[LogStore, httpx.Client], db_url: str
) -> None:
    store, http = served
    for path in sorted(p for p in REALDATA.rglob("*") if p.is_file()):
        run_cli("import", str(path), "--db", db_url)  # files of no format we read are refused
    sessions = store.sessions()
    assert len(sessions) >= 20
    for session in sessions:
        _reachable(store, http, db_url, session.id)


def test_ids_at_the_edges_of_the_rule_are_created_and_reached_over_rest(
    served: tuple[LogStore, httpx.Client], db_url: str
) -> None:
    store, http = served
    for session_id in EDGES:
        created = http.post("/v1/sessions", json={"id": session_id})
        assert created.status_code == 201, created.text
        appended = http.post(_path(session_id, "/events"), json={"payload": {"type": "x"}})
        assert appended.status_code == 201, appended.text
        _reachable(store, http, db_url, session_id)


@pytest.mark.parametrize("session_id", ["a/b", "..", ".", "-rf", "a b", "é", "x" * 201])
def test_an_id_outside_the_rule_is_a_422_naming_the_id_and_the_rule(
    served: tuple[LogStore, httpx.Client], session_id: str
) -> None:
    store, http = served
    refused = http.post("/v1/sessions", json={"id": session_id})
    assert refused.status_code == 422
    detail = refused.json()["detail"]
    assert repr(session_id) in detail and "does not follow the id rule" in detail
    assert store.sessions() == []


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(session_id=st.from_regex(RULE, fullmatch=True))
def test_any_id_the_rule_admits_is_reachable(
    served: tuple[LogStore, httpx.Client], db_url: str, session_id: str
) -> None:
    store, http = served
    if session_id not in {s.id for s in store.sessions()}:
        created = http.post("/v1/sessions", json={"id": session_id})
        assert created.status_code == 201, created.text
    _reachable(store, http, db_url, session_id)


def test_the_rule_here_is_the_rule_the_docs_give() -> None:
    # The pattern above is written from docs/log-format.md; check the docs still say it.
    docs = " ".join((ROOT / "docs" / "log-format.md").read_text(encoding="utf-8").split())
    assert "1 to 200 characters of A-Z a-z 0-9 . _ : -, starting with a letter or a digit" in docs
