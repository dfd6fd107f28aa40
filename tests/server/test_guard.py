"""What stands in front of the routes, on a real uvicorn on loopback: the guard
(``agenttrail.server.guard``: the token before a byte of the body is read, bodies capped while
they stream in, WebSockets from other origins refused), the CORS policy and the security
headers on every response (``agenttrail.server.headers``; docs/server.md, Limits, Browsers)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agenttrail.log.store import open_store
from agenttrail.server import create_app, mint_token
from tests._wire import RawFeed, stream_request
from tests.conftest import serving

SECRET = b"guard-test-secret-0123456789abcdef0123456789abcdef"
CAP = 64 * 1024
"""The body cap of the server under test: small, so a test body passes it cheaply."""
ALLOWED = "https://app.example"
"""The one origin besides its own that the server under test allows."""


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    """A server with a body cap of :data:`CAP` bytes and one session, ``s``."""
    with open_store(tmp_path / "log.db") as store:
        app = create_app(store, secret=SECRET, max_body_bytes=CAP, allowed_origins=[ALLOWED])
        with serving(app) as port:
            base = f"http://127.0.0.1:{port}"
            httpx.post(f"{base}/v1/sessions", json={"id": "s"}, headers=_auth("append"))
            yield base


def _auth(rights: str = "read,append") -> dict[str, str]:
    token = mint_token(SECRET, rights=rights.split(","))
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


def _events(size: int) -> bytes:
    """An append body of exactly ``size`` bytes: one event whose text fills it."""
    frame = json.dumps({"payload": {"type": "x", "t": ""}}).encode()
    return frame.replace(b'"t": ""', b'"t": "' + b"a" * (size - len(frame)) + b'"')


def test_a_malformed_body_without_a_token_is_401_not_400(url: str) -> None:
    json_type = {"Content-Type": "application/json"}
    reply = httpx.post(f"{url}/v1/sessions/s/events", content=b"{not json", headers=json_type)
    assert reply.status_code == 401
    assert reply.headers["content-type"] == "application/problem+json"
    assert "bearer token" in reply.json()["detail"]
    forged = httpx.post(
        f"{url}/v1/sessions/s/events",
        content=b"{not json",
        headers={**json_type, "Authorization": "Bearer abc.def.ghi"},
    )
    assert forged.status_code == 401


def test_no_body_is_read_before_the_token_is_checked(url: str) -> None:
    # 10 MiB declared, 1 MiB sent in 64 KiB pieces: the answer comes before the rest.
    chunks = (b"x" * 65536 for _ in range(16))
    reply = stream_request(url, "/v1/sessions/s/events", chunks, length=10 * 1024 * 1024)
    assert reply.status == 401 and reply.headers["connection"] == "close"
    assert reply.sent < 10 * 1024 * 1024


def test_a_declared_length_above_the_cap_is_413_naming_the_limit(url: str) -> None:
    body = _events(CAP + 1)
    reply = httpx.post(f"{url}/v1/sessions/s/events", content=body, headers=_auth())
    assert reply.status_code == 413
    problem = reply.json()
    assert problem["limit"] == CAP
    assert f"{CAP + 1:,} bytes" in problem["detail"] and f"{CAP:,} bytes" in problem["detail"]
    assert "--max-body-bytes" in problem["detail"]
    assert "AGENTTRAIL_MAX_BODY_BYTES" in problem["detail"]
    events = httpx.get(f"{url}/v1/sessions/s/events", headers=_auth()).json()["events"]
    assert events == []  # nothing written


def test_a_chunked_body_is_counted_as_it_streams_in(url: str) -> None:
    body = _events(CAP + 4096)
    pieces = (body[i : i + 1000] for i in range(0, len(body), 1000))
    reply = stream_request(url, "/v1/sessions/s/events", pieces, headers=_auth())
    assert reply.status == 413 and reply.json()["limit"] == CAP
    assert "goes on" in reply.json()["detail"]
    fits = _events(CAP)
    pieces = (fits[i : i + 1000] for i in range(0, len(fits), 1000))
    accepted = stream_request(url, "/v1/sessions/s/events", pieces, headers=_auth())
    assert accepted.status == 201 and accepted.json()["seqs"] == [1]


def test_a_body_at_the_cap_is_read_whole(url: str) -> None:
    reply = httpx.post(f"{url}/v1/sessions/s/events", content=_events(CAP), headers=_auth())
    assert reply.status_code == 201, reply.text
    assert reply.json()["seqs"] == [1]
    event = httpx.get(f"{url}/v1/sessions/s/events", headers=_auth()).json()["events"][0]
    assert len(event["payload"]["t"]) == CAP - len(_events(0))


# -- browsers: security headers, CORS, WebSocket origins -------------------------------------


def test_every_response_carries_the_security_headers(url: str) -> None:
    page = httpx.get(f"{url}/")
    host = url.removeprefix("http://")
    api = httpx.get(f"{url}/v1/sessions", headers=_auth())
    refused = httpx.get(f"{url}/v1/sessions")
    script = httpx.get(f"{url}/static/app.js")
    for reply in (page, api, refused, script):
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["referrer-policy"] == "no-referrer"
        assert reply.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in reply.headers["content-security-policy"]
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and f"ws://{host}" in policy
    assert api.headers["content-security-policy"].startswith("default-src 'none'")
    assert "javascript" in script.headers["content-type"]  # nosniff needs the right type


def test_cors_preflights_are_answered_for_allowed_origins_only(url: str) -> None:
    asks = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization",
    }
    allowed = httpx.options(f"{url}/v1/sessions", headers={"Origin": ALLOWED, **asks})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ALLOWED
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    assert "POST" in allowed.headers["access-control-allow-methods"]
    other = httpx.options(f"{url}/v1/sessions", headers={"Origin": "https://evil.example", **asks})
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    read = httpx.get(f"{url}/v1/sessions", headers={**_auth(), "Origin": ALLOWED})
    assert read.status_code == 200 and read.headers["access-control-allow-origin"] == ALLOWED
    foreign = httpx.get(f"{url}/v1/sessions", headers={**_auth(), "Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in foreign.headers


def test_a_websocket_from_another_origin_is_refused(url: str) -> None:
    token = mint_token(SECRET, rights=["read"])
    feed = f"{url.replace('http://', 'ws://')}/v1/sessions/s/live?token={token}"
    httpx.post(f"{url}/v1/sessions/s/events", json={"payload": {"type": "x"}}, headers=_auth())
    with RawFeed(feed, origin="https://evil.example") as cross:
        assert cross.recv() is None
        assert cross.response is not None and cross.response.status_code == 403
    for origin in (None, url, ALLOWED):  # no browser, the server's own page, an allowed one
        with RawFeed(feed, origin=origin) as client:
            message = client.recv()
            assert message is not None and message["seq"] == 1, origin
            assert client.response is not None and client.response.status_code == 101
