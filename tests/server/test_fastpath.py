"""The fast path of ingest (``agenttrail.server.fastpath``) answers ``POST …/events`` as the
whole stack does: the same status, headers and body, for good requests and for every kind of
refusal (the guard's, the route's, the store's), on both backends.

Two apps over one store, each on a real uvicorn on loopback: the app ``create_app`` builds,
and the same app with the fast path taken out, so that its requests go through the security
headers, CORS, the guard, Starlette and FastAPI to the route. Each request is sent to both;
a request that appends goes to two sessions with the same history, one per app.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewSession
from agenttrail.server import create_app, mint_token
from agenttrail.server.fastpath import AppendFastPath
from tests.conftest import serving

SECRET = b"fastpath-test-secret-0123456789abcdef0123456789ab"
CAP = 16 * 1024
"""The body cap of both apps (bytes)."""
PAYLOAD_LIMIT = 4096
"""The store's payload limit (bytes), below the cap: a body can pass the guard and still
hold a payload the store refuses."""
ALLOWED = "https://app.example"


@dataclass
class Pair:
    """The two apps over one store: ``fast`` (as built) and ``stack`` (no fast path)."""

    fast: str
    stack: str
    store: LogStore


@pytest.fixture
def pair(db_url: str) -> Iterator[Pair]:
    with open_store(db_url, max_payload_bytes=PAYLOAD_LIMIT) as store:
        fast = create_app(store, secret=SECRET, max_body_bytes=CAP, allowed_origins=[ALLOWED])
        stack = create_app(store, secret=SECRET, max_body_bytes=CAP, allowed_origins=[ALLOWED])
        assert fast.user_middleware[0].cls is AppendFastPath  # outermost, as built
        stack.user_middleware = [m for m in stack.user_middleware if m.cls is not AppendFastPath]
        assert len(stack.user_middleware) == len(fast.user_middleware) - 1
        with serving(fast) as fast_port, serving(stack) as stack_port:
            yield Pair(f"http://127.0.0.1:{fast_port}", f"http://127.0.0.1:{stack_port}", store)


def _token(rights: str = "read,append", session: str = "*", ttl_s: float = 3600) -> str:
    return mint_token(SECRET, rights=rights.split(","), session=session, ttl_s=ttl_s)


def _post(base: str, sid: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{base}/v1/sessions/{sid}/events", content=body, headers=headers)


def _seen(response: httpx.Response) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """What a client sees: status, every header in order but the date, the body."""
    headers = [(k.lower(), v) for k, v in response.headers.raw if k.lower() != b"date"]
    return response.status_code, headers, response.content


def _same(pair: Pair, sid: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    """Send one request that appends nothing to both apps; assert the answers are equal."""
    fast = _post(pair.fast, sid, body, headers)
    assert _seen(fast) == _seen(_post(pair.stack, sid, body, headers))
    return fast


def _appends(pair: Pair, sids: tuple[str, str], body: bytes, headers: dict[str, str]) -> Any:
    """Send one appending request to each app, each to its own session of the same history;
    assert the answers are equal but for the chain's head (the sessions' chains differ), and
    that each names its session's head. Returns the fast path's answer."""
    fast = _post(pair.fast, sids[0], body, headers)
    stack = _post(pair.stack, sids[1], body, headers)
    if fast.status_code != 201:
        assert _seen(fast) == _seen(stack)
        return fast.json()
    answers = []
    for response, sid in ((fast, sids[0]), (stack, sids[1])):
        answer = response.json()
        if answer["seqs"]:
            head = pair.store.head(sid)
            assert head is not None and answer["head"] == head[1].hex()
        answers.append({**answer, "head": "-"})
    assert answers[0] == answers[1]
    assert _seen(fast)[:2] == _seen(stack)[:2]  # the heads are of equal length
    return fast.json()


def _json(auth: str | None = None, **more: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", **more}
    if auth is not None:
        headers["Authorization"] = f"Bearer {auth}"
    return headers


def test_good_appends_are_answered_alike(pair: Pair) -> None:
    sids = ("fast", "stack")
    for sid in sids:
        pair.store.create_session(NewSession(sid))
    auth = _json(_token())
    one = json.dumps({"payload": {"type": "message", "role": "user", "content": "hi"}}).encode()
    assert _appends(pair, sids, one, auth)["seqs"] == [1]
    batch = {
        "events": [
            {"payload": {"type": "x", "i": i}, "key": f"k{i}", "created_at": None} for i in range(3)
        ]
    }
    answer = _appends(pair, sids, json.dumps(batch).encode(), auth)
    assert (answer["seqs"], answer["duplicates"]) == ([2, 3, 4], [False] * 3)
    again = _appends(pair, sids, json.dumps(batch).encode(), auth)  # idempotency keys
    assert (again["seqs"], again["duplicates"]) == ([2, 3, 4], [True] * 3)
    assert _appends(pair, sids, b'{"events": []}', auth) == {
        "seqs": [],
        "duplicates": [],
        "head": None,
    }
    # Bodies pydantic's JSON parser refuses but json.loads accepts, as before.
    bom = b"\xef\xbb\xbf" + json.dumps({"payload": {"type": "x", "t": "bom"}}).encode()
    assert _appends(pair, sids, bom, auth)["seqs"] == [5]
    big = b'{"payload": {"type": "x", "big": 123456789012345678901234567890, "f": 1e-400}}'
    assert _appends(pair, sids, big, auth)["seqs"] == [6]
    for odd in (b"NaN", b"1e400"):  # JSON's parsers take them, the store does not
        refused = b'{"payload": {"type": "x", "n": %s}}' % odd
        assert _appends(pair, sids, refused, auth)["status"] == 422
    # A browser's request (it has an Origin) goes through the stack on both: CORS answers it.
    allowed = _appends(pair, sids, one, _json(_token(), Origin=ALLOWED))
    assert allowed["seqs"] == [7]
    for base, sid in ((pair.fast, "fast"), (pair.stack, "stack")):
        cors = _post(base, sid, one, _json(_token(), Origin=ALLOWED))
        assert cors.headers["access-control-allow-origin"] == ALLOWED
    for a, b in zip(pair.store.read("fast"), pair.store.read("stack"), strict=True):
        assert (a.seq, a.payload) == (b.seq, b.payload)


def test_refusals_are_answered_alike(pair: Pair) -> None:
    pair.store.create_session(NewSession("s"))
    good = json.dumps({"payload": {"type": "x"}}).encode()
    cases: list[tuple[bytes, dict[str, str], int, str]] = [
        (good, _json(), 401, "a bearer token is required"),
        (b"not json at all", _json(), 401, "a bearer token is required"),
        (good, _json("not.a.token"), 401, "the token is not valid"),
        (good, _json(_token(ttl_s=-10)), 401, "the token has expired"),
        (good, _json(_token("read")), 403, "does not grant 'append'"),
        (good, _json(_token(session="other")), 403, "scoped to session 'other'"),
        (b"{not json", _json(_token()), 422, "field body: JSON decode error"),
        (b'"\\ud800"', _json(_token()), 422, "field body: Input should be"),
        (b'{"payload": {"type": "x"}} trailing', _json(_token()), 422, "JSON decode error"),
        (b'{"payload": 5}', _json(_token()), 422, "field payload: Input should be"),
        (b'{"payload": {}, "extra": 1}', _json(_token()), 422, "field extra: Extra inputs"),
        (b'{"events": [{"key": "k"}]}', _json(_token()), 422, "field events.0.payload"),
        (b"{}", _json(_token()), 422, "field payload: give a payload or a list of events"),
        (b'{"payload": {"type": "x"}, "key": 7}', _json(_token()), 422, "field key"),
        (b"x" * (CAP + 1), _json(_token()), 413, f"{CAP:,} bytes"),
        (
            json.dumps({"payload": {"type": "x", "t": "a" * PAYLOAD_LIMIT}}).encode(),
            _json(_token()),
            413,
            f"{PAYLOAD_LIMIT:,} bytes",
        ),
    ]
    for body, headers, status, detail in cases:
        answer = _same(pair, "s", body, headers)
        assert answer.status_code == status, (body[:40], answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
        assert detail in answer.json()["detail"], (body[:40], answer.text)
        assert answer.headers["x-frame-options"] == "DENY"
    assert _same(pair, "nobody", good, _json(_token())).status_code == 404
    # A body without a Content-Length, counted as it streams in.
    streamed = [
        httpx.post(
            f"{base}/v1/sessions/s/events",
            content=iter([b"x" * 4096] * 5),
            headers=_json(_token()),
        )
        for base in (pair.fast, pair.stack)
    ]
    assert streamed[0].request.headers["transfer-encoding"] == "chunked"
    assert _seen(streamed[0]) == _seen(streamed[1])
    assert (streamed[0].status_code, streamed[0].headers["connection"]) == (413, "close")
    assert list(pair.store.read("s")) == []  # nothing was appended


def test_a_subscriber_sees_fast_path_appends(pair: Pair) -> None:
    from websockets.sync.client import connect

    pair.store.create_session(NewSession("s"))
    ws = pair.fast.replace("http://", "ws://")
    with connect(f"{ws}/v1/sessions/s/live?afterSeq=0&token={_token()}") as feed:
        body = json.dumps({"payload": {"type": "x", "i": 1}}).encode()
        assert _post(pair.fast, "s", body, _json(_token())).status_code == 201
        message = json.loads(feed.recv(timeout=10))
        assert (message["seq"], message["payload"]) == (1, {"type": "x", "i": 1})
