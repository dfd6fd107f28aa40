"""``GET /v1/search`` and the filters and pages of ``GET /v1/sessions``, through real uvicorn on
loopback, on each backend."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.server import create_app, mint_token
from tests.conftest import serving

SECRET = b"test-secret-not-for-production-0123456789abcdef"


@pytest.fixture
def api(db_url: str) -> Iterator[tuple[str, LogStore]]:
    store = open_store(db_url)
    try:
        with serving(create_app(store, secret=SECRET)) as port:
            yield f"http://127.0.0.1:{port}", store
    finally:
        store.close()


def _client(url: str, session: str = "*") -> httpx.Client:
    token = mint_token(SECRET, rights=["read"], session=session)
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _fill(store: LogStore, count: int) -> list[str]:
    """``count`` sessions, every third one of agent ``b`` with a failed tool result."""
    ids = []
    for i in range(count):
        sid = f"s{i:02d}"
        agent = "b" if i % 3 == 0 else "a"
        store.create_session(NewSession(sid, None, agent, None, None, f"2026-01-{i + 1:02d}"))
        payloads = [
            events.message("user", f"ЗАПРОС номер {i}"),
            events.tool_call("c", "sh", {"cmd": "ls"}),
            events.tool_result("c", output="", error="boom" if agent == "b" else None),
        ]
        store.append_batch(sid, [NewEvent(p) for p in payloads])
        ids.append(sid)
    return ids


def test_search_uses_the_index_and_takes_the_filters(api: tuple[str, LogStore]) -> None:
    url, store = api
    _fill(store, 4)
    with _client(url) as http:
        body = http.get("/v1/search", params={"q": "запрос"}).json()
        assert [m["session_id"] for m in body["sessions"]] == ["s00", "s01", "s02", "s03"]
        assert body["sessions"][2]["hits"][0]["snippet"] == "ЗАПРОС номер 2"
        errors = http.get("/v1/search", params={"q": "boom", "errors": "true"}).json()
        assert [m["session_id"] for m in errors["sessions"]] == ["s00", "s03"]
        by_tool = http.get("/v1/search", params={"q": "ls", "tool": "sh", "agent": "a"}).json()
        assert [(m["session_id"], m["hits"][0]["seq"]) for m in by_tool["sessions"]] == [
            ("s01", 2),
            ("s02", 2),
        ]
        bad = http.get("/v1/search", params={"q": "x", "since": "soon"})
        assert bad.status_code == 422 and "since" in bad.json()["detail"]
        # the events were written now: none until a day long past, all until today
        past = http.get("/v1/search", params={"q": "запрос", "until": "2000-01-01"}).json()
        assert past["sessions"] == []
        today = datetime.now(UTC).date().isoformat()
        upto = http.get("/v1/search", params={"q": "запрос", "until": today}).json()
        assert len(upto["sessions"]) == 4
        backwards = http.get("/v1/search", params={"q": "x", "since": today, "until": "2000-01-01"})
        assert backwards.status_code == 422 and "is after until" in backwards.json()["detail"]
    store.append("s01", events.message("assistant", "позже"))
    with _client(url, session="s01") as http:  # a token of one session finds only it
        assert [
            m["session_id"]
            for m in http.get("/v1/search", params={"q": "ПОЗЖЕ"}).json()["sessions"]
        ] == ["s01"]
        assert (
            http.get("/v1/search", params={"q": "номер"}).json()["sessions"][0]["session_id"]
            == "s01"
        )


def test_search_without_q_finds_what_the_filters_pick(api: tuple[str, LogStore]) -> None:
    url, store = api
    _fill(store, 4)
    with _client(url) as http:
        errors = http.get("/v1/search", params={"errors": "true"}).json()
        assert [(m["session_id"], [h["seq"] for h in m["hits"]]) for m in errors["sessions"]] == [
            ("s00", [3]),
            ("s03", [3]),
        ]
        by_tool = http.get("/v1/search", params={"tool": "SH", "agent": "a"}).json()
        assert [(m["session_id"], [h["seq"] for h in m["hits"]]) for m in by_tool["sessions"]] == [
            ("s01", [2, 3]),
            ("s02", [2, 3]),
        ]
        for params in ({}, {"q": " "}, {"agent": "a"}):
            blank = http.get("/v1/search", params=params)
            assert blank.status_code == 422, params
            assert "q is blank" in blank.json()["detail"]


def test_the_session_list_pages_with_a_next_link_and_filters(api: tuple[str, LogStore]) -> None:
    url, store = api
    ids = _fill(store, 7)
    with _client(url) as http:
        seen: list[str] = []
        link = "/v1/sessions?limit=3"
        while link:
            response = http.get(link)
            assert response.status_code == 200, response.text
            seen += [s["id"] for s in response.json()]
            link = response.links.get("next", {}).get("url", "")
        assert seen == ids
        assert len(http.get("/v1/sessions", params={"limit": 2}).json()) == 2
        assert len(http.get("/v1/sessions").json()) == 7
        errors = http.get("/v1/sessions", params={"errors": "true", "limit": 2})
        assert [s["id"] for s in errors.json()] == ["s00", "s03"]
        rest = http.get(errors.links["next"]["url"])
        assert [s["id"] for s in rest.json()] == ["s06"] and "next" not in rest.links
        dated = http.get("/v1/sessions", params={"since": "2026-01-03", "until": "2026-01-04"})
        assert [s["id"] for s in dated.json()] == ["s02", "s03"]
        assert [s["id"] for s in http.get("/v1/sessions", params={"agent": "b"}).json()] == [
            "s00",
            "s03",
            "s06",
        ]
        assert http.get("/v1/sessions", params={"limit": 0}).status_code == 422
        unknown = http.get("/v1/sessions", params={"after": "nope"})
        assert unknown.status_code == 422 and "nope" in unknown.json()["detail"]
