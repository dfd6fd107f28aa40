"""No secret survives, whichever way it comes in (docs/redaction.md): secrets of every built-in
kind (tests/_secrets.py) are driven in through the recorder, the import of a file, REST, the
OTLP receiver (the real OpenTelemetry SDK's exporter), an instrumented OpenAI client and the
proxy (both talking to the loopback upstream of
tests/ingest/_upstream.py, which replays a recorded tool loop), then looked for in every way
out: the export, the three replays, Fountain, the server's and the viewer's JSON, the log
records, and the raw bytes of the database, its WAL and its shared-memory file.

Recording (tests/formats/_recordings.py cites its SOURCES.md row): ``TOOL_LOOP``, two Chat
Completions exchanges whose second request repeats the first's history.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from websockets.sync.client import connect

import agenttrail
from agenttrail.ingest.capture import Capture
from agenttrail.ingest.instrument import capture_of
from agenttrail.log.store import open_store
from agenttrail.model import Event, NewSession, events
from agenttrail.server import create_app, mint_token
from agenttrail.server.tools import ToolRegistry
from tests._secrets import ALL, AWS_SECRET, CASES, SESSION_TOKEN, found_in
from tests.conftest import run_cli, serving
from tests.ingest._upstream import KEY, TOOL_LOOP, Recorded, Upstream, recorded
from tests.ingest.test_capture import exchange_of
from tests.ingest.test_proxy import running_proxy

SECRET = b"test-secret-not-for-production-0123456789abcdef"

CASES_BY_KIND = {kind: text for kind, text, _ in CASES}
URL_KEY = "Zq8vN2xW4yT6uR1s"
"""The secret of the ``url-key`` case of tests/_secrets.py."""

CARRY_TEXT = (
    "export",
    "fountain",
    "show",
    "openai",
    "anthropic",
    "responses",
    "/events",
    "/transcript",
)
"""The outputs that show the sessions' text (the others: lists, summaries, trace rows)."""

CREDENTIALS = json.dumps(  # what `aws sts get-session-token` prints
    {
        "Credentials": {
            "AccessKeyId": "ASIAIOSFODNN7EXAMPLE",
            "SecretAccessKey": AWS_SECRET,
            "SessionToken": SESSION_TOKEN,
            "Expiration": "2026-12-04T00:00:00Z",
        }
    },
    indent=2,
)


def with_secrets(items: list[Recorded]) -> list[Recorded]:
    """The tool loop with every secret in its system prompt and AWS credentials as the tools'
    output, the second request repeating both (as a client sends its history)."""
    for item in items:
        messages = item.body["messages"]
        messages[0]["content"] = f"You're a helpful assistant. Keys:\n{ALL}"
        for message in messages:
            if message["role"] == "tool":
                message["content"] = CREDENTIALS
    return items


def outputs(db: Path, session_id: str) -> dict[str, str]:
    """Every way out of the log for one session, by name: what a person, a model or another
    tool gets."""
    got: dict[str, str] = {}
    for name, args in {
        "export": ("export", session_id),
        "fountain": ("fountain", session_id),
        "show": ("show", session_id),
        **{
            f"replay {f}": ("replay", session_id, "--format", f)
            for f in ("openai", "anthropic", "responses")
        },
    }.items():
        done = run_cli(*args, "--db", str(db))
        assert done.returncode == 0, (name, done.stderr)
        got[name] = done.stdout + done.stderr
    with open_store(db) as store:
        app = create_app(store, secret=SECRET, tools=ToolRegistry([]))
        token = mint_token(SECRET, rights=["read", "audit"])
        with serving(app) as port:
            base = f"http://127.0.0.1:{port}/v1"
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
                for path in (
                    "/sessions",
                    f"/sessions/{session_id}",
                    f"/sessions/{session_id}/events",
                    f"/sessions/{session_id}/fountain",
                    f"/sessions/{session_id}/transcript",
                    f"/sessions/{session_id}/summary",
                    f"/sessions/{session_id}/traces",
                    *(
                        f"/sessions/{session_id}/replay?format={f}"
                        for f in ("openai", "anthropic", "responses")
                    ),
                ):
                    reply = http.get(path)
                    assert reply.status_code == 200, (path, reply.text)
                    got[f"GET {path}"] = reply.text
    return got


def assert_nothing_secret(db: Path, caplog: pytest.LogCaptureFixture) -> None:
    """No secret in any output of any session, in the log records, or in the bytes of the
    database files (while a store has them open, and after it closed them)."""
    with open_store(db) as store:
        sessions = [s.id for s in store.sessions()]
        assert sessions
        in_use = b"".join(p.read_bytes() for p in db.parent.glob(f"{db.name}*"))
        assert {p.name for p in db.parent.glob(f"{db.name}*")} >= {db.name, f"{db.name}-wal"}
        assert found_in(in_use) == []
    for session_id in sessions:
        for name, text in outputs(db, session_id).items():
            assert found_in(text) == [], name
            if name.endswith(CARRY_TEXT):
                assert "[REDACTED:" in text, name  # the secrets were there, as markers
    assert found_in(caplog.text) == []
    assert found_in(b"".join(p.read_bytes() for p in db.parent.glob(f"{db.name}*"))) == []


def test_the_recorder(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agenttrail")
    db = tmp_path / "rec.db"
    with (
        open_store(db) as store,
        agenttrail.Recorder.start(store, title=f"debug {ALL[:60]}", agent="harvey") as rec,
        rec.turn(model="gpt-4o", provider="openai") as turn,
    ):
        turn.user(f"my keys: {ALL}")
        ids = turn.assistant(
            "Checking.",
            tool_calls=[
                ("run_shell", {"cmd": "aws sts", "env": {"AWS_SECRET_ACCESS_KEY": AWS_SECRET}})
            ],
        )
        turn.tool_result(ids[0], CREDENTIALS)
        turn.reply(f"Found {ALL}")
    assert_nothing_secret(db, caplog)


def test_the_import_of_a_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agenttrail")
    db, source = tmp_path / "imp.db", tmp_path / "chat.json"
    source.write_text(
        json.dumps(
            {
                "model": "gpt-4o",
                "messages": [
                    {"role": "system", "content": ALL},
                    {"role": "user", "content": "credentials?"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {
                                    "name": "sts",
                                    "arguments": json.dumps({"password": "hunter2hunter2"}),
                                },
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "call_1", "content": CREDENTIALS},
                ],
            }
        )
    )
    first = run_cli("import", str(source), "--db", str(db))
    assert first.returncode == 0, first.stderr
    again = run_cli("import", str(source), "--db", str(db))
    assert "0 events written" in again.stderr  # the markers are the same: nothing new
    assert_nothing_secret(db, caplog)
    assert b"hunter2hunter2" not in b"".join(p.read_bytes() for p in tmp_path.glob("imp.db*"))


def test_an_export_that_holds_a_secret_is_refused_whole_by_a_redacting_log(tmp_path: Path) -> None:
    plain, redacting = tmp_path / "plain.db", tmp_path / "redacting.db"
    with open_store(plain, redact=False) as store:
        sid = store.create_session(agenttrail.NewSession()).id
        store.append(sid, {"type": "message", "role": "user", "content": ALL})
    export = tmp_path / "x.jsonl"
    assert run_cli("export", sid, "--db", str(plain), "-o", str(export)).returncode == 0
    refused = run_cli("import", str(export), "--db", str(redacting))
    assert refused.returncode == 2
    assert "event 1 holds a secret (openai-key at $.content)" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert not redacting.exists() or open_store(redacting).sessions() == []
    verbatim = run_cli("import", str(export), "--db", str(redacting), "--no-redact")
    assert verbatim.returncode == 0, verbatim.stderr


def test_rest(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agenttrail")
    db = tmp_path / "rest.db"
    with open_store(db) as store:
        app = create_app(store, secret=SECRET, tools=ToolRegistry([]))
        token = mint_token(SECRET, rights=["append", "read"])
        with (
            serving(app) as port,
            httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}
            ) as http,
        ):
            made = http.post("/v1/sessions", json={"title": ALL[:80], "metadata": {"api_key": KEY}})
            assert made.status_code == 201, made.text
            assert found_in(made.text) == [] and KEY not in made.text
            sid = made.json()["id"]
            body = {
                "events": [
                    {"payload": {"type": "message", "role": "user", "content": ALL}, "key": "k1"},
                    {"payload": {"type": "tool_result", "toolCallId": "c", "output": CREDENTIALS}},
                ]
            }
            assert http.post(f"/v1/sessions/{sid}/events", json=body).status_code == 201
            again = http.post(
                f"/v1/sessions/{sid}/events",
                json={"payload": body["events"][0]["payload"], "key": "k1"},
            )
            assert again.json()["duplicates"] == [True]
    assert_nothing_secret(db, caplog)


def instrumented(up: Upstream, db: Path) -> tuple[list[Recorded], list[Event]]:
    items = with_secrets(recorded(TOOL_LOOP))
    up.script(*(item.reply for item in items))
    client = openai.OpenAI(
        base_url=f"{up.url}/v1", api_key=KEY, max_retries=0, default_query={"key": KEY}
    )
    agenttrail.instrument(client, log=db)
    with client:
        for item in items:
            client.chat.completions.create(**item.body)
    capture = capture_of(client)
    assert capture is not None and capture.flush(10) and capture.failures == 0
    with open_store(db) as store:
        [session] = store.sessions()
        return items, list(store.read(session.id))


def test_an_instrumented_client_stores_each_redacted_message_once(
    server: Upstream, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agenttrail")
    server.replies.clear()
    db = tmp_path / "live.db"
    items, got = instrumented(server, db)
    # The second request repeats the system prompt (holding every secret), the user's
    # message and the tool results: recognised as the same conversation, not stored again.
    second = items[1].body["messages"]
    messages = [e.payload for e in got if e.type == "message"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "assistant"]
    results = [e.payload for e in got if e.type == "tool_result"]
    assert len(results) == len([m for m in second if m["role"] == "tool"]) == 2
    assert all(r["output"].count("[REDACTED:") == 3 for r in results)  # id, secret, token
    assert "[REDACTED:openai-key:" in messages[0]["content"]
    assert_nothing_secret(db, caplog)


def test_the_proxy(server: Upstream, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agenttrail")
    server.replies.clear()
    db = tmp_path / "proxy.db"
    items = with_secrets(recorded(TOOL_LOOP))
    with (
        running_proxy(server.url, db) as proxy,
        openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        for item in items:
            server.script(item.reply)
            client.chat.completions.create(**item.body)
        proxy.logged("tool_result", "the tool results", count=2)
        sent: Any = json.loads(server.requests[-1][2])
        assert sent["messages"][0]["content"].endswith(ALL)  # passed on untouched
    assert_nothing_secret(db, caplog)


def test_a_restarted_capture_recognises_a_history_that_holds_secrets(db_url: str) -> None:
    # The tips written into the log's keys are digests of the requests as sent, and so are
    # those of the requests after a restart: the redacted stored messages are never compared.
    first, second = with_secrets(recorded(TOOL_LOOP))
    before = Capture(db_url)
    before.write(exchange_of(first))
    before.close()
    after = Capture(db_url)  # a new process: nothing in memory
    after.write(exchange_of(second))
    after.close()
    with open_store(db_url) as store:
        [session] = store.sessions()
        got = [e.payload for e in store.read(session.id)]
    roles = [p["role"] for p in got if p["type"] == "message"]
    assert roles == ["system", "user", "assistant", "assistant"]
    assert [p["type"] for p in got].count("tool_result") == 2
    assert found_in(json.dumps(got)) == [] and "[REDACTED:jwt:" in got[0]["content"]


def test_a_trace_row_holds_the_call_and_envelope_as_stored(tmp_path: Path) -> None:
    # A model-run envelope (docs/evidence.md) whose inputs echo a key the call was given.
    db = tmp_path / "trace.db"
    inputs = {"prompt": "score it", "api_key": AWS_SECRET, "note": f"with {ALL}"}
    envelope = {"model": "scorer", "specVersion": "1", "inputs": inputs, "outputs": {"y": 2}}
    with (
        open_store(db) as store,
        agenttrail.Recorder.start(store, title="traced") as rec,
        rec.turn(model="m", provider="p") as turn,
    ):
        turn.user("score it")
        [call_id] = turn.assistant("", tool_calls=[("scorer", inputs)])
        turn.tool_result(call_id, json.dumps(envelope))
        [row] = store.traces(rec.session_id)
    assert found_in(row.inputs) == [] and found_in(row.envelope) == []
    assert json.loads(row.inputs)["api_key"].startswith("[REDACTED:api_key:")
    assert found_in(b"".join(p.read_bytes() for p in tmp_path.glob("trace.db*"))) == []


def test_the_otlp_receiver(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # An agent's spans by the GenAI conventions (docs/otel.md), exported by the real SDK.
    caplog.set_level(logging.DEBUG, logger="agenttrail")
    db = tmp_path / "otlp.db"
    with open_store(db) as store:
        app = create_app(store, secret=SECRET, tools=ToolRegistry([]))
        token = mint_token(SECRET, rights=["append"])
        with serving(app) as port:
            exporter = OTLPSpanExporter(
                endpoint=f"http://127.0.0.1:{port}/v1/traces",
                headers={"Authorization": f"Bearer {token}"},
            )
            provider = TracerProvider()
            provider.add_span_processor(BatchSpanProcessor(exporter))
            tracer = provider.get_tracer("agent")
            with tracer.start_as_current_span("invoke_agent planner") as agent:
                agent.set_attribute("gen_ai.operation.name", "invoke_agent")
                with tracer.start_as_current_span("chat gpt-4o") as chat:
                    system = [{"type": "text", "content": ALL}]
                    question = [{"role": "user", "parts": [{"type": "text", "content": "go"}]}]
                    chat.set_attributes(
                        {
                            "gen_ai.operation.name": "chat",
                            "gen_ai.provider.name": "openai",
                            "gen_ai.request.model": "gpt-4o",
                            "gen_ai.system_instructions": json.dumps(system),
                            "gen_ai.input.messages": json.dumps(question),
                        }
                    )
                with tracer.start_as_current_span("execute_tool sts") as tool:
                    tool.set_attributes(
                        {
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": "sts",
                            "gen_ai.tool.call.id": "call_1",
                            "gen_ai.tool.call.arguments": json.dumps(
                                {"password": "hunter2hunter2"}
                            ),
                            "gen_ai.tool.call.result": CREDENTIALS,
                        }
                    )
                with tracer.start_as_current_span("GET /maps") as http:
                    http.set_attributes(
                        {
                            "url.full": "https://maps.example.com/api?api_key=Zq8vN2xW4yT6uR1s",
                            "http.request.header.authorization": (
                                "Basic dXNlcjpodW50ZXIyaHVudGVyMg==",
                            ),
                        }
                    )
            provider.shutdown()
    assert_nothing_secret(db, caplog)
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("otlp.db*"))
    assert b"hunter2hunter2" not in stored and b"dXNlcjpodW50ZXIy" not in stored


def test_log_records_and_error_lines_carry_no_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # An exchange captured for a session whose id quotes a bearer token: refused by the store,
    # and logged with the error's text, which quotes the id.
    caplog.set_level(logging.DEBUG, logger="agenttrail")
    capture = Capture(tmp_path / "cap.db", writer="thread")
    bad = NewSession(id=f"from {CASES_BY_KIND['bearer-token']}")
    capture.record(exchange_of(recorded(TOOL_LOOP)[0]), session=bad)
    assert capture.flush(10) and capture.failures == 1
    capture.close()
    assert "not recorded: InputError: session id" in caplog.text
    assert found_in(caplog.text) == [] and "[REDACTED:bearer-token:" in caplog.text
    # An error line that quotes its input (a URL given with its key), in a subprocess's stderr.
    url = f"https://api.example.com/v1?api_key={URL_KEY}"
    refused = run_cli("proxy", "--upstream", url, "--db", str(tmp_path / "p.db"))
    assert refused.returncode == 2 and "a base URL has no query" in refused.stderr
    assert URL_KEY not in refused.stderr and "[REDACTED:url-key:" in refused.stderr


def test_the_live_feed_shows_no_secret_even_split_over_deltas(tmp_path: Path) -> None:
    # Streaming partials are never stored but the viewer shows them: every secret of ALL, sent
    # seven characters at a time, so that most are split over two deltas or more.
    with open_store(tmp_path / "feed.db") as store:
        store.create_session(NewSession(id="s"))
        app = create_app(store, secret=SECRET, tools=ToolRegistry([]))
        read, append = (mint_token(SECRET, rights=[r]) for r in ("read", "append"))
        with serving(app) as port:
            feed = f"ws://127.0.0.1:{port}/v1/sessions/s/live?afterSeq=0&token={read}"
            with (
                connect(feed) as ws,
                httpx.Client(
                    base_url=f"http://127.0.0.1:{port}",
                    headers={"Authorization": f"Bearer {append}"},
                ) as http,
            ):
                time.sleep(0.2)  # subscribed
                pieces = [ALL[i : i + 7] for i in range(0, len(ALL), 7)]
                for n, piece in enumerate(pieces):
                    body = {"textDelta": piece, "done": n == len(pieces) - 1}
                    assert http.post("/v1/sessions/s/partials", json=body).status_code == 202
                shown = [json.loads(ws.recv(timeout=10)) for _ in pieces]
            stored = store.append("s", events.message("assistant", ALL))
            final = next(iter(store.read("s", after_seq=stored.seq - 1))).payload["content"]
    text = "".join(m.get("textDelta", "") for m in shown)
    assert found_in(json.dumps(shown)) == []
    assert text == final  # the same markers as the stored event: one key, one rule
