"""``agenttrail push``: send sessions as OpenTelemetry traces to an OTLP/HTTP receiver (a
collector, Arize Phoenix, Langfuse, Jaeger …).

The spans are :mod:`agenttrail.formats.otlp.export`'s; this module only sends them: OTLP/HTTP
with binary protobuf, one POST per session (the OTLP specification, OTLP/HTTP: ``POST`` of an
``ExportTraceServiceRequest`` with ``Content-Type: application/x-protobuf``; a 2xx answer is
success, and its ``partial_success`` may still report rejected spans).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from agenttrail.cli._common import err, find_session, open_log
from agenttrail.cli._options import DbOption
from agenttrail.errors import InputError, RemoteError

if TYPE_CHECKING:  # httpx and protobuf load when a push runs, not with every command
    import httpx
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

__all__ = ["parse_headers", "post_traces", "push"]

PROTOBUF = "application/x-protobuf"


def parse_headers(values: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` strings as HTTP headers (the form of ``OTEL_EXPORTER_OTLP_HEADERS``).

    Raises:
        InputError: a value without ``=`` or with an empty name; names the value.
    """
    headers: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name.strip():
            # the value last: a header's name followed by words reads as a credential to
            # the redaction every error message goes through, which would hide the words
            raise InputError(f"--header takes NAME=VALUE, not {value!r}")
        headers[name.strip()] = text.strip()
    return headers


def post_traces(
    url: str,
    request: ExportTraceServiceRequest,
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> None:
    """POST ``request`` to an OTLP/HTTP traces endpoint (``http://host:4318/v1/traces``).

    The body is the request's deterministic protobuf encoding, so the same spans give the
    same bytes every time.

    Raises:
        RemoteError: the receiver cannot be reached, answers other than 2xx, or reports
            rejected spans; the message is one line naming the URL.
    """
    import httpx

    body = request.SerializeToString(deterministic=True)
    try:
        answer = httpx.post(
            url,
            content=body,
            headers={**(headers or {}), "Content-Type": PROTOBUF},
            timeout=timeout,
        )
    except httpx.InvalidURL as e:
        raise InputError(f"--otlp {url!r}: {_one_line(str(e))}") from None
    except httpx.HTTPError as e:
        raise RemoteError(f"cannot reach {url}: {_one_line(str(e)) or type(e).__name__}") from e
    if not answer.is_success:
        said = _one_line(answer.text)[:200]
        reason = f"{answer.status_code} {answer.reason_phrase}".strip()
        raise RemoteError(f"{url} answered {reason}" + (f": {said}" if said else ""))
    rejected = _rejected(answer)
    if rejected:
        raise RemoteError(f"{url} rejected {rejected[0]} spans: {_one_line(rejected[1])[:200]}")


def _rejected(answer: httpx.Response) -> tuple[int, str] | None:
    """The rejected spans and the message of a protobuf answer's ``partial_success``."""
    if not answer.content or not answer.headers.get("content-type", "").startswith(PROTOBUF):
        return None
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    response = ExportTraceServiceResponse()
    try:
        response.ParseFromString(answer.content)
    except DecodeError:
        return None
    partial = response.partial_success
    return (partial.rejected_spans, partial.error_message) if partial.rejected_spans else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def push(
    sessions: Annotated[
        list[str], typer.Argument(metavar="SESSION...", help="Session ids or unique prefixes.")
    ],
    otlp: Annotated[
        str,
        typer.Option(
            "--otlp",
            metavar="URL",
            help="OTLP/HTTP traces endpoint, e.g. http://127.0.0.1:4318/v1/traces.",
        ),
    ],
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header",
            metavar="NAME=VALUE",
            help="An HTTP header to send (an API key), repeatable.",
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the receiver.")
    ] = 10.0,
    db: DbOption = None,
) -> None:
    """Send sessions to an OpenTelemetry receiver as GenAI traces over OTLP/HTTP.

    One POST per session of its spans: an invoke_agent span per turn, a chat span per model
    call, an execute_tool span per tool call (docs/otel.md, Export). Ids are derived from the
    session and seq, so pushing again sends the same spans. An unreachable receiver or an
    answer other than 2xx is one error line and exit 1.

    Example:

    - `agenttrail push sample --otlp http://127.0.0.1:6006/v1/traces` (a prefix of the id)
    """
    if not otlp.startswith(("http://", "https://")):
        raise InputError(f"--otlp {otlp!r}: expected an http:// or https:// URL")
    from agenttrail.formats.otlp.export import request_from_log

    headers = parse_headers(header or [])
    with open_log(db) as store:
        found = [find_session(store, s) for s in sessions]
        for session in found:
            request = request_from_log(store, [session])
            post_traces(otlp, request, headers=headers, timeout=timeout)
            spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
            err.print(f"{session.id}: {spans} spans pushed to {otlp}", markup=False)
