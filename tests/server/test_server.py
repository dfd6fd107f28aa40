"""The server on a real uvicorn on loopback: REST, tokens, live delivery, the user's tools."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from agenttrail import Recorder
from agenttrail.log.chain import verify
from agenttrail.log.store import open_store
from agenttrail.model import NewSession, events
from agenttrail.server import live as live_module
from agenttrail.server import mint_token
from agenttrail.server.auth import RIGHTS
from tests.conftest import agenttrail_serve, free_port, postgres_schema, run_cli_subprocess
from tests.server.conftest import SECRET, Server


def _new_session(http: httpx.Client, **fields: Any) -> str:
    response = http.post("/v1/sessions", json=fields)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


# -- REST ------------------------------------------------------------------------------------


def test_sessions_and_events_over_rest(server: Server) -> None:
    with server.client() as http:
        sid = _new_session(http, title="rest", agent="bot", user="ana")
        one = http.post(
            f"/v1/sessions/{sid}/events",
            json={"payload": events.message("user", "hi"), "key": "c1"},
        )
        assert one.status_code == 201 and one.json()["seqs"] == [1]
        again = http.post(
            f"/v1/sessions/{sid}/events",
            json={"payload": events.message("user", "hi"), "key": "c1"},
        )
        assert again.json() == {**one.json(), "duplicates": [True]}  # idempotent retry
        batch = {"events": [{"payload": {"type": "x", "i": i}} for i in range(5)]}
        assert http.post(f"/v1/sessions/{sid}/events", json=batch).json()["seqs"] == [2, 3, 4, 5, 6]
        page = http.get(f"/v1/sessions/{sid}/events", params={"afterSeq": 1, "limit": 3}).json()
        assert [e["seq"] for e in page["events"]] == [2, 3, 4] and page["next_after_seq"] == 4
        rest = http.get(f"/v1/sessions/{sid}/events", params={"afterSeq": 4}).json()
        assert [e["seq"] for e in rest["events"]] == [5, 6] and rest["next_after_seq"] is None
        assert page["events"][0]["payload"] == {"type": "x", "i": 0}
        listed = http.get("/v1/sessions").json()
        assert [(s["id"], s["events"]) for s in listed] == [(sid, 6)]
        assert http.get(f"/v1/sessions/{sid}").json()["title"] == "rest"
        assert http.get(f"/v1/sessions/{sid}/verify").json()["ok"] is True
        assert "FADE IN:" in http.get(f"/v1/sessions/{sid}/fountain").text
        replayed = http.get(f"/v1/sessions/{sid}/replay", params={"format": "anthropic"}).json()
        assert replayed["messages"][0] == {"role": "user", "content": "hi"}
        assert http.get(f"/v1/sessions/{sid}/replay", params={"format": "x"}).status_code == 422
        schema = http.get("/openapi.json").json()
        assert "/v1/sessions/{session_id}/events" in schema["paths"]


def test_rest_events_name_their_anomalies(server: Server) -> None:
    # The anomaly of each event, as views/pairing.py defines it, judged over the whole
    # session, not only the page: a call's result on a later page pairs it.
    with server.client() as http:
        sid = _new_session(http)

        def anomalies(**params: int) -> dict[int, list[str]]:
            page = http.get(f"/v1/sessions/{sid}/events", params=params).json()
            return {e["seq"]: e["anomalies"] for e in page["events"]}

        batch = [
            events.tool_call("c1", "ls", {}),
            events.tool_call("", "ls", {}),
            events.tool_result("nope", "ls", output="?"),
        ]
        http.post(f"/v1/sessions/{sid}/events", json={"events": [{"payload": p} for p in batch]})
        assert anomalies() == {1: ["no_result"], 2: ["missing_id"], 3: ["orphan_result"]}
        http.post(
            f"/v1/sessions/{sid}/events", json={"payload": events.tool_result("c1", output="x")}
        )
        assert anomalies(limit=1) == {1: []}
        assert anomalies(afterSeq=2) == {3: ["orphan_result"], 4: []}


def test_errors_are_problem_details_naming_what_is_wrong(server: Server) -> None:
    with server.client() as http:
        sid = _new_session(http)
        missing = http.get("/v1/sessions/nope")
        assert missing.status_code == 404
        assert missing.headers["content-type"] == "application/problem+json"
        assert missing.json()["detail"] == "no session 'nope'"
        big = http.post(
            f"/v1/sessions/{sid}/events", json={"payload": {"type": "x", "t": "y" * 70_000}}
        )
        assert big.status_code == 413 and big.json()["limit"] == 64 * 1024
        assert "65,536" in big.json()["detail"]
        shape = http.post(f"/v1/sessions/{sid}/events", json={"payload": "not a mapping"})
        assert shape.status_code == 422 and "payload" in shape.json()["detail"]
        nested = http.post(
            f"/v1/sessions/{sid}/events", json={"events": [{"payload": {}, "kee": 1}]}
        )
        assert nested.status_code == 422 and "events.0.kee" in nested.json()["detail"]
        stamp = http.post(
            f"/v1/sessions/{sid}/events", json={"payload": {"type": "x"}, "created_at": "now"}
        )
        assert stamp.status_code == 422 and "created_at" in stamp.json()["detail"]
        both = http.post(  # one event's payload beside a batch: was dropped, answered 201
            f"/v1/sessions/{sid}/events",
            json={"events": [{"payload": {"type": "a"}}], "payload": {"type": "b"}, "key": "k"},
        )
        assert both.status_code == 422
        assert both.json()["detail"] == (
            "field payload: give one event (payload, created_at, key) or a list of events, not both"
        )
        assert http.get(f"/v1/sessions/{sid}/events").json()["events"] == []  # nothing written


def test_every_route_needs_a_token_with_the_right_and_the_scope(server: Server) -> None:
    with server.client() as admin:
        sid = _new_session(admin)
        other = _new_session(admin)
        admin.post(f"/v1/sessions/{sid}/events", json={"payload": {"type": "x"}})
    anonymous = httpx.get(f"{server.url}/v1/sessions/{sid}")
    assert anonymous.status_code == 401
    forged = httpx.get(f"{server.url}/v1/sessions", headers={"Authorization": "Bearer abc.def.ghi"})
    assert forged.status_code == 401
    expired = mint_token(SECRET, rights=["read"], ttl_s=-10)
    late = httpx.get(f"{server.url}/v1/sessions", headers={"Authorization": f"Bearer {expired}"})
    assert late.status_code == 401 and "expired" in late.json()["detail"]
    with server.client("read", session=sid) as reader:
        assert reader.get(f"/v1/sessions/{sid}").status_code == 200
        assert reader.get(f"/v1/sessions/{other}").status_code == 403
        assert [s["id"] for s in reader.get("/v1/sessions").json()] == [sid]
        denied = reader.post(f"/v1/sessions/{sid}/events", json={"payload": {"type": "x"}})
        assert denied.status_code == 403 and "append" in denied.json()["detail"]


def test_trace_envelopes_need_the_audit_right(server: Server) -> None:
    rec = Recorder.start(server.store, session_id="loan")
    with rec.turn(model="m") as turn:
        turn.user("payment?")
        call = turn.tool_call("run_model", {"p": 1})
        turn.tool_result(
            call,
            json.dumps({"model": "m", "specVersion": "1", "inputs": {"p": 1}, "outputs": {"x": 2}}),
        )
    with server.client("read") as reader, server.client("read,audit") as auditor:
        rows = reader.get("/v1/sessions/loan/traces").json()
        assert [(r["tool"], r["status"]) for r in rows] == [("run_model", "computed")]
        assert "envelope" not in rows[0]
        assert reader.get(f"/v1/traces/{rows[0]['id']}").status_code == 403
        full = auditor.get(f"/v1/traces/{rows[0]['id']}").json()
        assert json.loads(full["envelope"])["outputs"] == {"x": 2}


def test_a_scoped_audit_token_cannot_tell_other_sessions_traces_from_missing_ones(
    server: Server,
) -> None:
    for sid in ("mine", "theirs"):
        rec = Recorder.start(server.store, session_id=sid)
        with rec.turn(model="m") as turn:
            turn.user("payment?")
            call = turn.tool_call("run_model", {"p": 1})
            envelope = {"model": "m", "specVersion": "1", "inputs": {"p": 1}, "outputs": {}}
            turn.tool_result(call, json.dumps(envelope))
    with server.client("read,audit") as admin:
        (theirs,) = admin.get("/v1/sessions/theirs/traces").json()
        (mine,) = admin.get("/v1/sessions/mine/traces").json()
    missing = max(theirs["id"], mine["id"]) + 1000
    with server.client("read,audit", session="mine") as scoped:
        assert scoped.get(f"/v1/traces/{mine['id']}").status_code == 200
        other = scoped.get(f"/v1/traces/{theirs['id']}")
        absent = scoped.get(f"/v1/traces/{missing}")
    assert other.status_code == absent.status_code == 422
    assert other.json()["detail"] == f"no trace row {theirs['id']}"
    assert absent.json()["detail"] == f"no trace row {missing}"


# -- live delivery ---------------------------------------------------------------------------


def _receive_appends(ws: Any, count: int, timeout: float = 20) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    while len(got) < count:
        message = json.loads(ws.recv(timeout=timeout))
        if message["type"] == "append":
            got.append(message)
    return got


def test_live_feed_sends_the_backlog_then_appends_and_partials(server: Server) -> None:
    with server.client() as http:
        sid = _new_session(http)
        for i in range(3):
            http.post(f"/v1/sessions/{sid}/events", json={"payload": {"type": "x", "i": i}})
        url = f"{server.ws}/v1/sessions/{sid}/live?afterSeq=1&token={server.token('read')}"
        with connect(url) as ws:
            backlog = _receive_appends(ws, 2)
            assert [m["seq"] for m in backlog] == [2, 3]
            http.post(
                f"/v1/sessions/{sid}/partials",
                json={"textDelta": "Hello, An", "activity": "typing"},
            )
            partial = json.loads(ws.recv(timeout=10))
            assert partial == {  # the last word waits for the next (server/partials.py)
                "type": "appendPartial",
                "session_id": sid,
                "textDelta": "Hello, ",
                "done": False,
                "activity": "typing",
            }
            http.post(
                f"/v1/sessions/{sid}/events", json={"payload": events.message("assistant", "Hello")}
            )
            (live,) = _receive_appends(ws, 1)
            assert (live["seq"], live["payload"]["content"], live["actor"]) == (4, "Hello", "agent")
        assert (
            http.get(f"/v1/sessions/{sid}/events").json()["events"][-1]["seq"] == 4
        )  # partial not stored


def test_live_feed_refuses_bad_tokens_with_close_codes(server: Server) -> None:
    with server.client() as http:
        sid = _new_session(http)
        other = _new_session(http)
    for query, code in (
        ("", 4401),
        ("&token=garbage", 4401),
        (f"&token={server.token('read', session=other)}", 4403),
        (f"&token={server.token('append')}", 4403),
    ):
        with connect(f"{server.ws}/v1/sessions/{sid}/live?afterSeq=0{query}") as ws:
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == code


def test_appends_straight_into_the_database_reach_subscribers(server: Server) -> None:
    rec = Recorder.start(server.store, session_id="direct")
    url = f"{server.ws}/v1/sessions/direct/live?afterSeq=0&token={server.token('read')}"
    with connect(url) as ws:
        rec.append(events.message("user", "written by the agent process"))
        (message,) = _receive_appends(ws, 1)
        assert message["payload"]["content"] == "written by the agent process"


def test_reconnecting_with_the_last_seq_loses_nothing_and_repeats_nothing(server: Server) -> None:
    with server.client() as http:
        sid = _new_session(http)
    total, writers = 400, 4

    def write(n: int) -> None:
        with server.client("append") as http:
            for i in range(total // writers):
                http.post(
                    f"/v1/sessions/{sid}/events", json={"payload": {"type": "x", "w": n, "i": i}}
                )

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    seen: list[int] = []
    rng = random.Random(7)
    try:
        while len(seen) < total:
            last = seen[-1] if seen else 0
            url = f"{server.ws}/v1/sessions/{sid}/live?afterSeq={last}&token={server.token('read')}"
            with connect(url) as ws:
                for _ in range(rng.randint(1, 60)):  # then drop the connection at a random point
                    if len(seen) >= total:
                        break
                    message = json.loads(ws.recv(timeout=20))
                    if message["type"] == "append":
                        seen.append(message["seq"])
    finally:
        for t in threads:
            t.join()
    assert seen == list(range(1, total + 1))  # every event, once, in order


def test_a_subscriber_that_falls_behind_is_told_to_resume(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live_module, "QUEUE_SIZE", 5)
    with server.client() as http:
        sid = _new_session(http)
        url = f"{server.ws}/v1/sessions/{sid}/live?afterSeq=0&token={server.token('read')}"
        with connect(url, max_queue=1) as ws:
            time.sleep(0.2)
            batch = {"events": [{"payload": {"type": "x", "i": i}} for i in range(50)]}
            for _ in range(4):  # the writer is never held up by the slow reader
                assert http.post(f"/v1/sessions/{sid}/events", json=batch).status_code == 201
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    ws.recv(timeout=10)
            assert (
                closed.value.rcvd is not None and closed.value.rcvd.code == live_module.RESUME_CODE
            )


# -- the user's own tools, and the turn lock ---------------------------------------------------


def test_user_tools_run_through_the_registry_and_land_as_user_events(server: Server) -> None:
    with server.client() as http:
        sid = _new_session(http)
        tools = http.get(f"/v1/sessions/{sid}/tools").json()
        assert {t["name"] for t in tools} == {"read_file", "write_file", "list_dir"}
        assert next(t for t in tools if t["name"] == "write_file")["input_schema"]["required"] == [
            "path",
            "content",
        ]
        read = http.post(f"/v1/sessions/{sid}/tools/read_file/invoke", json={"path": "notes.txt"})
        assert (
            read.status_code == 201
            and read.json()["output"]["content"] == "hello from the workspace\n"
        )
        wrote = http.post(
            f"/v1/sessions/{sid}/tools/write_file/invoke",
            json={"path": "sub/new.txt", "content": "x"},
        )
        assert wrote.json()["output"] == {"path": "sub/new.txt", "bytes": 1}
        assert (server.workspace / "sub" / "new.txt").read_text() == "x"
        listed = http.post(f"/v1/sessions/{sid}/tools/list_dir/invoke", json={}).json()["output"]
        assert listed["entries"] == ["notes.txt", "sub/"]
        logged = http.get(f"/v1/sessions/{sid}/events").json()["events"]
        assert [(e["payload"]["type"], e["actor"]) for e in logged[:2]] == [
            ("tool_call", "user"),
            ("tool_result", "user"),
        ]
        bad = http.post(f"/v1/sessions/{sid}/tools/write_file/invoke", json={"path": "a.txt"})
        assert bad.status_code == 422 and "content" in bad.json()["detail"]


def test_workspace_tools_refuse_every_way_out(server: Server, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("outside")
    (server.workspace / "link").symlink_to(tmp_path / "secret.txt")
    with server.client() as http:
        sid = _new_session(http)
        for path in ("../secret.txt", str(tmp_path / "secret.txt"), "link", "sub/../../secret.txt"):
            result = http.post(
                f"/v1/sessions/{sid}/tools/read_file/invoke", json={"path": path}
            ).json()
            assert result["output"] is None and (
                "outside" in result["error"] or "absolute" in result["error"]
            )
        escaped = http.post(
            f"/v1/sessions/{sid}/tools/write_file/invoke",
            json={"path": "../evil.txt", "content": "x"},
        )
        assert escaped.json()["error"] and not (tmp_path / "evil.txt").exists()


def test_a_user_invocation_during_an_agent_turn_is_409_and_appends_nothing(server: Server) -> None:
    with server.client() as http:
        sid = _new_session(http)
        # A lease long enough to outlive a loaded machine: with 0.5 s, a slow take-and-invoke
        # under load (CI) saw the lease expire before the invoke was decided, and got 201.
        turn = http.post(f"/v1/sessions/{sid}/turns", json={"holder": "agent-1"}).json()
        refused = http.post(f"/v1/sessions/{sid}/tools/list_dir/invoke", json={})
        assert refused.status_code == 409 and refused.json()["turn_id"] == turn["turn_id"]
        assert http.get(f"/v1/sessions/{sid}/events").json()["events"] == []
        # Renewed short, then left to expire: the lock is free.
        short = {"turn_id": turn["turn_id"], "holder": "agent-1", "ttl_s": 0.2}
        assert http.post(f"/v1/sessions/{sid}/turns", json=short).status_code == 201
        time.sleep(0.3)
        assert http.post(f"/v1/sessions/{sid}/tools/list_dir/invoke", json={}).status_code == 201
        held = http.post(f"/v1/sessions/{sid}/turns", json={}).json()
        assert http.post(f"/v1/sessions/{sid}/tools/list_dir/invoke", json={}).status_code == 409
        http.delete(f"/v1/sessions/{sid}/turns/{held['turn_id']}")
        assert http.post(f"/v1/sessions/{sid}/tools/list_dir/invoke", json={}).status_code == 201


# -- load -------------------------------------------------------------------------------------


@pytest.mark.load
def test_eight_writers_and_twenty_subscribers(db_url: str, tmp_path: Path) -> None:
    """A real ``agenttrail serve`` process (its own interpreter, as in use) under 8 writers
    and 20 live subscribers: every subscriber gets every event once, in seq order."""
    with open_store(db_url) as store:
        sid = store.create_session(NewSession("load")).id
    env = {"AGENTTRAIL_SECRET": SECRET.decode()}
    with _serve(db_url, tmp_path, env) as (url, _):
        ws_url = url.replace("http://", "ws://")
        writers, per_writer, subscribers = 8, 500, 20
        total = writers * per_writer
        received: list[list[int]] = [[] for _ in range(subscribers)]
        ready = threading.Barrier(subscribers + 1)
        read = mint_token(SECRET, rights=["read"])
        append = {"Authorization": f"Bearer {mint_token(SECRET, rights=['append'])}"}

        def subscribe(n: int) -> None:
            # No per-message deflate: the test is about delivery under load, not compression.
            live = f"{ws_url}/v1/sessions/{sid}/live?afterSeq=0&token={read}"
            with connect(live, compression=None) as ws:
                ready.wait()
                while len(received[n]) < total:
                    message = json.loads(ws.recv(timeout=60))
                    if message["type"] == "append":
                        received[n].append(message["seq"])

        def write(n: int) -> None:
            with httpx.Client(base_url=url, headers=append, timeout=30) as http:
                for i in range(per_writer):
                    response = http.post(
                        f"/v1/sessions/{sid}/events",
                        json={"payload": {"type": "x", "w": n, "i": i}},
                    )
                    assert response.status_code == 201

        readers = [threading.Thread(target=subscribe, args=(n,)) for n in range(subscribers)]
        for t in readers:
            t.start()
        ready.wait()
        pool = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
        for t in pool:
            t.start()
        for t in pool + readers:
            t.join(timeout=300)
    for seqs in received:
        assert seqs == list(range(1, total + 1))
    with open_store(db_url) as store:
        (verdict,) = verify(store, [sid])
    assert verdict.ok and verdict.events == total


def test_agenttrail_serve_prints_an_admin_token_and_serves(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        Recorder.start(store, session_id="s1")
    with _serve(str(db), tmp_path, {}) as (url, admin):
        reply = httpx.get(f"{url}/v1/sessions", headers={"Authorization": f"Bearer {admin}"})
        assert [s["id"] for s in reply.json()] == ["s1"]
        minted = subprocess.run(
            [sys.executable, "-m", "agenttrail.cli", "token", "--session", "s1", "--db", str(db)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        scoped = httpx.get(f"{url}/v1/sessions/s1", headers={"Authorization": f"Bearer {minted}"})
        assert scoped.status_code == 200
        assert (tmp_path / "log.db.secret").stat().st_mode & 0o777 == 0o600


def test_serve_binds_its_port_before_it_announces_itself(tmp_path: Path) -> None:
    # a port in use: uvicorn's own ERROR line and exit 3, after the server had printed
    # its address and token; --port 99999 was bound as 34463 and announced as 99999
    db = str(tmp_path / "log.db")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = run_cli_subprocess("serve", "--port", str(port), "--db", db)
        proxied = run_cli_subprocess(
            "proxy", "--upstream", "http://127.0.0.1:1", "--port", str(port), "--db", db
        )
    said = f"error: --port {port}: cannot listen on 127.0.0.1: Address already in use\n"
    for done in (refused, proxied):
        assert (done.returncode, done.stdout, done.stderr) == (2, "", said)
    # bound before the log is opened: a refused server leaves no new log nor secret file
    assert list(tmp_path.iterdir()) == []
    for command in (["serve"], ["proxy", "--upstream", "http://127.0.0.1:1"]):
        wide = run_cli_subprocess(*command, "--port", "99999", "--db", db)
        assert wide.returncode == 2 and "--port 99999: must be from 0 to 65535" in wide.stderr
    # --port 0: the system's choice of port is the one printed, and it answers there
    argv = [sys.executable, "-m", "agenttrail.cli", "serve", "--port", "0", "--db", db]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        proc.stdout.readline()  # the admin token
        match = re.search(r" on (http://127\.0\.0\.1:(\d+)) ", proc.stdout.readline())
        assert match is not None and int(match.group(2)) > 0
        assert f"{match.group(1)}/#token=" in proc.stdout.readline()
        deadline = time.monotonic() + 30
        while True:
            try:
                assert httpx.get(f"{match.group(1)}/openapi.json").status_code == 200
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        proc.terminate()


# -- replicas: two `agenttrail serve` processes on one PostgreSQL schema ----------------------


@contextlib.contextmanager
def _serve(db: str, workspace: Path, env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """A real ``agenttrail serve`` process on ``db``; yields its base URL and the admin token
    it printed, once it answers."""
    with agenttrail_serve(db, workspace, env) as served:
        yield served.url, served.admin


def test_two_replicas_on_one_postgresql_database(postgres_url: str, tmp_path: Path) -> None:
    with postgres_schema(postgres_url) as db:
        with open_store(db) as store:
            Recorder.start(store, session_id="s1")
        env = {"AGENTTRAIL_SECRET": SECRET.decode()}
        headers = {"Authorization": f"Bearer {mint_token(SECRET, rights=RIGHTS)}"}
        read = mint_token(SECRET, rights=["read"])
        with _serve(db, tmp_path, env) as (a, _), _serve(db, tmp_path, env) as (b, _):
            http_a = httpx.Client(base_url=a, headers=headers, timeout=30)
            http_b = httpx.Client(base_url=b, headers=headers, timeout=30)
            with http_a, http_b:
                b_ws = b.replace("http://", "ws://")
                # A subscriber on B gets what is appended through A, as it commits, in order.
                with connect(f"{b_ws}/v1/sessions/s1/live?afterSeq=0&token={read}") as ws:
                    time.sleep(0.3)  # B's hub has registered the subscription
                    for i in range(5):
                        posted = http_a.post(
                            "/v1/sessions/s1/events", json={"payload": {"type": "x", "i": i}}
                        )
                        assert posted.status_code == 201 and posted.json()["seqs"] == [i + 1]
                    batch = {"events": [{"payload": {"type": "x", "i": i}} for i in range(5, 10)]}
                    assert http_a.post("/v1/sessions/s1/events", json=batch).status_code == 201
                    got = _receive_appends(ws, 10)
                    assert [m["seq"] for m in got] == list(range(1, 11))
                    assert [m["payload"]["i"] for m in got] == list(range(10))
                    started = time.monotonic()
                    http_a.post("/v1/sessions/s1/events", json={"payload": {"type": "x", "i": 10}})
                    (live,) = _receive_appends(ws, 1)
                    assert live["seq"] == 11 and time.monotonic() - started < 2
                # afterSeq resume on the other replica: the backlog comes from the database.
                a_ws = a.replace("http://", "ws://")
                with connect(f"{a_ws}/v1/sessions/s1/live?afterSeq=7&token={read}") as ws:
                    assert [m["seq"] for m in _receive_appends(ws, 4)] == [8, 9, 10, 11]
                    time.sleep(0.3)
                    http_b.post("/v1/sessions/s1/events", json={"payload": {"type": "x", "i": 11}})
                    (live,) = _receive_appends(ws, 1)
                    assert (live["seq"], live["payload"]["i"]) == (12, 11)
                # The turn lock is in the database: a turn taken on A refuses a user tool on B.
                turn = http_a.post("/v1/sessions/s1/turns", json={"holder": "agent-on-a"})
                assert turn.status_code == 201
                refused = http_b.post("/v1/sessions/s1/tools/list_dir/invoke", json={})
                assert refused.status_code == 409
                assert refused.json()["turn_id"] == turn.json()["turn_id"]
                assert http_b.get("/v1/sessions/s1").json()["events"] == 12  # nothing appended
                http_a.delete(f"/v1/sessions/s1/turns/{turn.json()['turn_id']}")
                invoked = http_b.post("/v1/sessions/s1/tools/list_dir/invoke", json={})
                assert invoked.status_code == 201 and invoked.json()["call_seq"] == 13
        with open_store(db) as store:
            (verdict,) = verify(store, ["s1"])
            assert verdict.ok and verdict.events == 14


def test_serve_on_postgresql_needs_a_shared_secret(postgres_url: str) -> None:
    with postgres_schema(postgres_url) as db:
        open_store(db).close()
        env = {k: v for k, v in os.environ.items() if k != "AGENTTRAIL_SECRET"}
        for command in (["serve", "--port", str(free_port())], ["token"]):
            result = subprocess.run(
                [sys.executable, "-m", "agenttrail.cli", *command, "--db", db],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert result.returncode == 2, result.stderr
            assert result.stderr.startswith("error: a shared database needs the token secret")
            assert "AGENTTRAIL_SECRET" in result.stderr and result.stdout == ""


def test_the_recorder_streams_partials_to_the_server(server: Server) -> None:
    rec = Recorder.start(
        server.store, session_id="streamed", server=server.url, token=server.token("append")
    )
    url = f"{server.ws}/v1/sessions/streamed/live?afterSeq=0&token={server.token('read')}"
    with connect(url) as ws:
        time.sleep(0.2)
        with rec.turn(model="m") as turn:
            turn.user("tell me")
            for piece in ("Hel", "lo the", "re"):
                assert turn.partial(piece, activity="typing") == 1
            turn.partial(done=True)
            turn.reply("Hello there")
        kinds = [json.loads(ws.recv(timeout=10)) for _ in range(6)]
    # Each word is shown once the text goes on past it, the last one when the stream is done
    # (server/partials.py: a secret split over two deltas is never shown in part).
    assert [(k["type"], k.get("textDelta")) for k in kinds] == [
        ("append", None),
        ("appendPartial", None),
        ("appendPartial", "Hello "),
        ("appendPartial", None),
        ("appendPartial", "there"),
        ("append", None),
    ]
    assert [e.type for e in server.store.read("streamed")] == ["message", "message"]  # none stored
    offline = Recorder.start(server.store)
    with offline.turn() as turn:
        assert turn.partial("x") == 0
