"""``agenttrail push --otlp URL`` against a real OTLP/HTTP receiver on loopback: a small
Starlette app on uvicorn that decodes each body with opentelemetry-proto's own classes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from tests.conftest import REALDATA, free_port, run_cli, serving
from tests.formats.test_otlp_export import decode

ANTHROPIC = REALDATA / "anthropic-sdk-python" / "10e53c1d-51be-4c64-b5bf-99adb3fa4719.json"
CLAUDE_CODE = REALDATA / "claude-code-simonw" / "sample_session.jsonl"
PROTOBUF = "application/x-protobuf"


@dataclass
class Receiver:
    """What the receiver was sent: each body, decoded request and headers, in order."""

    port: int
    bodies: list[bytes] = field(default_factory=list)
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def url(self, path: str = "/v1/traces") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    seen = Receiver(0)

    async def traces(request: Request) -> Response:
        body = await request.body()
        decoded = ExportTraceServiceRequest()
        decoded.ParseFromString(body)
        seen.bodies.append(body)
        seen.requests.append(decoded)
        seen.headers.append(dict(request.headers))
        answer = ExportTraceServiceResponse().SerializeToString()
        return Response(answer, media_type=PROTOBUF)

    async def refuse(request: Request) -> Response:
        return PlainTextResponse("invalid api key\nsee the docs", status_code=401)

    async def reject(request: Request) -> Response:
        partial = ExportTracePartialSuccess(rejected_spans=3, error_message="too old")
        answer = ExportTraceServiceResponse(partial_success=partial)
        return Response(answer.SerializeToString(), media_type=PROTOBUF)

    app = Starlette(
        routes=[
            Route("/v1/traces", traces, methods=["POST"]),
            Route("/refuse", refuse, methods=["POST"]),
            Route("/reject", reject, methods=["POST"]),
        ]
    )
    with serving(app) as port:
        seen.port = port
        yield seen


def _imported(tmp_path: Path, *paths: Path) -> tuple[str, list[str]]:
    db = str(tmp_path / "log.db")
    result = run_cli("import", *map(str, paths), "--db", db)
    assert result.returncode == 0, result.stderr
    return db, result.stdout.split()


def test_push_sends_the_exported_spans_with_the_headers_and_twice_the_same_bytes(
    tmp_path: Path, receiver: Receiver
) -> None:
    db, sessions = _imported(tmp_path, ANTHROPIC, CLAUDE_CODE)
    args = ("push", *sessions, "--otlp", receiver.url(), "--db", db)
    first = run_cli(*args, "--header", "Authorization=Bearer k1", "--header", "x-team = a=b")
    assert first.returncode == 0, first.stderr
    again = run_cli(*args, "--header", "Authorization=Bearer k1", "--header", "x-team = a=b")
    assert again.returncode == 0, again.stderr
    assert len(receiver.bodies) == 4  # one POST per session, twice
    assert receiver.bodies[:2] == receiver.bodies[2:]
    for headers in receiver.headers:
        assert headers["content-type"] == PROTOBUF
        assert headers["authorization"] == "Bearer k1"
        assert headers["x-team"] == "a=b"
    for session, sent in zip(sessions, receiver.requests[:2], strict=True):
        exported = run_cli("export", session, "--format", "otlp", "--db", db)
        assert sent == decode(exported.stdout)
        spans = len(sent.resource_spans[0].scope_spans[0].spans)
        assert f"{session}: {spans} spans pushed to {receiver.url()}" in first.stderr


def test_an_unreachable_receiver_is_one_error_line(tmp_path: Path) -> None:
    db, sessions = _imported(tmp_path, CLAUDE_CODE)
    url = f"http://127.0.0.1:{free_port()}/v1/traces"
    result = run_cli("push", *sessions, "--otlp", url, "--db", db)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: cannot reach {url}: ")
    assert result.stderr.count("\n") == 1


def test_a_refusal_is_one_error_line_with_the_status(tmp_path: Path, receiver: Receiver) -> None:
    db, sessions = _imported(tmp_path, CLAUDE_CODE)
    url = receiver.url("/refuse")
    result = run_cli("push", *sessions, "--otlp", url, "--db", db)
    assert result.returncode == 1
    assert (
        result.stderr == f"error: {url} answered 401 Unauthorized: invalid api key see the docs\n"
    )


def test_rejected_spans_are_an_error(tmp_path: Path, receiver: Receiver) -> None:
    db, sessions = _imported(tmp_path, CLAUDE_CODE)
    url = receiver.url("/reject")
    result = run_cli("push", *sessions, "--otlp", url, "--db", db)
    assert result.returncode == 1
    assert result.stderr == f"error: {url} rejected 3 spans: too old\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--otlp", "127.0.0.1:4318/v1/traces"), "expected an http:// or https:// URL"),
        (("--otlp", "http://127.0.0.1:9/v1/traces", "--header", "novalue"), "NAME=VALUE"),
        # a header's name that redaction knows: its words were redacted as its value
        (
            ("--otlp", "http://127.0.0.1:9/v1/traces", "--header", "X-Api-Key"),
            "--header takes NAME=VALUE, not 'X-Api-Key'",
        ),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_sent(
    tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    db, sessions = _imported(tmp_path, CLAUDE_CODE)
    result = run_cli("push", *sessions, *extra, "--db", db)
    assert result.returncode == 2
    assert result.stderr.startswith("error: --") and message in result.stderr
    assert result.stderr.count("\n") == 1
