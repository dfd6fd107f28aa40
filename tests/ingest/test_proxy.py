"""``agenttrail proxy`` on a real uvicorn on loopback, in front of a loopback upstream that
replays real provider traffic, with the real ``openai`` and ``anthropic`` clients and ``curl``.

The upstream answers each request with the recorded response whose recorded request body
equals the one it received, so a request that the proxy altered gets no answer (404). It
keeps the exact bytes it sent and the headers it received, so the tests compare them with
what the client got. Recordings (tests/formats/_recordings.py cites their SOURCES.md rows):

- ``CHAT_TOOLS``: two Chat Completions exchanges, a tool call and the request that returns its
  result; ``CHAT_STREAM``: a streamed Chat Completions answer calling two tools;
- ``TOOL_ERROR``: two Anthropic Messages exchanges (a ``tool_use``, then its ``tool_result``);
  ``SSE``: a streamed Messages answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agenttrail.ingest.proxy import create_proxy, proxy_server, record_to
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import Event
from tests.conftest import free_port, serving
from tests.formats._recordings import CASSETTES, SSE, TOOL_ERROR

CHAT_TOOLS = CASSETTES / "test_chat_completion_tool_calls_with_content.yaml"
CHAT_STREAM = CASSETTES / "test_chat_completion_multiple_tools_streaming_with_content.yaml"

GAP_S = 0.03
"""Seconds the upstream waits between two server-sent events of a stream."""


@dataclass
class Replayed:
    """One request the upstream answered: what it received and the bytes it sent."""

    path: str
    headers: dict[str, str]
    body: bytes
    sent: bytearray = field(default_factory=bytearray)
    finished: threading.Event = field(default_factory=threading.Event)
    """Set when the upstream's response ended, whether sent in full or abandoned."""


@dataclass
class Upstream:
    """The replaying upstream: its base URL and every request it answered, in order."""

    url: str
    seen: list[Replayed]


def _cassette(path: Path) -> list[tuple[Any, str, bytes]]:
    """``(request body, content type, response body)`` of each interaction of a cassette."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    found = []
    for interaction in doc["interactions"]:
        headers = {k.lower(): v[0] for k, v in interaction["response"]["headers"].items()}
        body = interaction["response"]["body"]["string"].encode()
        found.append((json.loads(interaction["request"]["body"]), headers["content-type"], body))
    return found


def _anthropic_records(path: Path) -> list[tuple[Any, str, bytes]]:
    return [
        (r["request"]["body"], "application/json", json.dumps(r["response"]["body"]).encode())
        for r in json.loads(path.read_text(encoding="utf-8"))
    ]


def _events(body: bytes) -> list[bytes]:
    """A server-sent-event body cut after each event (WHATWG HTML §9.2: a blank line)."""
    parts = body.replace(b"\r\n", b"\n").split(b"\n\n")
    return [p + b"\n\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _replaying_app(seen: list[Replayed]) -> Starlette:
    recorded = {
        "/v1/chat/completions": _cassette(CHAT_TOOLS) + _cassette(CHAT_STREAM),
        "/v1/messages": _anthropic_records(TOOL_ERROR),
    }
    sse = SSE.read_bytes()

    async def replay(request: Request) -> Response:
        body = await request.body()
        got = Replayed(request.url.path, dict(request.headers), body)
        seen.append(got)
        sent = json.loads(body) if body else None
        if request.url.path == "/v1/messages" and sent.get("stream"):
            return _stream(got, _events(sse), "text/event-stream; charset=utf-8")
        for wanted, content_type, answer in recorded.get(request.url.path, []):
            if wanted == sent:
                if content_type.startswith("text/event-stream"):
                    return _stream(got, _events(answer), content_type)
                got.sent += answer
                got.finished.set()
                return Response(answer, media_type=content_type, headers={"x-replayed": "1"})
        return Response(b"no recorded request matches", status_code=404)

    async def malformed(request: Request) -> Response:
        got = Replayed(request.url.path, dict(request.headers), await request.body())
        seen.append(got)
        got.sent += b'{"id": "chatcmpl-cut", "object": "chat.completion", "choices": ['
        got.finished.set()
        return Response(bytes(got.sent), media_type="application/json")

    async def endless(request: Request) -> Response:
        got = Replayed(request.url.path, dict(request.headers), await request.body())
        seen.append(got)
        return _stream(got, (b"data: {}\n\n" for _ in range(10_000)), "text/event-stream")

    async def dies(request: Request) -> Response:
        got = Replayed(request.url.path, dict(request.headers), await request.body())
        seen.append(got)

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in _events(sse)[:3]:
                got.sent += chunk
                yield chunk
            got.finished.set()
            raise ConnectionAbortedError("upstream dies mid-stream (on purpose)")

        return StreamingResponse(chunks(), media_type="text/event-stream")

    async def silent(request: Request) -> Response:
        seen.append(Replayed(request.url.path, dict(request.headers), await request.body()))
        await asyncio.sleep(1.5)  # well past the proxy's timeout of 0.3 s in the test
        return Response(b"too late")

    return Starlette(
        routes=[
            Route("/v1/silent", silent, methods=["POST"]),
            Route("/v1/chat/completions", replay, methods=["POST"]),
            Route("/v1/messages", replay, methods=["POST"]),
            Route("/v1/malformed", malformed, methods=["POST"]),
            Route("/v1/endless", endless, methods=["POST"]),
            Route("/v1/dies", dies, methods=["POST"]),
        ]
    )


def _stream(got: Replayed, chunks: Any, content_type: str) -> StreamingResponse:
    async def paced() -> AsyncIterator[bytes]:
        try:
            for chunk in chunks:
                got.sent += chunk
                yield chunk
                await asyncio.sleep(GAP_S)
        finally:
            got.finished.set()

    return StreamingResponse(paced(), media_type=content_type, headers={"x-replayed": "1"})


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    seen: list[Replayed] = []
    with serving(_replaying_app(seen)) as port:
        yield Upstream(f"http://127.0.0.1:{port}", seen)


@dataclass
class Running:
    """A proxy on loopback, the log it writes, and that log's file."""

    url: str
    store: LogStore
    db: Path

    def sessions_events(self) -> list[list[Event]]:
        return [list(self.store.read(s.id)) for s in self.store.sessions()]

    def all_events(self) -> list[Event]:
        return [e for events in self.sessions_events() for e in events]


@contextlib.contextmanager
def running_proxy(
    upstream_url: str, db: Path, *, timeout_s: float | None = None
) -> Iterator[Running]:
    """``agenttrail proxy`` in this process: the same app and uvicorn settings as the command,
    on a free loopback port; on exit it stops and has written every exchange."""
    store = open_store(str(db), create=True)
    app = create_proxy(upstream_url, record_to(store), timeout_s=timeout_s)
    server = proxy_server(app, host="127.0.0.1", port=free_port())
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "proxy did not start"
        time.sleep(0.01)
    try:
        yield Running(f"http://127.0.0.1:{server.config.port}", store, db)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        store.close()


@pytest.fixture
def proxy(upstream: Upstream, tmp_path: Path) -> Iterator[Running]:
    with running_proxy(upstream.url, tmp_path / "proxy.db") as running:
        yield running


def _key() -> str:
    return f"sk-proxy-test-{uuid.uuid4().hex}"


def _wait_for(condition: Any, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _database_bytes(db: Path) -> bytes:
    """The log file and its write-ahead log, as someone who copies them away would get."""
    return b"".join(p.read_bytes() for p in db.parent.glob(f"{db.name}*"))


def _of(events: list[Event], kind: str) -> list[dict[str, Any]]:
    return [dict(e.payload) for e in events if e.payload.get("type") == kind]


# -- pass-through with the real clients -------------------------------------------------------


def test_openai_tool_exchange_passes_through_and_is_logged_once(
    upstream: Upstream, proxy: Running
) -> None:
    key = _key()
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0)
    for number, (request, _, answer) in enumerate(_cassette(CHAT_TOOLS)):
        raw = client.chat.completions.with_raw_response.create(**request)
        assert raw.http_response.status_code == 200, raw.http_response.text
        assert raw.http_response.content == bytes(upstream.seen[number].sent) == answer
        assert raw.headers["x-replayed"] == "1"
        completion = raw.parse()
        assert completion.id == json.loads(answer)["id"]
        received = upstream.seen[number]
        assert received.headers["authorization"] == f"Bearer {key}"
        assert received.headers["host"] == upstream.url.removeprefix("http://")
        assert json.loads(received.body) == request

    _wait_for(lambda: _of(proxy.all_events(), "tool_result"), "the tool result to be logged")
    [events] = proxy.sessions_events()
    first, second = _cassette(CHAT_TOOLS)[0][0], _cassette(CHAT_TOOLS)[1][0]
    prompt = first["messages"][-1]["content"]
    users = [m for m in _of(events, "message") if m["role"] == "user"]
    assert [m["content"] for m in users] == [prompt]  # the second request's history: not again
    calls = _of(events, "tool_call")
    results = _of(events, "tool_result")
    sent_ids = [m["tool_call_id"] for m in second["messages"] if m["role"] == "tool"]
    assert sorted(r["toolCallId"] for r in results) == sorted(sent_ids)
    assert {c["id"] for c in calls} >= set(sent_ids)  # every result pairs with a logged call
    assert key.encode() not in _database_bytes(proxy.db)


def test_openai_stream_keeps_bytes_and_chunk_timing(upstream: Upstream, proxy: Running) -> None:
    key = _key()
    [(request, _, answer)] = _cassette(CHAT_STREAM)
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0)
    arrivals: list[float] = []
    body = bytearray()
    start = time.perf_counter()
    with client.chat.completions.with_streaming_response.create(**request) as response:
        for chunk in response.iter_bytes():
            arrivals.append(time.perf_counter() - start)
            body += chunk
    assert bytes(body) == bytes(upstream.seen[0].sent) == answer
    pieces = len(_events(answer))
    # Sent on as they arrive: the first event reaches the client while the upstream is still
    # pacing out the rest, and the arrivals span the upstream's pacing.
    assert arrivals[0] < (pieces - 2) * GAP_S
    assert arrivals[-1] - arrivals[0] >= (pieces - 2) * GAP_S * 0.8

    # The same stream read by the client library itself.
    streamed = client.chat.completions.create(**request)
    ids = [c.id for chunk in streamed for d in chunk.choices for c in d.delta.tool_calls or []]
    _wait_for(lambda: len(_of(proxy.all_events(), "tool_call")) >= 2, "the calls to be logged")
    logged = {c["id"] for c in _of(proxy.all_events(), "tool_call")}
    assert {i for i in ids if i} <= logged
    assert key.encode() not in _database_bytes(proxy.db)


def test_anthropic_exchanges_and_stream(upstream: Upstream, proxy: Running) -> None:
    key = _key()
    client = anthropic.Anthropic(base_url=proxy.url, api_key=key, max_retries=0)
    records = _anthropic_records(TOOL_ERROR)
    for number, (request, _, answer) in enumerate(records):
        raw = client.messages.with_raw_response.create(**request)
        assert raw.http_response.content == bytes(upstream.seen[number].sent) == answer
        # x-api-key or a bearer token, as the client's version chooses
        assert any(key in value for value in upstream.seen[number].headers.values())
        assert raw.parse().id == json.loads(answer)["id"]
    with client.messages.stream(**records[0][0]) as stream:
        final = stream.get_final_message()
    assert bytes(upstream.seen[-1].sent) == SSE.read_bytes()
    assert [b.type for b in final.content] == ["text", "tool_use"]

    streamed_id = final.content[-1].id

    def logged_ids() -> set[str]:
        return {c["id"] for c in _of(proxy.all_events(), "tool_call")}

    _wait_for(lambda: streamed_id in logged_ids(), "the streamed tool call to be logged")
    first_call = json.loads(records[0][2])["content"][-1]["id"]
    results = _of(proxy.all_events(), "tool_result")
    assert first_call in logged_ids()
    assert first_call in {r["toolCallId"] for r in results}
    assert key.encode() not in _database_bytes(proxy.db)


def test_curl_gets_the_upstreams_bytes_and_headers(upstream: Upstream, proxy: Running) -> None:
    """A client that is not Python: curl, with a request body from the recording as a file."""
    key = _key()
    request, _, answer = _anthropic_records(TOOL_ERROR)[0]
    request_file = proxy.db.parent / "request.json"
    request_file.write_bytes(json.dumps(request).encode())
    result = subprocess.run(
        [
            "curl", "--silent", "--show-error", "--no-buffer", "--dump-header", "-",
            "--header", f"x-api-key: {key}", "--header", "anthropic-version: 2023-06-01",
            "--header", "content-type: application/json",
            "--data-binary", f"@{request_file}", f"{proxy.url}/v1/messages",
        ],
        capture_output=True,
        check=True,
        timeout=30,
    )  # fmt: skip
    head, body = result.stdout.split(b"\r\n\r\n", 1)
    assert body == bytes(upstream.seen[0].sent) == answer
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK"
    names = [line.split(":", 1)[0].lower() for line in lines[1:]]
    assert names.count("server") == 1 and names.count("date") == 1  # the upstream's, once
    assert "x-replayed: 1" in lines
    assert upstream.seen[0].body == request_file.read_bytes()
    assert upstream.seen[0].headers["x-api-key"] == key
    _wait_for(lambda: _of(proxy.all_events(), "tool_call"), "the exchange to be logged")
    assert key.encode() not in _database_bytes(proxy.db)


# -- failures ----------------------------------------------------------------------------------


def test_unreachable_upstream_is_a_502_problem_and_an_error_event(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    with running_proxy(nowhere, tmp_path / "proxy.db") as proxy:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=_key(), max_retries=0)
        with pytest.raises(openai.InternalServerError) as raised:
            client.chat.completions.create(model="gpt-4o-mini", messages=[])
        response = raised.value.response
        assert response.status_code == 502
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert (problem["status"], problem["title"]) == (502, "Bad Gateway")
        assert nowhere in problem["detail"]
        _wait_for(lambda: _of(proxy.all_events(), "error"), "the error to be logged")
        [error] = _of(proxy.all_events(), "error")
        assert nowhere in error["message"] and "/v1/chat/completions" in error["message"]


def test_an_upstream_that_does_not_answer_in_time_is_a_504_naming_the_limit(
    upstream: Upstream, tmp_path: Path
) -> None:
    with running_proxy(upstream.url, tmp_path / "proxy.db", timeout_s=0.3) as proxy:
        started = time.monotonic()
        response = httpx.post(f"{proxy.url}/v1/silent", json={})
        assert time.monotonic() - started < 3
        assert response.status_code == 504
        assert response.headers["content-type"] == "application/problem+json"
        assert "within 0.3 s (AGENTTRAIL_PROXY_TIMEOUT, --timeout)" in response.json()["detail"]
        _wait_for(lambda: _of(proxy.all_events(), "error"), "the timeout to be logged")
        [error] = _of(proxy.all_events(), "error")
        assert "/v1/silent" in error["message"] and "0.3 s" in error["message"]


def test_client_gone_mid_stream_closes_upstream_and_logs_incomplete(
    upstream: Upstream, proxy: Running
) -> None:
    with socket.create_connection(("127.0.0.1", int(proxy.url.rsplit(":", 1)[1]))) as sock:
        sock.settimeout(10)
        sock.sendall(b"POST /v1/endless HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")
        received = b""
        while received.count(b"data:") < 3:
            received += sock.recv(65536)
    # The upstream's stream of 10,000 paced events is abandoned within moments, not minutes.
    _wait_for(lambda: upstream.seen and upstream.seen[0].finished.is_set(), "upstream closed", 5)
    assert len(upstream.seen[0].sent) < 200 * len(b"data: {}\n\n")
    _wait_for(lambda: _of(proxy.all_events(), "error"), "the exchange to be logged")
    [error] = _of(proxy.all_events(), "error")
    assert "/v1/endless" in error["message"] and "client disconnected" in error["message"]


def test_malformed_upstream_answer_passes_through_and_is_logged(
    upstream: Upstream, proxy: Running
) -> None:
    response = httpx.post(f"{proxy.url}/v1/malformed", json={"model": "m", "messages": []})
    assert response.status_code == 200
    assert response.content == bytes(upstream.seen[0].sent)
    _wait_for(lambda: _of(proxy.all_events(), "error"), "the problem to be logged")
    [error] = _of(proxy.all_events(), "error")
    assert "/v1/malformed" in error["message"]


def test_upstream_dying_mid_stream_truncates_the_clients_answer(
    upstream: Upstream, proxy: Running
) -> None:
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", f"{proxy.url}/v1/dies", json={"stream": True}) as response,
    ):
        body = bytearray()
        for chunk in response.iter_raw():
            body += chunk
    _wait_for(lambda: _of(proxy.all_events(), "error"), "the failure to be logged")
    [error] = _of(proxy.all_events(), "error")
    assert "/v1/dies" in error["message"] and "mid-response" in error["message"]


# -- the command itself ------------------------------------------------------------------------


def test_the_proxy_command_records_and_stops_cleanly(upstream: Upstream, tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agenttrail.cli", "proxy", "--upstream", upstream.url,
         "--port", str(port), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except ConnectionRefusedError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                time.sleep(0.05)
        key = _key()
        request, _, answer = _cassette(CHAT_TOOLS)[0]
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key)
        raw = client.chat.completions.with_raw_response.create(**request)
        assert raw.http_response.content == answer
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 130, stderr  # stopped by Ctrl-C, as a shell reports it
    assert b"Traceback" not in stderr
    assert f"forwarding http://127.0.0.1:{port} to {upstream.url}" in stdout.decode()
    with contextlib.closing(open_store(str(db))) as store:
        [session] = store.sessions()
        calls = _of(list(store.read(session.id)), "tool_call")
    assert [c["id"] for c in calls] == [
        c["id"] for c in json.loads(answer)["choices"][0]["message"]["tool_calls"]
    ]
    assert key.encode() not in _database_bytes(db)


def test_a_bad_upstream_is_exit_2_naming_it(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    result = run_cli("proxy", "--upstream", "ftp://example.com", "--db", str(tmp_path / "x.db"))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: --upstream 'ftp://example.com': expected an http:// or https:// URL with a host"
    )
