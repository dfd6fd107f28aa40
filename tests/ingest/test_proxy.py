"""``agenttrail proxy`` on a real uvicorn on loopback, in front of a loopback upstream that
replays real provider traffic (tests/ingest/_upstream.py: each reply as the provider sent it, a
stream event by event), with the real ``openai`` and ``anthropic`` clients and ``curl``.

The upstream keeps every request it got, so the tests compare what reached it with what the
client sent, and what the client got with the recorded reply. Recordings
(tests/formats/_recordings.py cites their SOURCES.md rows):

- ``CHAT_TOOLS``: two Chat Completions exchanges, a tool call and the request that returns its
  result; ``CHAT_STREAM``: a streamed Chat Completions answer calling two tools;
- ``TOOL_ERROR``: two Anthropic Messages exchanges (a ``tool_use``, then its ``tool_result``);
  ``SSE``: a streamed Messages answer.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agenttrail.ingest.capture import Capture
from agenttrail.ingest.proxy import create_proxy, proxy_server
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import Event
from tests.conftest import free_port, serving
from tests.formats._recordings import CASSETTES, SSE, TOOL_ERROR
from tests.ingest._upstream import Recorded, Reply, Upstream, recorded, sse_reply
from tests.ingest._upstream import upstream as serve_upstream

CHAT_TOOLS = CASSETTES / "test_chat_completion_tool_calls_with_content.yaml"
CHAT_STREAM = CASSETTES / "test_chat_completion_multiple_tools_streaming_with_content.yaml"

GAP_S = 0.03
"""Seconds the upstream waits between two server-sent events of a stream."""

upstream = pytest.fixture(serve_upstream)


@dataclass
class Running:
    """A proxy on loopback, the log it writes, and that log's file."""

    url: str
    store: LogStore
    capture: Capture
    db: Path

    def events(self) -> list[Event]:
        """Every event of every session written so far."""
        return [e for s in self.store.sessions() for e in self.store.read(s.id)]

    def logged(self, kind: str, what: str, count: int = 1) -> list[dict[str, Any]]:
        """The payloads of type ``kind`` once there are ``count`` of them (written by the
        proxy's writer thread, just after the client has its answer)."""
        deadline = time.monotonic() + 10
        while len(found := _of(self.events(), kind)) < count:
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.02)
        return found


@contextlib.contextmanager
def running_proxy(
    upstream_url: str, db: Path, *, timeout_s: float | None = None
) -> Iterator[Running]:
    """``agenttrail proxy`` in this process: the same app and uvicorn settings as the command,
    on a free loopback port; on exit it stops and has written every exchange."""
    store = open_store(str(db), create=True)
    capture = Capture(store)
    app = create_proxy(upstream_url, capture, timeout_s=timeout_s)
    server = proxy_server(app, host="127.0.0.1", port=free_port())
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "proxy did not start"
        time.sleep(0.01)
    try:
        yield Running(f"http://127.0.0.1:{server.config.port}", store, capture, db)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        capture.close()
        store.close()


@pytest.fixture
def proxy(upstream: Upstream, tmp_path: Path) -> Iterator[Running]:
    with running_proxy(upstream.url, tmp_path / "proxy.db") as running:
        yield running


def _key() -> str:
    return f"sk-proxy-test-{uuid.uuid4().hex}"


def _database_bytes(db: Path) -> bytes:
    """The log file and its write-ahead log, as someone who copies them away would get."""
    return b"".join(p.read_bytes() for p in db.parent.glob(f"{db.name}*"))


def _of(events: list[Event], kind: str) -> list[dict[str, Any]]:
    return [dict(e.payload) for e in events if e.payload.get("type") == kind]


def _paced(item: Recorded) -> Reply:
    """``item``'s reply, a stream paced :data:`GAP_S` apart."""
    reply = item.reply
    if reply.events is None:
        return reply
    return Reply(reply.status, reply.body, reply.headers, events=reply.events, event_gap_s=GAP_S)


def _sent(upstream: Upstream, number: int) -> Any:
    """The body of the upstream's ``number``-th request, parsed."""
    return json.loads(upstream.requests[number][2])


# -- pass-through with the real clients -------------------------------------------------------


def test_openai_tool_exchange_passes_through_and_is_logged_once(
    upstream: Upstream, proxy: Running
) -> None:
    key = _key()
    with openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0) as client:
        exchanges = recorded(CHAT_TOOLS)
        for number, item in enumerate(exchanges):
            upstream.script(item.reply)
            raw = client.chat.completions.with_raw_response.create(**item.body)
            assert raw.http_response.status_code == 200, raw.http_response.text
            assert raw.http_response.content == item.reply.body  # the upstream's bytes, as sent
            assert raw.parse().id == json.loads(item.reply.body)["id"]
            path, headers, _ = upstream.requests[number]
            assert (path, _sent(upstream, number)) == (item.path, item.body)
            assert headers["authorization"] == f"Bearer {key}"
            assert headers["host"] == upstream.url.removeprefix("http://")

        results = proxy.logged("tool_result", "the tool results to be logged")
        [session] = proxy.store.sessions()
        events = list(proxy.store.read(session.id))
        prompt = exchanges[0].body["messages"][-1]["content"]
        users = [m for m in _of(events, "message") if m["role"] == "user"]
        assert [m["content"] for m in users] == [prompt]  # the second request's history: not again
        sent_ids = [m["tool_call_id"] for m in exchanges[1].body["messages"] if m["role"] == "tool"]
        assert sorted(r["toolCallId"] for r in results) == sorted(sent_ids)
        assert {c["id"] for c in _of(events, "tool_call")} >= set(
            sent_ids
        )  # each pairs with a call
        assert key.encode() not in _database_bytes(proxy.db)


def test_openai_stream_keeps_bytes_and_chunk_timing(upstream: Upstream, proxy: Running) -> None:
    key = _key()
    [item] = recorded(CHAT_STREAM)
    pieces = len(item.reply.events or [])
    with openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0) as client:
        upstream.script(_paced(item))
        arrivals: list[float] = []
        body = bytearray()
        start = time.perf_counter()
        with client.chat.completions.with_streaming_response.create(**item.body) as response:
            for chunk in response.iter_bytes():
                arrivals.append(time.perf_counter() - start)
                body += chunk
        assert bytes(body) == item.reply.body
        # Sent on as they arrive: the first event reaches the client while the upstream is still
        # pacing out the rest, and the arrivals span the upstream's pacing.
        assert arrivals[0] < (pieces - 2) * GAP_S
        assert arrivals[-1] - arrivals[0] >= (pieces - 2) * GAP_S * 0.8

        # The same stream read by the client library itself.
        upstream.script(item.reply)
        streamed = client.chat.completions.create(**item.body)
        ids = {c.id for chunk in streamed for d in chunk.choices for c in d.delta.tool_calls or []}
        ids.discard(None)
        assert len(ids) == 2
        logged = proxy.logged("tool_call", "the streamed calls to be logged", count=4)
        assert {c["id"] for c in logged} == ids
        assert key.encode() not in _database_bytes(proxy.db)


def test_a_client_that_closes_at_the_streams_last_event_is_not_logged_as_cut(
    upstream: Upstream, proxy: Running
) -> None:
    # The openai client closes the stream at `data: [DONE]`, before the body's end: when the
    # upstream ends its body a moment later, the proxy hears the client go first.
    [item] = recorded(CHAT_STREAM)
    events = [*(item.reply.events or []), b": the body ends a moment after [DONE]\n\n"]
    assert events[-2].startswith(b"data: [DONE]")
    body = b"".join(events)
    upstream.script(Reply(200, body, item.reply.headers, events=events, event_gap_s=0.3))
    with openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=_key(), max_retries=0) as client:
        chunks = list(client.chat.completions.create(**item.body))
    assert chunks
    proxy.logged("tool_call", "the streamed calls to be logged", count=2)
    time.sleep(1)  # the exchange is logged when the proxy ends it
    [session] = proxy.store.sessions()
    assert _of(list(proxy.store.read(session.id)), "error") == []


def test_anthropic_exchanges_and_stream(upstream: Upstream, proxy: Running) -> None:
    key = _key()
    with anthropic.Anthropic(base_url=proxy.url, api_key=key, max_retries=0) as client:
        exchanges = recorded(TOOL_ERROR)
        for number, item in enumerate(exchanges):
            upstream.script(item.reply)
            raw = client.messages.with_raw_response.create(**item.body)
            assert raw.http_response.content == item.reply.body
            assert raw.parse().id == json.loads(item.reply.body)["id"]
            assert _sent(upstream, number) == item.body
            # x-api-key or a bearer token, as the client's version chooses
            assert any(key in value for value in upstream.requests[number][1].values())
        reply = sse_reply(SSE.read_text(encoding="utf-8"), event_gap_s=GAP_S)
        upstream.script(reply)
        with client.messages.stream(**exchanges[0].body) as stream:
            final = stream.get_final_message()
        assert [b.type for b in final.content] == ["text", "tool_use"]

        first_call = json.loads(exchanges[0].reply.body)["content"][-1]["id"]
        calls = proxy.logged("tool_call", "the streamed call to be logged", count=2)
        assert {c["id"] for c in calls} == {first_call, final.content[-1].id}
        assert first_call in {r["toolCallId"] for r in _of(proxy.events(), "tool_result")}
        assert key.encode() not in _database_bytes(proxy.db)


def test_curl_gets_the_upstreams_bytes_and_headers(upstream: Upstream, proxy: Running) -> None:
    """A client that is not Python: curl, with a request body from the recording as a file."""
    key = _key()
    item = recorded(TOOL_ERROR)[0]
    reply = Reply(item.reply.status, item.reply.body, {**item.reply.headers, "x-up": "1"})
    upstream.script(reply, reply)
    request_file = proxy.db.parent / "request.json"
    request_file.write_bytes(json.dumps(item.body).encode())
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
    assert body == item.reply.body
    status, *lines = head.decode("latin-1").split("\r\n")
    assert status == "HTTP/1.1 200 OK"
    # The same reply straight from the upstream: the same headers, in the same order (its
    # own server and date included, none added), all but the date's value.
    direct = httpx.post(f"{upstream.url}/v1/messages", content=request_file.read_bytes())
    pairs = [(k.decode().lower(), v.decode()) for k, v in direct.headers.raw]
    got = [(k.lower(), v.strip()) for k, v in (line.split(":", 1) for line in lines)]
    assert [(k, "" if k == "date" else v) for k, v in got] == [
        (k, "" if k == "date" else v) for k, v in pairs
    ]
    assert ("x-up", "1") in got
    path, headers, sent = upstream.requests[0]
    assert (path, sent) == ("/v1/messages", request_file.read_bytes())
    assert headers["x-api-key"] == key
    proxy.logged("tool_call", "the exchange to be logged")
    assert key.encode() not in _database_bytes(proxy.db)


def test_a_compressed_answer_passes_compressed_and_is_recorded_decoded(
    upstream: Upstream, proxy: Running
) -> None:
    item = recorded(CHAT_TOOLS)[0]
    packed = gzip.compress(item.reply.body)
    upstream.script(Reply(200, packed, {**item.reply.headers, "content-encoding": "gzip"}))
    headers = {"accept-encoding": "gzip"}
    with httpx.stream(
        "POST", f"{proxy.url}/v1/chat/completions", json=item.body, headers=headers
    ) as response:
        raw = b"".join(response.iter_raw())
    assert raw == packed  # the upstream's bytes, not decoded on the way
    assert response.headers["content-encoding"] == "gzip"
    assert upstream.requests[0][1]["accept-encoding"] == "gzip"  # the client's, nothing added
    calls = proxy.logged("tool_call", "the decoded answer to be logged", count=2)
    wanted = json.loads(item.reply.body)["choices"][0]["message"]["tool_calls"]
    assert [c["id"] for c in calls] == [c["id"] for c in wanted]


# -- failures ----------------------------------------------------------------------------------


def test_unreachable_upstream_is_a_502_problem_and_an_error_event(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    with (
        running_proxy(nowhere, tmp_path / "proxy.db") as proxy,
        openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=_key(), max_retries=0) as client,
    ):
        prompt = [{"role": "user", "content": "Is anyone there?"}]
        with pytest.raises(openai.InternalServerError) as raised:
            client.chat.completions.create(model="gpt-4o-mini", messages=prompt)
        response = raised.value.response
        assert response.status_code == 502
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert (problem["status"], problem["title"]) == (502, "Bad Gateway")
        port = nowhere.rsplit(":", 1)[1]
        assert problem["detail"].startswith(
            f"upstream {nowhere} did not answer: ClientConnectorError: cannot connect to "
            f"127.0.0.1:{port}: Connect call failed"
        )
        assert "ssl" not in problem["detail"]  # aiohttp's "ssl:default", for a plain http URL
        [error] = proxy.logged("error", "the error to be logged")
        assert error["errorType"] == "transport_error" and nowhere in error["message"]
        [message] = _of(proxy.events(), "message")
        assert message["content"] == "Is anyone there?"  # the request is in the log too


def test_an_upstream_that_does_not_answer_in_time_is_a_504_naming_the_limit(
    upstream: Upstream, tmp_path: Path
) -> None:
    item = recorded(CHAT_TOOLS)[0]
    upstream.script(Reply(item.reply.status, item.reply.body, delay_s=1.5))
    with running_proxy(upstream.url, tmp_path / "proxy.db", timeout_s=0.3) as proxy:
        started = time.monotonic()
        response = httpx.post(f"{proxy.url}/v1/chat/completions", json=item.body)
        assert time.monotonic() - started < 1.5
        assert response.status_code == 504
        assert response.headers["content-type"] == "application/problem+json"
        limit = "within 0.3 s (AGENTTRAIL_PROXY_TIMEOUT, --timeout)"
        assert limit in response.json()["detail"]
        [error] = proxy.logged("error", "the timeout to be logged")
        assert limit in error["message"]


@contextlib.contextmanager
def _posted(proxy: Running, body: dict[str, Any], more: bytes = b"") -> Iterator[socket.socket]:
    """A raw connection to the proxy that has sent a Chat Completions request of ``body``
    (``more``: header lines to add, as bytes): a client that can hang up whenever the test
    says (closed on exit)."""
    sent = json.dumps(body).encode()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    with socket.create_connection(("127.0.0.1", int(proxy.url.rsplit(":", 1)[1]))) as sock:
        sock.settimeout(10)
        sock.sendall(head + more + f"content-length: {len(sent)}\r\n\r\n".encode() + sent)
        yield sock


def test_the_upstream_gets_the_clients_headers_and_adds_none(
    upstream: Upstream, proxy: Running
) -> None:
    item = recorded(CHAT_TOOLS)[0]
    upstream.script(item.reply)
    note = "café ☕".encode()  # a value that is not ASCII goes on as its bytes came
    with _posted(proxy, item.body, b"x-note: " + note + b"\r\n") as sock:
        received = b""
        while not received.endswith(item.reply.body):
            received += sock.recv(65536)
    [(_, headers, body)] = upstream.requests
    assert body == json.dumps(item.body).encode()
    # host, content-type, x-note and content-length: no user agent, no accept, …
    assert sorted(headers) == ["content-length", "content-type", "host", "x-note"]
    assert headers["host"] == upstream.url.removeprefix("http://")
    assert headers["x-note"].encode("latin-1") == note  # Starlette reads a byte a character


def test_the_environments_forward_proxy_is_used_unless_no_proxy_names_the_host(
    upstream: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The test's upstream stands in for a forward proxy (HTTP_PROXY): it is sent the request
    # in absolute form, for a host that does not resolve, and answers it.
    monkeypatch.setenv("HTTP_PROXY", upstream.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    item = recorded(CHAT_TOOLS)[0]
    upstream.script(item.reply)
    with running_proxy("http://api.example.invalid", tmp_path / "proxy.db") as proxy:
        # (the test's own client must not take HTTP_PROXY)
        response = httpx.post(f"{proxy.url}/v1/chat/completions", json=item.body, trust_env=False)
    assert (response.status_code, response.content) == (200, item.reply.body)
    assert upstream.requests[0][1]["host"] == "api.example.invalid"
    monkeypatch.setenv("NO_PROXY", "api.example.invalid")
    with running_proxy("http://api.example.invalid", tmp_path / "proxy.db") as proxy:
        response = httpx.post(f"{proxy.url}/v1/chat/completions", json=item.body, trust_env=False)
    assert response.status_code == 502  # straight to a host that does not resolve
    assert len(upstream.requests) == 1


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A key and a self-signed certificate for 127.0.0.1, written to ``folder``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agenttrail test upstream")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_file, cert_file = folder / "key.pem", folder / "cert.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key_file, cert_file


def test_an_https_upstream_is_verified_against_ssl_cert_file_read_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file, cert_file = _self_signed(tmp_path)
    secure = Upstream()
    item = recorded(CHAT_TOOLS)[0]
    with serving(secure.app, ssl_keyfile=str(key_file), ssl_certfile=str(cert_file)) as port:
        url = f"https://127.0.0.1:{port}"
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        with running_proxy(url, tmp_path / "untrusted.db") as proxy:
            response = httpx.post(f"{proxy.url}/v1/chat/completions", json=item.body)
        assert response.status_code == 502  # a certificate no bundle vouches for
        assert "certificate verify failed" in response.json()["detail"]
        assert secure.requests == []
        monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
        secure.script(item.reply)
        with running_proxy(url, tmp_path / "trusted.db") as proxy:
            response = httpx.post(f"{proxy.url}/v1/chat/completions", json=item.body)
        assert (response.status_code, response.content) == (200, item.reply.body)


class _Counted(list[bytes]):
    """A stream's events that count how many the upstream has taken to send."""

    taken = 0

    def __iter__(self) -> Iterator[bytes]:
        for event in super().__iter__():
            self.taken += 1
            yield event


def test_client_gone_mid_stream_closes_upstream_and_logs_incomplete(
    upstream: Upstream, proxy: Running
) -> None:
    [item] = recorded(CHAT_STREAM)
    events = item.reply.events or []
    # A stream far longer than the test: its first events, then the same event 10,000 times.
    endless = _Counted([*events[:3], *[events[3]] * 10_000])
    upstream.script(Reply(200, b"", item.reply.headers, events=endless, event_gap_s=GAP_S))
    with _posted(proxy, item.body) as sock:
        received = b""
        while received.count(b"data:") < 3:
            received += sock.recv(65536)
    [error] = proxy.logged("error", "the exchange to be logged")
    assert error["errorType"] == "incomplete_stream"
    assert "the client disconnected after" in error["message"]
    # The upstream stopped sending: nothing more taken over ten of its event gaps.
    taken = endless.taken
    time.sleep(10 * GAP_S)
    assert endless.taken == taken < 100
    # What arrived is kept: the assistant's message so far, with its first tool call.
    assert _of(proxy.events(), "tool_call")


def test_client_gone_during_a_bounded_answer_is_logged_and_the_proxy_goes_on(
    upstream: Upstream, proxy: Running
) -> None:
    # A JSON answer of announced length, sent by the upstream in five parts 0.2 s apart; the
    # client reads the first part and hangs up. Such an answer is relayed without a task
    # watching for the client, so the proxy must still find out that it left.
    first, second = recorded(CHAT_TOOLS)
    body = first.reply.body
    parts = [body[i : i + len(body) // 5 + 1] for i in range(0, len(body), len(body) // 5 + 1)]
    headers = {**first.reply.headers, "content-length": str(len(body))}
    upstream.script(Reply(200, b"", headers, events=parts, event_gap_s=0.2))
    with _posted(proxy, first.body) as sock:
        received = b""
        while b"\r\n\r\n" not in received or received.endswith(b"\r\n\r\n"):
            received += sock.recv(65536)
        assert received.startswith(b"HTTP/1.1 200") and b"content-length:" in received.lower()
    [error] = proxy.logged("error", "the disconnect to be logged")
    assert error["errorType"] == "incomplete_stream" and error["incomplete"] is True
    assert f"the client disconnected after {len(body):,} bytes" in error["message"]
    # Nothing half-written: the exchange is all there, its error last; the user's message,
    # and the assistant's answer as the upstream gave it (its tool calls, in order).
    [session] = proxy.store.sessions()
    events = [dict(e.payload) for e in proxy.store.read(session.id)]
    assert events[-1]["type"] == "error"
    calls = json.loads(body)["choices"][0]["message"]["tool_calls"]
    assert [c["id"] for c in _of(proxy.store.read(session.id), "tool_call")] == [
        c["id"] for c in calls
    ]
    users = [m["content"] for m in events if m.get("type") == "message" and m["role"] == "user"]
    assert users == [first.body["messages"][-1]["content"]]
    # The proxy goes on: the next request passes through and is logged.
    upstream.script(second.reply)
    response = httpx.post(f"{proxy.url}/v1/chat/completions", json=second.body)
    assert (response.status_code, response.content) == (200, second.reply.body)
    assert len(proxy.logged("tool_result", "the next exchange to be logged", 2)) == 2


def test_malformed_upstream_answer_passes_through_and_is_logged(
    upstream: Upstream, proxy: Running
) -> None:
    item = recorded(CHAT_TOOLS)[0]
    cut = item.reply.body[: len(item.reply.body) // 2]
    upstream.script(Reply(200, cut, {"content-type": "application/json"}))
    response = httpx.post(f"{proxy.url}/v1/chat/completions", json=item.body)
    assert (response.status_code, response.content) == (200, cut)
    [error] = proxy.logged("error", "the problem to be logged")
    assert "upstream answered HTTP 200, unreadable" in error["message"]
    users = [m for m in _of(proxy.events(), "message") if m["role"] == "user"]
    assert [m["content"] for m in users] == [item.body["messages"][-1]["content"]]


def test_upstream_dying_mid_stream_truncates_the_clients_answer(
    upstream: Upstream, proxy: Running, caplog: pytest.LogCaptureFixture
) -> None:
    [item] = recorded(CHAT_STREAM)
    events = item.reply.events or []
    upstream.script(Reply(200, b"", item.reply.headers, events=events, cut_after=4))
    # uvicorn's logger does not pass its records up to the root, where caplog listens
    server_log = logging.getLogger("uvicorn.error")
    server_log.addHandler(caplog.handler)
    try:
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json=item.body) as response,
        ):
            for _ in response.iter_raw():
                pass
    finally:
        server_log.removeHandler(caplog.handler)
    # the proxy says which exchange broke off and why, where uvicorn said only "ERROR: ASGI
    # callable returned without completing response." (the cut is the proxy's, on purpose)
    # (the upstream, a uvicorn server of this process too, logs its scripted abort there)
    assert not [r for r in caplog.records if "without completing" in r.getMessage()]
    [said] = [r.getMessage() for r in caplog.records if r.name == "agenttrail.proxy"]
    assert said.startswith(
        f"agenttrail proxy: POST {upstream.url}/v1/chat/completions: "
        f"upstream {upstream.url} failed mid-response: ClientPayloadError: the body was cut short"
    )
    assert said.endswith("; the client's answer is cut short too")
    [error] = proxy.logged("error", "the failure to be logged")
    assert error["errorType"] == "incomplete_stream" and "failed mid-response" in error["message"]
    # the parser's own code (400) is not said: it would read as an HTTP status
    assert "the body was cut short: Not enough data" in error["message"]
    assert "400" not in error["message"]


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
    key = _key()
    item = recorded(CHAT_TOOLS)[0]
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except ConnectionRefusedError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                time.sleep(0.05)
        upstream.script(item.reply)
        with openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key) as client:
            raw = client.chat.completions.with_raw_response.create(**item.body)
            assert raw.http_response.content == item.reply.body
    finally:
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=15)
    assert (proc.returncode, stderr) == (0, b"")
    assert stdout.decode().startswith(f"forwarding http://127.0.0.1:{port} to {upstream.url}")
    with contextlib.closing(open_store(str(db))) as store:
        [session] = store.sessions()
        calls = _of(list(store.read(session.id)), "tool_call")
    assert [c["id"] for c in calls] == [
        c["id"] for c in json.loads(item.reply.body)["choices"][0]["message"]["tool_calls"]
    ]
    assert key.encode() not in _database_bytes(db)


def test_a_port_in_use_is_exit_2_naming_it(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            "proxy", "--upstream", "http://127.0.0.1:9", "--port", str(port),
            "--db", str(tmp_path / "x.db"),
        )  # fmt: skip
    assert (result.returncode, result.stderr.strip()) == (
        2,
        f"error: --port {port}: cannot listen on 127.0.0.1: Address already in use",
    )


def test_a_bad_upstream_or_timeout_is_exit_2_naming_it(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    db = str(tmp_path / "x.db")
    result = run_cli("proxy", "--upstream", "ftp://example.com", "--db", db)
    assert (result.returncode, result.stderr.strip()) == (
        2,
        "error: --upstream 'ftp://example.com': expected an http:// or https:// URL with a host",
    )
    result = run_cli("proxy", "--upstream", "http://127.0.0.1:9", "--timeout", "0", "--db", db)
    assert (result.returncode, result.stderr.strip()) == (
        2,
        "error: --timeout 0: the proxy's timeout must be a positive number of seconds",
    )
