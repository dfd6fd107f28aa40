"""The capture core (agenttrail.ingest.capture): recorded provider traffic handed over one
exchange at a time is the session ``agenttrail import`` makes of the same recording, each
message stored once, across a restart too; nothing secret stored; a failing log never raises.

The exchanges are real recorded traffic from ``../shared/realdata`` (tests/formats/_recordings.py
cites the SOURCES.md rows).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import logging
import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import InputError
from agenttrail.ingest.capture import Capture, HttpExchange, session
from agenttrail.ingest.capture._http import from_wire, to_wire
from agenttrail.ingest.capture._writer import _FRAME, _Frames
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import Event, NewSession
from tests.formats._recordings import (
    PROGRAMMATIC,
    RESPONSES_OUTPUT,
    TOOL_ERROR,
    import_events,
)
from tests.ingest._upstream import KEY, TOOL_LOOP, Recorded, Reply, payloads, recorded


def exchange_of(item: Recorded, *, key: str = KEY, **changes: Any) -> HttpExchange:
    """The exchange a client makes for a recorded request, answered as recorded."""
    reply = item.reply
    host = "api.anthropic.com" if "messages" in item.path else "api.openai.com"
    fields: dict[str, Any] = {
        "method": "POST",
        "url": f"https://{host}{item.path}",
        "request_headers": [
            ("authorization", f"Bearer {key}"),
            ("x-api-key", key),
            ("content-type", "application/json"),
            ("user-agent", "agenttrail-tests"),
        ],
        "request_body": json.dumps(item.body).encode(),
        "status": reply.status,
        "response_headers": list(reply.headers.items()),
        "response_body": reply.body,
        "started": time.time(),
        "duration_s": 0.25,
        **changes,
    }
    return HttpExchange(**fields)


def only_session(store: LogStore) -> list[Event]:
    [captured] = store.sessions()
    return list(store.read(captured.id))


@pytest.mark.parametrize("path", [TOOL_ERROR, PROGRAMMATIC, TOOL_LOOP], ids=lambda p: p.stem)
def test_exchanges_captured_one_by_one_are_the_session_import_makes(
    path: Path, tmp_path: Path
) -> None:
    capture = Capture(tmp_path / "capture.db")
    for item in recorded(path):
        capture.write(exchange_of(item))
    capture.close()
    with open_store(tmp_path / "capture.db") as log, open_store(tmp_path / "import.db") as other:
        assert payloads(only_session(log)) == payloads(import_events(other, path))


def test_a_restarted_capture_continues_the_conversation_from_the_log(
    db_url: str, tmp_path: Path
) -> None:
    first, second = recorded(TOOL_ERROR)
    before = Capture(db_url)
    before.write(exchange_of(first))
    before.close()
    after = Capture(db_url)  # a new process: nothing in memory
    after.write(exchange_of(second))
    after.close()
    with open_store(db_url) as log, open_store(tmp_path / "import.db") as other:
        assert payloads(only_session(log)) == payloads(import_events(other, TOOL_ERROR))


def test_the_same_first_request_twice_is_two_conversations(tmp_path: Path) -> None:
    first = recorded(TOOL_ERROR)[0]
    with Capture(tmp_path / "capture.db") as capture:
        capture.write(exchange_of(first))
        capture.write(exchange_of(first))
    with open_store(tmp_path / "capture.db") as log:
        sessions = log.sessions()
        assert len(sessions) == 2
        one, two = (payloads(list(log.read(s.id))) for s in sessions)
        assert one == two
        assert [p["type"] for p in one] == ["message", "message", "tool_call"]


def test_a_retried_request_is_stored_once_with_each_failure(tmp_path: Path) -> None:
    first, second = recorded(TOOL_ERROR)
    failed = exchange_of(first, status=None, response_body=b"", error="ReadTimeout: timed out")
    overloaded = exchange_of(
        first,
        status=529,
        response_body=b'{"type": "error", "error": '
        b'{"type": "overloaded_error", "message": "Overloaded"}}',
    )
    with Capture(tmp_path / "capture.db") as capture:
        for exchange in (failed, overloaded, exchange_of(first), exchange_of(second)):
            capture.write(exchange)
    with open_store(tmp_path / "capture.db") as log:
        got = only_session(log)
    errors = [e.payload for e in got if e.type == "error"]
    assert [(e.get("errorType"), e.get("code")) for e in errors] == [
        ("transport_error", None),
        ("overloaded_error", 529),
    ]
    assert errors[0]["message"] == "no response: ReadTimeout: timed out"
    users = [e for e in got if e.type == "message" and e.payload["role"] == "user"]
    assert len(users) == 1  # sent three times, stored once


def _chat_chunks(*deltas: dict[str, Any], finish: str | None = None) -> list[str]:
    """Chat Completions stream events (written for these tests), one per delta."""
    head = {"id": "chatcmpl-R", "object": "chat.completion.chunk", "created": 1764900000}
    return [
        "data: " + json.dumps({**head, "model": "gpt-4o", "choices": [choice]}) + "\n\n"
        for choice in (
            {"index": 0, "delta": d, "finish_reason": finish if i == len(deltas) - 1 else None}
            for i, d in enumerate(deltas)
        )
    ]


def _message_events(text: str, *, ending: str) -> list[str]:
    """Anthropic Messages stream events (written for these tests) of one text block,
    ended by ``message_stop`` or by an ``overloaded_error`` event."""
    start = {"id": "msg_R", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5"}
    start |= {"content": [], "stop_reason": None, "usage": {"input_tokens": 9, "output_tokens": 1}}
    found = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
    ]
    if ending == "error":
        found.append(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        )
    else:
        found += [
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 3},
            },
            {"type": "message_stop"},
        ]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in found]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_request_retried_after_its_answer_was_cut_short_continues_its_session(
    tmp_path: Path, provider: str
) -> None:
    # The connection dropped mid-stream (OpenAI), or the provider ended the stream with an
    # error (Anthropic's overloaded_error): the caller sends the same request again. It was
    # a second session holding the history again; a 500 or a timeout was not.
    sse = {"content-type": "text/event-stream"}
    if provider == "openai":
        path = "/v1/chat/completions"
        body = {
            "model": "gpt-4o",
            "stream": True,
            "messages": [{"role": "user", "content": "Say hello"}],
        }
        first = "".join(_chat_chunks({"role": "assistant", "content": ""}, {"content": "Hello "}))
        whole = _chat_chunks(
            {"role": "assistant", "content": ""}, {"content": "Hello world"}, {}, finish="stop"
        )
        second = "".join(whole) + "data: [DONE]\n\n"
        cut = {"complete": False, "error": "RemoteProtocolError: peer closed connection"}
    else:
        path = "/v1/messages"
        body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": True}
        body["messages"] = [{"role": "user", "content": "Say hello"}]
        first = "".join(_message_events("Hello ", ending="error"))
        second = "".join(_message_events("Hello world", ending="stop"))
        cut = {}
    with Capture(tmp_path / "capture.db") as capture:
        reply = Reply(200, first.encode(), sse)
        capture.write(exchange_of(Recorded(path, body, reply), **cut))
        capture.write(exchange_of(Recorded(path, body, Reply(200, second.encode(), sse))))
    with open_store(tmp_path / "capture.db") as log:
        got = only_session(log)
    said = [(e.type, e.payload.get("role"), e.payload.get("content")) for e in got]
    texts = [c if isinstance(c, str) else c[0]["text"] if c else c for _, _, c in said]
    assert [(t, r) for t, r, _ in said] == [
        ("message", "user"),
        ("message", "assistant"),
        ("error", None),
        ("message", "assistant"),
    ]
    assert texts[:2] + texts[3:] == ["Say hello", "Hello ", "Hello world"]
    assert got[2].payload["incomplete"] is True


def _reasoning_response(turn: int) -> dict[str, Any]:
    """A reasoning model's response (written for this test): a reasoning item, then the
    message, as gpt-5 and the o-series answer."""
    return {
        "id": f"resp_{turn}",
        "object": "response",
        "created_at": 1764900000 + turn,
        "status": "completed",
        "model": "gpt-5",
        "output": [
            {"type": "reasoning", "id": f"rs_{turn}", "summary": []},
            {
                "type": "message",
                "id": f"msg_{turn}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": f"Answer {turn}.", "annotations": []}],
            },
        ],
        "usage": {"input_tokens": 5, "output_tokens": 5, "total_tokens": 10},
    }


@pytest.mark.parametrize("history", ["text", "items"])
def test_a_stateless_conversation_with_reasoning_items_is_one_session(
    tmp_path: Path, history: str
) -> None:
    # A stateless client (store: false) resends its history with every request: "text" keeps
    # only each answer's text (the reasoning items left out), "items" every output item as it
    # came (reasoning included). Either way it is one conversation, each message stored once.
    sent: list[Any] = []
    exchanges, records = [], []
    for turn in range(3):
        sent.append({"role": "user", "content": f"Question {turn}"})
        body = {"model": "gpt-5", "input": list(sent), "store": False}
        response = _reasoning_response(turn)
        reply = Reply(200, json.dumps(response).encode())
        exchanges.append(exchange_of(Recorded("/v1/responses", body, reply)))
        request = {"method": "POST", "url": "https://api.openai.com/v1/responses", "body": body}
        records.append({"request": request, "response": {"status_code": 200, "body": response}})
        if history == "text":
            sent.append({"role": "assistant", "content": f"Answer {turn}."})
        else:
            sent += response["output"]
    with Capture(tmp_path / "capture.db") as capture:
        for exchange in exchanges:
            capture.write(exchange)
    recording = tmp_path / "recording.json"  # the same exchanges recorded: import reads them so
    recording.write_text(json.dumps(records))
    with open_store(tmp_path / "capture.db") as log, open_store(tmp_path / "import.db") as other:
        got = only_session(log)
        assert payloads(got) == payloads(import_events(other, recording))
    assert [(e.actor, e.payload.get("content")) for e in got] == [
        ("user", "Question 0"),
        ("agent", "Answer 0."),
        ("user", "Question 1"),
        ("agent", "Answer 1."),
        ("user", "Question 2"),
        ("agent", "Answer 2."),
    ]
    answers = [e.payload for e in got if e.actor == "agent"]
    assert [a["meta"]["model"] for a in answers] == ["gpt-5"] * 3  # each the response's
    # the reasoning item kept on its answer as it came, in order
    assert [[b["id"] for b in a["blocks"]] for a in answers] == [
        [f"rs_{turn}", f"msg_{turn}"] for turn in range(3)
    ]


def test_an_explicit_session_holds_every_conversation(tmp_path: Path) -> None:
    first = recorded(TOOL_ERROR)[0]
    other = recorded(PROGRAMMATIC)[0]
    capture = Capture(tmp_path / "capture.db")
    with session("nightly-run", title="Nightly"):
        assert capture.record(exchange_of(first))
        assert capture.record(exchange_of(other))
    assert capture.flush(10)
    capture.close()
    with open_store(tmp_path / "capture.db") as log:
        [only] = log.sessions()
        assert (only.id, only.title) == ("nightly-run", "Nightly")
        assert [e.type for e in log.read(only.id)].count("message") == 4


def test_no_credential_reaches_the_database_file(tmp_path: Path) -> None:
    items = recorded(TOOL_ERROR)
    with Capture(tmp_path / "capture.db") as capture:
        for item in items:
            url = f"https://api.anthropic.com{item.path}&key={KEY}&api-key={KEY}"
            capture.write(exchange_of(item, url=f"https://user:{KEY}@{url[8:]}"))
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("capture.db*"))
    assert b"get_weather" in stored  # the events are there, in readable bytes
    assert KEY.encode() not in stored
    assert KEY[3:19].encode() not in stored


def test_a_log_that_fails_never_reaches_the_caller(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "capture.db"
    path.write_text("not a database\n" * 100)  # any write, and the open itself, fail
    capture = Capture(path)
    with caplog.at_level(logging.WARNING, logger="agenttrail.capture"):
        assert capture.record(exchange_of(recorded(TOOL_ERROR)[0]))
        assert capture.flush(10)
    assert capture.failures == 1 and capture.written == 0
    assert "not recorded: InputError" in caplog.text and KEY not in caplog.text
    capture.close()
    assert path.read_text() == "not a database\n" * 100


def test_previous_response_id_continues_the_conversation_of_that_response(
    tmp_path: Path,
) -> None:
    # Two identical first requests (two conversations), then a request that continues the
    # second response by its id, sending only the tool's output.
    first, again, then = recorded(RESPONSES_OUTPUT)
    with Capture(tmp_path / "capture.db") as capture:
        for item in (first, again, then):
            capture.write(exchange_of(item))
    with open_store(tmp_path / "capture.db") as log:
        one, two = ([e.payload for e in log.read(s.id)] for s in log.sessions())
    assert [(p["type"], p.get("role")) for p in one] == [
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", None),
    ]
    assert [(p["type"], p.get("role")) for p in two] == [
        *[(p["type"], p.get("role")) for p in one],
        ("tool_result", None),
        ("message", "assistant"),
    ]
    assert two[3]["toolCallId"] == two[2]["id"]  # paired by the id the provider gave
    assert then.body["previous_response_id"] == two[1]["responseId"]


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_compressed_response_is_read_as_its_content(tmp_path: Path, coding: str) -> None:
    # api.openai.com sends JSON bodies gzip-compressed; the client undoes it, and so must we.
    compress = gzip.compress if coding == "gzip" else zlib.compress
    with Capture(tmp_path / "capture.db") as capture:
        for item in recorded(TOOL_LOOP):
            headers = [*item.reply.headers.items(), ("Content-Encoding", coding)]
            capture.write(
                exchange_of(item, response_body=compress(item.reply.body), response_headers=headers)
            )
    with open_store(tmp_path / "capture.db") as log, open_store(tmp_path / "import.db") as other:
        assert payloads(only_session(log)) == payloads(import_events(other, TOOL_LOOP))


def test_after_a_write_that_failed_the_conversation_goes_on_in_a_new_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The second request carries a tool result too large for this log: that exchange is
    # lost (logged, counted), and the conversation's next exchange, which the log can take,
    # is written whole into a new session rather than half into the old one.
    first, second = recorded(TOOL_ERROR)
    huge = json.loads(json.dumps(second.body))
    huge["messages"][-1]["content"][0]["content"] = "x" * 5000
    retried = Recorded(second.path, huge, second.reply)
    with open_store(tmp_path / "capture.db", max_payload_bytes=4096) as log:
        capture = Capture(log)
        with caplog.at_level(logging.WARNING, logger="agenttrail.capture"):
            capture.write(exchange_of(first))
            assert capture.record(exchange_of(retried))
            assert capture.flush(10)
        assert capture.failures == 1 and "PayloadTooLarge" in caplog.text
        capture.write(exchange_of(second))
        capture.close()
        one, two = (payloads(list(log.read(s.id))) for s in log.sessions())
    assert [p["type"] for p in one] == ["message", "message", "tool_call"]
    with open_store(tmp_path / "import.db") as other:
        imported = payloads(import_events(other, TOOL_ERROR))
    # the whole history as the request sent it (the first response as history, without its
    # meta), then the response
    assert [(p["type"], p.get("role")) for p in two] == [
        (p["type"], p.get("role")) for p in imported
    ]
    assert two[0] == imported[0] and two[3:] == imported[3:]
    assert two[2] == {k: v for k, v in imported[2].items() if k != "messageId"}


def test_a_capture_limit_that_is_not_a_positive_integer_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match=r"AGENTTRAIL_CAPTURE_CONVERSATIONS.*not 0"):
        Capture(tmp_path / "capture.db", conversations=0)
    monkeypatch.setenv("AGENTTRAIL_CAPTURE_QUEUE", "lots")
    with pytest.raises(InputError, match="AGENTTRAIL_CAPTURE_QUEUE='lots' is not an integer"):
        Capture(tmp_path / "capture.db")
    assert not (tmp_path / "capture.db").exists()


def test_a_full_queue_drops_the_exchange_and_never_waits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Another process holds the log's write lock: the writer waits on its first exchange, one
    # more may wait behind it, the third is dropped at once, counted and logged.
    first, second = recorded(TOOL_ERROR)
    other = recorded(PROGRAMMATIC)[0]
    path = tmp_path / "capture.db"
    open_store(path).close()
    capture = Capture(path, queue=1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert capture.record(exchange_of(first))
        assert capture.record(exchange_of(other))
        with caplog.at_level(logging.WARNING, logger="agenttrail.capture"):
            start = time.monotonic()
            assert not capture.record(exchange_of(second))
            assert time.monotonic() - start < 0.5
        assert capture.failures == 1 and "queue full" in caplog.text
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert capture.flush(30)
    capture.close()
    assert capture.written == 2
    with open_store(path) as log:
        assert len(log.sessions()) == 2


def test_a_writer_process_that_dies_loses_only_what_it_had_not_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The log's write lock is held, so the writer process holds the first exchange unwritten
    # when it is killed: that one is lost (logged, counted); the next starts a new process.
    first, second = recorded(TOOL_ERROR)
    path = tmp_path / "capture.db"
    open_store(path).close()
    capture = Capture(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with caplog.at_level(logging.WARNING, logger="agenttrail.capture"):
        assert capture.record(exchange_of(first))
        deadline = time.monotonic() + 10
        while capture._writer.pid is None and time.monotonic() < deadline:  # type: ignore[union-attr]
            time.sleep(0.01)
        pid = capture._writer.pid  # type: ignore[union-attr]
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert capture.flush(10)
        holder.execute("ROLLBACK")
        holder.close()
        assert capture.failures == 1 and "the writer process exited" in caplog.text
        assert capture.record(exchange_of(second))
        assert capture.flush(30)
    capture.close()
    assert capture.written == 1
    with open_store(path) as log:
        assert [e.type for e in only_session(log)][-1] == "message"


def test_the_writer_process_yields_to_the_agent_but_keeps_a_share(tmp_path: Path) -> None:
    # nice 10, not SCHED_IDLE: an idle-class writer on a machine whose cores are all busy
    # took 9 s to write its first exchange (docs/benchmarks.md, Proxy; docs/capture.md).
    capture = Capture(tmp_path / "capture.db")
    assert capture.record(exchange_of(recorded(TOOL_ERROR)[0]))
    assert capture.flush(30)
    pid = capture._writer.pid  # type: ignore[union-attr]
    assert pid is not None
    try:
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, os.nice(0) + 10)
        assert os.sched_getscheduler(pid) == os.SCHED_OTHER
    finally:
        capture.close()
    assert capture.written == 1


def test_what_the_agent_handed_over_is_written_after_the_agent_is_killed(tmp_path: Path) -> None:
    # The agent hands over three exchanges while the log is locked, then dies (SIGKILL: no
    # exit handler runs). Its writer process writes all three once the lock is released.
    path = tmp_path / "capture.db"
    open_store(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    script = f"""
import os, signal, sys, time
sys.path.insert(0, {str(Path(__file__).parents[2])!r})
from agenttrail.ingest.capture import Capture
from tests.ingest.test_capture import exchange_of
from tests.ingest._upstream import TOOL_LOOP, recorded
from tests.formats._recordings import PROGRAMMATIC, TOOL_ERROR
capture = Capture({str(path)!r})
for item in [recorded(TOOL_ERROR)[0], recorded(TOOL_LOOP)[0], recorded(PROGRAMMATIC)[0]]:
    assert capture.record(exchange_of(item))
while capture._writer.queue.qsize():
    time.sleep(0.01)  # every exchange is on its way to the writer process
time.sleep(0.2)
os.kill(os.getpid(), signal.SIGKILL)
"""
    try:
        # not a pipe for its output: the writer process, which outlives it, inherits that
        errors = tmp_path / "agent.err"
        with errors.open("wb") as err:
            agent = subprocess.run([sys.executable, "-c", script], stderr=err, timeout=60)
        assert agent.returncode == -signal.SIGKILL, errors.read_text()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    deadline = time.monotonic() + 20
    sessions: list[Any] = []
    while len(sessions) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
        with open_store(path) as log:
            sessions = log.sessions()
    assert len(sessions) == 3


def test_a_writer_process_that_cannot_start_loses_the_exchange_and_never_hangs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    capture = Capture(tmp_path / "capture.db", writer="process")
    with caplog.at_level(logging.WARNING, logger="agenttrail.capture"):
        assert capture.record(exchange_of(recorded(TOOL_ERROR)[0]))
        assert capture.flush(10)
    assert (capture.failures, capture.written) == (1, 0)
    assert "cannot start the writer process" in caplog.text
    capture.close()


def test_an_exchange_that_cannot_reach_the_writer_process_is_lost_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A header value that is not text (a lock) cannot cross: that exchange is lost, logged
    # and counted; the next is written.
    first, second = recorded(TOOL_ERROR)
    odd = exchange_of(first, request_headers=[("user-agent", threading.Lock())])
    with Capture(tmp_path / "capture.db", writer="process") as capture:
        with caplog.at_level(logging.WARNING, logger="agenttrail.capture"):
            assert capture.record(odd)
            assert capture.record(exchange_of(second))
            assert capture.flush(30)
        assert (capture.failures, capture.written) == (1, 1)
    assert "could not be handed over" in caplog.text


def _exchanges_in(path: Path) -> int:
    """Exchanges the log at ``path`` holds, as a new reader sees it: each exchange's last
    event carries the only key with a tip (``…@nonce#tip``)."""
    with open_store(path) as log:
        keys = [key for s in log.sessions() for key, _ in log.event_keys(s.id)]
    return sum(1 for key in keys if "@" in key and "#" in key)


def test_exchanges_waiting_together_are_written_together_each_counted_once_durable(
    tmp_path: Path,
) -> None:
    # The log is locked while four exchanges of three conversations (one of two exchanges)
    # queue up: none is counted written while nothing can be. Once the lock goes, they are
    # written (those waiting together in one transaction), and at every moment what is
    # counted written is in the log for any reader; each conversation is the session import
    # makes of it.
    items = [*recorded(TOOL_ERROR), recorded(TOOL_LOOP)[0], recorded(PROGRAMMATIC)[0]]
    path = tmp_path / "capture.db"
    open_store(path).close()
    capture = Capture(path, writer="process")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        for item in items:
            assert capture.record(exchange_of(item))
        assert not capture.flush(0.5)
        assert capture.written == 0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    deadline = time.monotonic() + 30
    while capture.written < len(items) and time.monotonic() < deadline:
        counted = capture.written
        assert _exchanges_in(path) >= counted
    assert capture.flush(30)
    capture.close()
    assert (capture.written, capture.failures) == (len(items), 0)
    with open_store(path) as log, open_store(tmp_path / "import.db") as other:
        stored = [payloads(list(log.read(s.id))) for s in log.sessions()]
        assert len(stored) == 3
        assert payloads(import_events(other, TOOL_ERROR)) in stored


def test_a_flush_ends_the_writer_processes_linger_and_what_came_meanwhile_is_grouped() -> None:
    # The writer process's read of its pipe (_Frames), on real pipes: a writer that is busy
    # lingers after a group's first frame to take more, but a flush's byte on the wake pipe
    # ends the wait at once (here the linger is an hour: without the wake-up the read
    # would not return). The frames there by then are one group; the wake-up is used up.
    data_read, data_write = os.pipe()
    wake_read, wake_write = os.pipe()
    frames = _Frames(data_read, wake=wake_read, linger_s=3600)
    frames.last = time.monotonic()  # a group was just taken: the writer is busy
    try:
        os.write(data_write, b"".join(_FRAME.pack(len(f)) + f for f in (b"one", b"two")))
        taken: list[list[bytes]] = []
        reader = threading.Thread(target=lambda: taken.append(frames.group()), daemon=True)
        reader.start()
        os.write(data_write, _FRAME.pack(5) + b"three")
        os.write(wake_write, b"!")
        reader.join(60)
        assert not reader.is_alive(), "the flush did not end the linger"
        assert taken == [[b"one", b"two", b"three"]]
        assert not select.select([wake_read], [], [], 0)[0]  # the wake-up was read
    finally:
        for fd in (data_read, data_write, wake_read, wake_write):
            os.close(fd)


def test_an_exchange_that_fails_in_a_group_loses_only_itself(tmp_path: Path) -> None:
    # A group of two: the second exchange of a conversation whose first is already written,
    # and an exchange for a session that cannot be created (its title holds a NUL). Their
    # shared transaction fails; each is then written alone: the first continues its session
    # (read back from the log) as if nothing had happened, the other is reported, not raised.
    first, second = recorded(TOOL_LOOP)
    bad = NewSession("s-bad", title="a\x00b")
    with Capture(tmp_path / "capture.db", writer="thread") as capture:
        capture.write(exchange_of(first))
        whys = capture.write_group(
            [(exchange_of(second), None), (exchange_of(recorded(PROGRAMMATIC)[0]), bad)]
        )
    assert whys[0] is None
    assert whys[1] is not None and "InputError" in whys[1] and "NUL" in whys[1]
    with open_store(tmp_path / "capture.db") as log, open_store(tmp_path / "i.db") as other:
        assert payloads(only_session(log)) == payloads(import_events(other, TOOL_LOOP))


def test_headers_cross_to_the_writer_process_as_the_client_holds_them() -> None:
    # httpx's headers go as their raw bytes, names lowered, only those a record reads; the
    # writer decodes each value as UTF-8, else as ISO-8859-1 (one byte a character).
    import httpx

    sent = httpx.Headers(
        [
            (b"User-Agent", "naïve/1.0".encode()),
            (b"Authorization", f"Bearer {KEY}".encode()),
            (b"X-Stainless-Lang", b"python"),
            (b"Anthropic-Beta", b"caf\xe9"),
        ]
    )
    got = httpx.Headers([(b"Content-Type", b"application/json"), (b"x-api-key", KEY.encode())])
    exchange = HttpExchange("POST", "https://api.example/v1/messages", sent, b"{}", 200, got)
    wire = to_wire(exchange, None)
    assert KEY.encode() not in wire
    back, _ = from_wire(wire)
    assert back.request_headers == [("user-agent", "naïve/1.0"), ("anthropic-beta", "café")]
    assert back.response_headers == [("content-type", "application/json")]
    pairs = HttpExchange("POST", "u", {"User-Agent": "a", "Cookie": "c"}, b"")
    assert from_wire(to_wire(pairs, None))[0].request_headers == [("User-Agent", "a")]


def test_an_exchange_crosses_to_the_writer_process_without_its_credentials(
    tmp_path: Path,
) -> None:
    # What the agent's process sends its writer process holds no key (the headers go as the
    # few a record keeps, the URL without its credentials), and is written as the exchange
    # itself is.
    exchange = exchange_of(recorded(TOOL_ERROR)[0])
    joint = "&" if "?" in exchange.url else "?"
    exchange = dataclasses.replace(exchange, url=f"{exchange.url}{joint}key={KEY}")
    sent = to_wire(exchange, None)
    assert KEY.encode() not in sent
    with Capture(tmp_path / "a.db", writer="thread") as a, Capture(tmp_path / "b.db") as b:
        assert a.write_group([(exchange, None)]) == [None]
        assert b.write_group([from_wire(sent)]) == [None]
    with open_store(tmp_path / "a.db") as one, open_store(tmp_path / "b.db") as other:
        assert payloads(only_session(one)) == payloads(only_session(other))
