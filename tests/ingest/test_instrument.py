"""``agenttrail.instrument`` on the real ``openai`` and ``anthropic`` clients from PyPI, talking to
a real loopback server that replays recorded provider traffic (tests/ingest/_upstream.py):
what the instrumented client records is the session ``agenttrail import`` makes of the same
recording, and the caller sees exactly what it would see without agenttrail, faults included.

Recordings are read in place from ``../shared/realdata`` (tests/formats/_recordings.py cites the
SOURCES.md rows).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import yaml

import agenttrail
from agenttrail.ingest.importer import import_paths
from agenttrail.ingest.instrument import capture_of
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import Event
from agenttrail.views.pairing import pair_tool_calls
from tests.formats._recordings import CASSETTES, PROGRAMMATIC, SSE, TOOL_ERROR, import_events
from tests.ingest._upstream import (
    KEY,
    TOOL_LOOP,
    Recorded,
    Reply,
    Upstream,
    payloads,
    recorded,
    sse_reply,
)

pytestmark = pytest.mark.filterwarnings(
    # the recordings name models the client now warns about; the warning is not ours
    "ignore:The model .* is deprecated:DeprecationWarning"
)

STREAMED = CASSETTES / "test_chat_completion_multiple_tools_streaming_with_content.yaml"
NOT_COMPLETE = CASSETTES / "test_chat_completion_streaming_not_complete.yaml"
RESPONSES = CASSETTES / "test_responses_create_captures_tool_call_content[content_mode0].yaml"


def client_for(up: Upstream, provider: str, mode: str, **options: Any) -> Any:
    """A real client of ``provider`` (sync or async) pointed at the loopback upstream."""
    options = {"api_key": KEY, "max_retries": 0, **options}
    if provider == "openai":
        make = openai.AsyncOpenAI if mode == "async" else openai.OpenAI
        return make(base_url=f"{up.url}/v1", **options)
    made = anthropic.AsyncAnthropic if mode == "async" else anthropic.Anthropic
    return made(base_url=up.url, **options)


def create(client: Any, item: Recorded) -> Any:
    """The ``create`` call that sends ``item``'s recorded request."""
    if "/chat/completions" in item.path:
        return client.chat.completions.create(**item.body)
    if "/responses" in item.path:
        return client.responses.create(**item.body)
    return client.beta.messages.create(**item.body)


def call(client: Any, item: Recorded) -> list[Any]:
    """Send ``item`` and read the whole answer: the response, or every streamed event."""
    answer = create(client, item)
    return list(answer) if item.body.get("stream") else [answer]


async def acall(client: Any, item: Recorded) -> list[Any]:
    answer = await create(client, item)
    return [e async for e in answer] if item.body.get("stream") else [answer]


def run(client: Any, mode: str, items: list[Recorded]) -> None:
    """Send each of ``items`` in turn, then close the client (in the loop that used it)."""
    if mode == "async":

        async def all_of() -> None:
            async with client:
                for item in items:
                    await acall(client, item)

        asyncio.run(all_of())
    else:
        with client:
            for item in items:
                call(client, item)


def captured(client: Any, path: Path) -> tuple[LogStore, list[Event]]:
    capture = capture_of(client)
    assert capture is not None and capture.flush(10)
    store = open_store(path)
    [session] = store.sessions()
    return store, list(store.read(session.id))


RECORDINGS = [
    ("openai", TOOL_LOOP),
    ("openai", STREAMED),
    ("openai", NOT_COMPLETE),
    ("openai", RESPONSES),
    ("anthropic", TOOL_ERROR),
    ("anthropic", PROGRAMMATIC),
]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("provider", "path"), RECORDINGS, ids=lambda v: getattr(v, "stem", v))
def test_an_instrumented_client_records_the_session_import_makes(
    up: Upstream, tmp_path: Path, provider: str, path: Path, mode: str
) -> None:
    items = recorded(path)
    up.script(*(item.reply for item in items))
    client = agenttrail.instrument(client_for(up, provider, mode), log=tmp_path / "live.db")
    run(client, mode, items)
    store, got = captured(client, tmp_path / "live.db")
    with store, open_store(tmp_path / "import.db") as other:
        assert payloads(got) == payloads(import_events(other, path))
    assert [len(r[2]) > 0 for r in up.requests] == [True] * len(items)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_anthropic_stream_is_recorded_as_the_message_it_streamed(
    up: Upstream, tmp_path: Path, mode: str
) -> None:
    up.script(sse_reply(SSE.read_text()))
    item = Recorded(
        "/v1/messages",
        {
            "model": "claude-sonnet-4-20250514",
            "max_tokens": 1024,
            "stream": True,
            "messages": [{"role": "user", "content": "What is the weather in SF?"}],
        },
        Reply(),
    )
    client = agenttrail.instrument(client_for(up, "anthropic", mode), log=tmp_path / "live.db")
    run(client, mode, [item])
    store, got = captured(client, tmp_path / "live.db")
    with store, open_store(tmp_path / "import.db") as other:
        assert payloads(got)[0] == {
            "type": "message",
            "role": "user",
            "content": "What is the weather in SF?",
            "actor": "user",
        }
        assert payloads(got)[1:] == payloads(import_events(other, SSE))
    assert got[1].payload["meta"]["duration_ms"] > 0


def test_a_tool_loop_stores_each_message_once_and_pairs_results_by_id(
    up: Upstream, tmp_path: Path
) -> None:
    items = recorded(TOOL_LOOP)
    up.script(*(item.reply for item in items))
    client = agenttrail.instrument(client_for(up, "openai", "sync"), log=tmp_path / "live.db")
    run(client, "sync", items)
    store, got = captured(client, tmp_path / "live.db")
    store.close()
    second = items[1].body["messages"]
    assert len(second) > len(items[0].body["messages"])  # request 2 repeats request 1's history
    sent = [m for m in second if m["role"] in ("system", "user")]
    stored = [e for e in got if e.type == "message" and e.payload["role"] in ("system", "user")]
    assert [e.payload["content"] for e in stored] == [m["content"] for m in sent]
    calls = [e for e in got if e.type == "tool_call"]
    pairing = pair_tool_calls(got)
    assert calls and pairing.anomalies == {}
    results = {c.payload["id"]: pairing.result_of[c.seq].payload for c in calls}
    assert {i: r["toolCallId"] for i, r in results.items()} == {i: i for i in results}
    tools_sent = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
    assert {i: r["output"] for i, r in results.items()} == tools_sent


def outcome(fn: Any) -> tuple[list[Any], str]:
    """What a caller sees: the chunks it got, then the exception it got (type and text)."""
    got: list[Any] = []
    try:
        fn(got)
    except Exception as e:
        return got, f"{type(e).__name__}: {e}"
    return got, ""


def both(up: Upstream, tmp_path: Path, reply: Reply, fn: Any, **options: Any) -> Any:
    """The outcome of ``fn`` on a plain client, then on an instrumented one (same reply);
    returns the instrumented client."""
    up.script(reply, reply)
    with client_for(up, "openai", "sync", **options) as plain:
        seen = outcome(lambda got: fn(plain, got))
    client = agenttrail.instrument(
        client_for(up, "openai", "sync", **options), log=tmp_path / "live.db"
    )
    with client:
        assert outcome(lambda got: fn(client, got)) == seen
    return client


def chat(stream: bool) -> dict[str, Any]:
    message = {"role": "user", "content": "What's the weather in Seattle?"}
    return {"model": "gpt-4o-mini", "messages": [message], "stream": stream}


def errors_of(client: Any, tmp_path: Path) -> tuple[list[Event], list[dict[str, Any]]]:
    store, got = captured(client, tmp_path / "live.db")
    store.close()
    return got, [e.payload for e in got if e.type == "error"]


def _left_for_the_collector(client: Any, up: Upstream, item: Recorded, calls: int = 10) -> int:
    """Objects that ``calls`` calls of ``item`` leave that only the cycle collector frees."""
    with client:
        for _ in range(3):  # warm: first calls fill caches
            up.script(item.reply)
            call(client, item)
        gc.collect()
        gc.disable()
        try:
            for _ in range(calls):
                up.script(item.reply)
                call(client, item)
            return gc.collect()
        finally:
            gc.enable()


@pytest.mark.parametrize("path", [TOOL_LOOP, STREAMED], ids=["json", "stream"])
def test_a_recorded_call_leaves_no_more_for_the_cycle_collector_than_without(
    up: Upstream, tmp_path: Path, path: Path
) -> None:
    # A cycle per call (the response, its tee, the exchange) made the collector run every
    # twenty calls: half of instrument's CPU per call on a loopback (docs/benchmarks.md).
    item = recorded(path)[0]
    plain = _left_for_the_collector(client_for(up, "openai", "sync"), up, item)
    live = agenttrail.instrument(client_for(up, "openai", "sync"), log=tmp_path / "c.db")
    assert _left_for_the_collector(live, up, item) <= plain


def test_a_500_from_upstream_reaches_the_caller_and_the_log(up: Upstream, tmp_path: Path) -> None:
    body = b'{"error": {"message": "The server had an error", "type": "server_error"}}'

    def fn(client: Any, got: list[Any]) -> None:
        got.append(client.chat.completions.create(**chat(False)))

    client = both(up, tmp_path, Reply(500, body), fn)
    got, errors = errors_of(client, tmp_path)
    assert [e.type for e in got] == ["message", "error"]
    assert (errors[0]["message"], errors[0]["code"]) == ("The server had an error", 500)


def test_a_timeout_reaches_the_caller_and_the_log(up: Upstream, tmp_path: Path) -> None:
    def fn(client: Any, got: list[Any]) -> None:
        got.append(client.chat.completions.create(**chat(False)))

    reply = Reply(200, b"{}", delay_s=1.0)
    client = both(up, tmp_path, reply, fn, timeout=0.2)
    got, errors = errors_of(client, tmp_path)
    assert [e.type for e in got] == ["message", "error"]
    assert errors[0]["errorType"] == "transport_error"
    assert "Timeout" in errors[0]["message"]


def test_a_stream_cut_in_the_middle_is_seen_as_without_agenttrail_and_logged_incomplete(
    up: Upstream, tmp_path: Path
) -> None:
    [item] = recorded(STREAMED)
    reply = item.reply
    reply.cut_after = len(reply.events or []) // 2

    def fn(client: Any, got: list[Any]) -> None:
        for chunk in client.chat.completions.create(**item.body):
            got.append(chunk.model_dump())

    client = both(up, tmp_path, reply, fn)
    got, errors = errors_of(client, tmp_path)
    assert [e.type for e in got][:2] == ["message", "message"]  # the prompt, what arrived
    assert errors[-1]["errorType"] == "incomplete_stream" and errors[-1]["incomplete"] is True
    assert "cut short" in errors[-1]["message"]


def test_an_async_stream_cut_or_timed_out_is_seen_as_without_agenttrail(
    up: Upstream, tmp_path: Path
) -> None:
    [item] = recorded(STREAMED)
    cut = item.reply
    cut.cut_after = len(cut.events or []) // 2
    late = Reply(200, b"{}", delay_s=1.0)

    async def read(client: Any) -> list[tuple[int, str]]:
        seen = []
        async with client:
            for body in (item.body, chat(False)):
                got = 0
                try:
                    answer = await client.chat.completions.create(**body)
                    async for _ in answer:
                        got += 1
                except Exception as e:
                    seen.append((got, f"{type(e).__name__}: {e}"))
        return seen

    up.script(cut, late, cut, late)
    plain = asyncio.run(read(client_for(up, "openai", "async", timeout=0.2)))
    client = client_for(up, "openai", "async", timeout=0.2)
    agenttrail.instrument(client, log=tmp_path / "live.db")
    assert asyncio.run(read(client)) == plain
    capture = capture_of(client)
    assert capture is not None and capture.flush(10)
    with open_store(tmp_path / "live.db") as store:
        kinds = [e.payload.get("errorType") for s in store.sessions() for e in store.read(s.id)]
    assert sorted(k for k in kinds if k) == ["incomplete_stream", "transport_error"]


def test_a_stream_the_caller_abandons_is_logged_incomplete(up: Upstream, tmp_path: Path) -> None:
    [item] = recorded(STREAMED)

    def fn(client: Any, got: list[Any]) -> None:
        stream = client.chat.completions.create(**item.body)
        got.append(next(iter(stream)).model_dump())
        stream.close()

    client = both(up, tmp_path, item.reply, fn)
    _, errors = errors_of(client, tmp_path)
    assert errors[-1]["incomplete"] is True
    assert errors[-1]["message"].endswith("the caller closed it before its end")


def test_the_first_chunk_is_passed_on_as_it_arrives(up: Upstream, tmp_path: Path) -> None:
    [item] = recorded(STREAMED)
    item.reply.event_gap_s = 0.3
    up.script(item.reply)
    client = agenttrail.instrument(client_for(up, "openai", "sync"), log=tmp_path / "live.db")
    with client:
        start = time.perf_counter()
        stream = client.chat.completions.create(**item.body)
        next(iter(stream))
        first = time.perf_counter() - start
        stream.close()
    assert first < 0.3  # the next event is 0.3 s behind it: nothing waited for it


def test_a_failing_log_leaves_the_call_untouched(up: Upstream, tmp_path: Path) -> None:
    path = tmp_path / "live.db"
    path.write_text("not a database\n")
    items = recorded(TOOL_ERROR)
    up.script(items[0].reply)
    client = agenttrail.instrument(client_for(up, "anthropic", "sync"), log=path)
    with client:
        answer = call(client, items[0])[0]
    assert answer.id == "msg_01RMQBcKf2dxTq6qfi31BBTz"
    capture = capture_of(client)
    assert capture is not None and capture.flush(10)
    assert capture.failures == 1
    assert path.read_text() == "not a database\n"


@pytest.mark.parametrize(("provider", "path"), [("openai", TOOL_LOOP), ("anthropic", TOOL_ERROR)])
def test_no_api_key_reaches_the_database_file(
    up: Upstream, tmp_path: Path, provider: str, path: Path
) -> None:
    items = recorded(path)
    up.script(*(item.reply for item in items))
    sent_too = {  # wherever else a key may travel: a proxy's or a gateway's header, the URL
        "default_headers": {"api-key": KEY, "x-api-key": KEY, "x-goog-api-key": KEY},
        "default_query": {"key": KEY, "access_token": KEY},
    }
    client = client_for(up, provider, "sync", **sent_too)
    agenttrail.instrument(client, log=tmp_path / "live.db")
    run(client, "sync", items)
    captured(client, tmp_path / "live.db")[0].close()
    assert all(KEY in url and KEY in str(headers.values()) for url, headers, _ in up.requests)
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("live.db*"))
    assert b"get_weather" in stored or b"get_current_weather" in stored
    assert KEY.encode() not in stored and KEY[3:19].encode() not in stored


def test_the_session_context_and_session_argument_choose_the_session(
    up: Upstream, tmp_path: Path
) -> None:
    items = recorded(TOOL_ERROR)[:1] + recorded(PROGRAMMATIC)[:1]
    up.script(*(item.reply for item in items))
    client = agenttrail.instrument(client_for(up, "anthropic", "async"), log=tmp_path / "live.db")

    async def both_in_one() -> str:
        async with client:
            with agenttrail.session(title="Weather and maths") as session_id:
                for item in items:
                    await acall(client, item)
        return session_id

    session_id = asyncio.run(both_in_one())
    store, got = captured(client, tmp_path / "live.db")
    with store:
        assert store.get_session(session_id).title == "Weather and maths"
    assert sum(e.type == "message" and e.payload["role"] == "user" for e in got) == 2

    up.script(*(item.reply for item in items))
    other = client_for(up, "anthropic", "sync")
    agenttrail.instrument(other, log=tmp_path / "other.db", session="nightly-batch")
    run(other, "sync", items)
    store, got = captured(other, tmp_path / "other.db")
    with store:
        assert [s.id for s in store.sessions()] == ["nightly-batch"]
        assert store.get_session("nightly-batch").title == "What is the weather in SF?"
    assert sum(e.type == "message" and e.payload["role"] == "user" for e in got) == 2


def test_instrument_takes_only_provider_clients_and_once(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="takes an openai or anthropic client"):
        agenttrail.instrument(object())
    with openai.OpenAI(api_key=KEY, base_url="http://127.0.0.1:9/v1") as client:
        assert agenttrail.instrument(client, log=tmp_path / "a.db") is client
        capture = capture_of(client)
        assert agenttrail.instrument(client, log=tmp_path / "b.db") is client
        assert capture_of(client) is capture


def test_a_client_given_its_own_httpx_client_is_recorded_the_same(
    up: Upstream, tmp_path: Path
) -> None:
    # The clients take a caller's httpx.Client (http_client=); instrument finds its module
    # from the client object, whichever httpx it is.
    items = recorded(TOOL_LOOP)
    up.script(*(item.reply for item in items))
    client = client_for(up, "openai", "sync", http_client=httpx.Client())
    assert type(client._client).__module__.startswith("httpx")
    agenttrail.instrument(client, log=tmp_path / "live.db")
    run(client, "sync", items)
    store, got = captured(client, tmp_path / "live.db")
    with store, open_store(tmp_path / "import.db") as other:
        assert payloads(got) == payloads(import_events(other, TOOL_LOOP))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_client_on_a_mock_transport_is_recorded_the_same(tmp_path: Path, mode: str) -> None:
    # An agent's own tests answer its client with httpx.MockTransport, whose responses come
    # already read: there is no stream left to tee, and they were not recorded at all.
    items = recorded(TOOL_LOOP)
    replies = iter(items)

    def answer(request: httpx.Request) -> httpx.Response:
        reply = next(replies).reply
        return httpx.Response(reply.status, content=reply.body, headers=reply.headers)

    options: dict[str, Any] = {"api_key": KEY, "max_retries": 0, "base_url": "http://mock/v1"}
    if mode == "async":
        transport: Any = httpx.MockTransport(answer)
        client: Any = openai.AsyncOpenAI(
            http_client=httpx.AsyncClient(transport=transport), **options
        )
    else:
        client = openai.OpenAI(
            http_client=httpx.Client(transport=httpx.MockTransport(answer)), **options
        )
    agenttrail.instrument(client, log=tmp_path / "live.db")
    run(client, mode, items)
    store, got = captured(client, tmp_path / "live.db")
    with store, open_store(tmp_path / "import.db") as other:
        assert payloads(got) == payloads(import_events(other, TOOL_LOOP))


def _agent_script(up: Upstream, tmp_path: Path, item: Recorded, lines: str) -> None:
    """Run ``lines`` as the end of an agent's script in a fresh interpreter, its client
    instrumented (log ``tmp_path/live.db``) and ``body`` the request ``item`` records; the
    script exits on its own (no flush, no close)."""
    script = f"""
import json, sys, openai, agenttrail
client = agenttrail.instrument(
    openai.OpenAI(api_key="k", base_url={up.url + "/v1"!r}, max_retries=0),
    log={str(tmp_path / "live.db")!r},
)
body = json.loads(sys.stdin.read())
{lines}
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(item.body),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_what_is_captured_just_before_the_interpreter_exits_is_written(
    up: Upstream, tmp_path: Path
) -> None:
    # The agent neither flushes nor closes: the writer thread is a daemon, and the exit waits
    # for what it still holds (docs/capture.md).
    [item, _] = recorded(TOOL_LOOP)
    up.script(item.reply)
    _agent_script(up, tmp_path, item, "client.chat.completions.create(**body)")
    with open_store(tmp_path / "live.db") as store:
        [session] = store.sessions()
        assert [e.type for e in store.read(session.id)][-1] == "tool_call"


def test_a_stream_left_open_when_the_interpreter_exits_is_written_abandoned(
    up: Upstream, tmp_path: Path
) -> None:
    # A script that breaks out of a stream at its top level and ends: the stream is still
    # held by a global, never closed, and nothing was written at all (no database either).
    item = recorded(STREAMED)[0]
    up.script(item.reply)
    lines = "stream = client.chat.completions.create(**body)\nfor chunk in stream:\n    break"
    _agent_script(up, tmp_path, item, lines)
    with open_store(tmp_path / "live.db") as store:
        [session] = store.sessions()
        last = list(store.read(session.id))[-1].payload
    assert (last["type"], last["errorType"]) == ("error", "incomplete_stream")
    assert last["message"].endswith("the caller closed it before its end")


def responses_stream(response: dict[str, Any]) -> str:
    """The server-sent events the Responses API sends for ``response`` when asked to stream,
    in the documented order (platform.openai.com/docs/api-reference/responses-streaming):
    ``response.created`` and ``.in_progress`` with no output yet, then per output item
    ``response.output_item.added``, its deltas (text, or function-call arguments) and their
    ``.done``, ``response.output_item.done`` with the whole item, then ``response.completed``
    with the whole response. Each delta is cut in two, as a stream cuts text."""
    events: list[str] = []

    def emit(kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": len(events), **fields}
        events.append(f"event: {kind}\ndata: {json.dumps(data)}\n\n")

    started = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for i, item in enumerate(response["output"]):
        where = {"item_id": item["id"], "output_index": i}
        if item["type"] == "function_call":
            emit("response.output_item.added", output_index=i, item={**item, "arguments": ""})
            args = item["arguments"]
            for part in (args[: len(args) // 2], args[len(args) // 2 :]):
                emit("response.function_call_arguments.delta", **where, delta=part)
            emit("response.function_call_arguments.done", **where, arguments=args)
        else:
            assert item["type"] == "message", item["type"]
            emit("response.output_item.added", output_index=i, item={**item, "content": []})
            for j, part in enumerate(item["content"]):
                at = {**where, "content_index": j}
                emit("response.content_part.added", **at, part={**part, "text": ""})
                text = part["text"]
                for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                    emit("response.output_text.delta", **at, delta=piece, logprobs=[])
                emit("response.output_text.done", **at, text=text, logprobs=[])
                emit("response.content_part.done", **at, part=part)
        emit("response.output_item.done", output_index=i, item=item)
    emit("response.completed", response=response)
    return "".join(events)


RESPONSES_OUTPUT = CASSETTES / "test_responses_with_function_call_output.yaml"


def every_event(store: LogStore) -> list[dict[str, Any]]:
    """The payloads of every session in ``store``, the session started first first: a file
    imports as one session, where capture keeps each conversation in its own."""
    ordered = sorted(store.sessions(), key=lambda s: s.started or "")
    return [p for s in ordered for p in payloads(list(store.read(s.id)))]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("path", [RESPONSES, RESPONSES_OUTPUT], ids=lambda p: p.stem)
def test_a_responses_stream_is_recorded_as_the_response_it_streamed(
    up: Upstream, tmp_path: Path, mode: str, path: Path
) -> None:
    # The real recorded (non-streaming) responses, streamed as the Responses API streams
    # them: the sessions recorded from the streams are the ones import makes of the same
    # exchanges recorded, and read as the recording of the same responses not streamed.
    # (RESPONSES_OUTPUT sends the same first request twice: two conversations, then a
    # function call's output continuing the second by previous_response_id.)
    items = recorded(path)
    streams = [responses_stream(json.loads(item.reply.body)) for item in items]
    up.script(*(sse_reply(text) for text in streams))
    asked = [Recorded(i.path, {**i.body, "stream": True}, i.reply) for i in items]
    client = agenttrail.instrument(client_for(up, "openai", mode), log=tmp_path / "live.db")
    run(client, mode, asked)
    capture = capture_of(client)
    assert capture is not None and capture.flush(10)
    cassette = tmp_path / "streamed.yaml"
    interactions = [
        {
            "request": {
                "body": json.dumps(item.body),
                "headers": {"Content-Type": ["application/json"]},
                "method": "POST",
                "uri": f"https://api.openai.com{item.path}",
            },
            "response": {
                "body": {"string": text},
                "headers": {"Content-Type": ["text/event-stream"]},
                "status": {"code": 200, "message": "OK"},
            },
        }
        for item, text in zip(asked, streams, strict=True)
    ]
    cassette.write_text(yaml.safe_dump({"interactions": interactions, "version": 1}))
    with (
        open_store(tmp_path / "live.db") as live,
        open_store(tmp_path / "streamed.db") as streamed,
        open_store(tmp_path / "whole.db") as whole,
    ):
        import_paths(streamed, [cassette])
        import_paths(whole, [path])
        got = every_event(live)
        assert got == every_event(streamed)
        assert got == every_event(whole)
        # each request that does not continue a response starts a conversation of its own
        assert len(live.sessions()) == sum("previous_response_id" not in i.body for i in items)
    assert any(p["type"] == "tool_call" for p in got)


ANSWER = {
    "id": "resp_C",
    "object": "response",
    "created_at": 1700000000,
    "status": "completed",
    "model": "gpt-4.1",
    "output": [
        {
            "type": "message",
            "id": "msg_C",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "The answer is 42", "annotations": []}],
        }
    ],
}
"""A response whose text the tests below stream in two deltas and break off after them."""


@pytest.mark.parametrize("ending", ["cut", "error event"])
def test_a_responses_stream_broken_off_keeps_the_text_the_caller_got(
    up: Upstream, tmp_path: Path, ending: str
) -> None:
    # Before: a cut stream left an assistant message with content "" (only finished items
    # were kept), and an error event left no assistant message at all.
    events = [e + "\n\n" for e in responses_stream(ANSWER).split("\n\n") if e]
    sent = events[:6]  # created, in_progress, the item, its part, the text's two deltas
    assert [json.loads(e.split("data: ")[1])["type"] for e in sent][-2:] == [
        "response.output_text.delta"
    ] * 2
    error = {"type": "error", "sequence_number": 6, "code": "server_error"}
    error |= {"message": "An error occurred", "param": None}
    if ending == "cut":
        reply = sse_reply("".join(events), cut_after=len(sent))
    else:
        reply = sse_reply("".join(sent) + f"event: error\ndata: {json.dumps(error)}\n\n")
    up.script(reply)
    client = agenttrail.instrument(client_for(up, "openai", "sync"), log=tmp_path / "live.db")
    text = ""
    with client, contextlib.suppress(openai.APIConnectionError):  # the cut reaches the caller
        for event in client.responses.create(model="gpt-4.1", input="What is it?", stream=True):
            text += event.delta if event.type == "response.output_text.delta" else ""
    assert text == "The answer is 42"
    store, got = captured(client, tmp_path / "live.db")
    store.close()
    meta = {"model": "gpt-4.1", "provider": "openai", "usage": None, "location": "remote"}
    assert payloads(got)[:2] == [
        {"type": "message", "role": "user", "content": "What is it?"},
        {
            "type": "message",
            "role": "assistant",
            "content": "The answer is 42",
            "meta": meta | {"duration_ms": None},
            "messageId": "msg_C",
            "responseId": "resp_C",
            "status": "in_progress",
        },
    ]
    [failure] = payloads(got)[2:]
    if ending == "cut":
        assert failure["message"].startswith("the response stream was cut short: ")
        assert (failure["errorType"], failure["incomplete"]) == ("incomplete_stream", True)
    else:
        detail = {k: v for k, v in error.items() if k != "type"}
        assert failure == {
            "type": "error",
            "message": "An error occurred",
            "code": "server_error",
            "detail": detail,
            "incomplete": True,  # it cut short the answer before it
        }


def test_a_chat_stream_ended_by_an_error_chunk_keeps_the_text_and_one_error(
    up: Upstream, tmp_path: Path
) -> None:
    # Before: the error chunk replaced the answer, and the caller's closing the stream at it
    # (the SDK raises there) was recorded as a second error, "the caller closed it before
    # its end".
    head = {"id": "chatcmpl-Q", "object": "chat.completion.chunk", "created": 1700000000}
    head["model"] = "gpt-4o"
    deltas = [{"role": "assistant", "content": ""}, {"content": "The answer is "}]
    deltas.append({"content": "forty"})
    chunks: list[dict[str, Any]] = [
        head | {"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    error = {"message": "The server had an error while processing your request."}
    error["type"] = "server_error"
    chunks.append({"error": error})
    reply = sse_reply("".join(f"data: {json.dumps(c)}\n\n" for c in chunks))

    def fn(client: Any, got: list[Any]) -> None:
        for chunk in client.chat.completions.create(**chat(True)):
            got.append(chunk.choices[0].delta.content)

    client = both(up, tmp_path, reply, fn)
    got, _ = errors_of(client, tmp_path)
    assert payloads(got) == [
        {"type": "message", "role": "user", "content": "What's the weather in Seattle?"},
        {
            "type": "message",
            "role": "assistant",
            "content": "The answer is forty",
            "meta": {
                "model": "gpt-4o",
                "provider": "openai",
                "usage": None,
                "duration_ms": None,
                "location": "remote",
            },
            "messageId": "chatcmpl-Q",
        },
        {"type": "error", "message": error["message"], "detail": error, "incomplete": True},
    ]


def test_an_azure_stream_takes_its_model_id_and_time_from_the_chunks_that_have_them(
    up: Upstream, tmp_path: Path
) -> None:
    # Azure OpenAI's first chunk carries the prompt's content filter results, with id "",
    # model "", created 0 and no choices (learn.microsoft.com, Azure OpenAI content
    # filtering, streaming). Before: the message had model "" and id "", and times of 1970.
    head = {"id": "chatcmpl-AZ", "object": "chat.completion.chunk", "created": 1700000000}
    head["model"] = "gpt-4o-2024-11-20"
    filtered = {"prompt_index": 0, "content_filter_results": {}}
    first = {"id": "", "object": "", "created": 0, "model": "", "choices": []}
    chunks: list[dict[str, Any]] = [first | {"prompt_filter_results": [filtered]}]
    deltas = [({"role": "assistant", "content": ""}, None), ({"content": "Hi"}, None)]
    for delta, finish in [*deltas, ({}, "stop")]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        chunks.append(head | {"choices": [choice | {"content_filter_results": {}}]})
    usage = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    chunks.append(head | {"choices": [], "usage": usage})
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    up.script(sse_reply(text))
    azure = openai.AzureOpenAI(
        azure_endpoint=up.url, api_key=KEY, api_version="2024-10-21", max_retries=0
    )
    client = agenttrail.instrument(azure, log=tmp_path / "live.db")
    with client:
        list(
            client.chat.completions.create(
                model="my-deployment",
                messages=[{"role": "user", "content": "hello azure"}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    store, got = captured(client, tmp_path / "live.db")
    store.close()
    assert [e.created_at for e in got] == ["2023-11-14T22:13:20.000000Z"] * 2
    assert payloads(got) == [
        {"type": "message", "role": "user", "content": "hello azure"},
        {
            "type": "message",
            "role": "assistant",
            "content": "Hi",
            "meta": {
                "model": "gpt-4o-2024-11-20",
                "provider": "openai",
                "usage": {"input": 7, "output": 2, "cache_read": None, "cache_write": None},
                "usage_raw": usage,
                "duration_ms": None,
                "location": "remote",
            },
            "messageId": "chatcmpl-AZ",
            "finishReason": "stop",
        },
    ]
