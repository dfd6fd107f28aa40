"""Recorded Messages API exchanges: ``{request: {method, url, headers, body}, response:
{status_code, headers, body}}`` records, as anthropic-sdk-python's inline snapshots hold them.

Each record gives the :class:`~agenttrail.formats.anthropic._builder.Builder` a request body
(its new messages), then a response (a JSON message, a stream, or an error); endpoints that
produce no turn are skipped with a warning.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from agenttrail.formats._common import exchange_digest
from agenttrail.formats.anthropic._blocks import is_error_body, mapping, recorded_body
from agenttrail.formats.anthropic._builder import Builder
from agenttrail.formats.anthropic._stream import Streamed, assemble_sse
from agenttrail.formats.http.recording import header, http_date

__all__ = ["read_exchange"]

_NOT_A_TURN = re.compile(r"/count_tokens/?$|/v1/(?:models|files|messages/batches)(?:/|$)")
"""Endpoints in a recording that produce no turn (token counting, models, files, batches);
Bedrock and Vertex URLs (``…/invoke``, ``…:rawPredict``) are turns and are not matched."""


def read_exchange(builder: Builder, item: dict[str, Any], at: str, k: int) -> None:
    """Append one recorded request/response pair (exchange ``k``, 1-based) to ``builder``.

    Raises:
        FormatError: a side that is not an object, a URL that does not parse, a request body
            that is not a JSON object, a status that is not an integer; names the field.
    """
    builder.exchanges += 1
    request = mapping(builder, item.get("request"), f"{at}.request")
    response = mapping(builder, item.get("response"), f"{at}.response")
    headers = response.get("headers")
    created = http_date(header(headers, "date"))
    request_id = header(headers, "request-id")
    if k == 1:
        _session_meta(builder, request)
    url = request.get("url")
    path = ""
    if isinstance(url, str):
        try:
            path = urlsplit(url).path
        except ValueError as e:  # a bad IPv6 literal, say
            raise builder.fail(f"not a URL: {e}", f"{at}.request.url") from None
    if _NOT_A_TURN.search(path):
        builder.warn(f"exchange {k}: {path} is not a Messages API call; skipped")
        return
    body = recorded_body(builder, request.get("body"), f"{at}.request.body")
    if not isinstance(body, dict):
        raise builder.fail("expected a JSON object", f"{at}.request.body")
    status = response.get("status_code")
    if status is not None and (not isinstance(status, int) or isinstance(status, bool)):
        raise builder.fail("expected an integer HTTP status", f"{at}.response.status_code")
    reply = recorded_body(builder, response.get("body"), f"{at}.response.body")
    streamed = None
    if isinstance(reply, str) and reply.lstrip().startswith(("event:", "data:")):
        streamed = assemble_sse(builder, reply, f"{at}.response.body")
    digest = exchange_digest(body, reply)
    again = _recorded_again(builder, reply, streamed, digest)
    if again is not None:  # a retried recording: its request and response are already in
        builder.again(again, f"x{k}:response", created)
        return
    builder.request(body, f"{at}.request.body", k, created)
    if status is None and reply is None:
        return  # no response came (a timeout, a dropped connection): only the request
    if streamed is not None:
        for n, part in enumerate(streamed):
            key = f"x{k}:s{n}"
            if isinstance(part, Streamed):
                builder.response(
                    part.body,
                    f"{at}.response.body",
                    k,
                    created,
                    request_id,
                    arguments=part.arguments,
                    key=key,
                    again_by_id=False,
                )
                _remember(builder, part.body, digest)
            else:  # an error event inside a stream that began with HTTP 200
                builder.error(
                    None,
                    part.data,
                    f"{key}:error",
                    created,
                    request_id,
                    incomplete=part.interrupted,
                )
    elif (status is not None and status >= 400) or is_error_body(reply):
        builder.error(status, reply, f"x{k}:error", created, request_id)
    else:
        reply = mapping(builder, reply, f"{at}.response.body")
        builder.response(reply, f"{at}.response.body", k, created, request_id, again_by_id=False)
        _remember(builder, reply, digest)


def _remember(builder: Builder, reply: dict[str, Any], digest: str) -> None:
    """Keep the digest of the exchange that first brought this response id."""
    response_id = reply.get("id")
    if isinstance(response_id, str):
        builder.exchange_digests.setdefault(response_id, digest)


def _recorded_again(
    builder: Builder, reply: Any, streamed: list[Any] | None, digest: str
) -> str | None:
    """The id of a response already read, when this whole exchange (request and response, as
    recorded: :func:`~agenttrail.formats._common.exchange_digest`) is the one that brought it."""
    if streamed is not None:
        bodies = [part.body for part in streamed if isinstance(part, Streamed)]
        reply = bodies[0] if len(bodies) == 1 and len(streamed) == 1 else None
    if not isinstance(reply, dict) or is_error_body(reply):
        return None
    response_id = reply.get("id")
    if not isinstance(response_id, str) or response_id not in builder.response_ids:
        return None
    return response_id if builder.exchange_digests.get(response_id) == digest else None


def _session_meta(builder: Builder, request: dict[str, Any]) -> None:
    """The first request's client, URL and API version, for the session's metadata."""
    headers = request.get("headers")
    url = request.get("url")
    found = {
        "agent": header(headers, "user-agent"),
        "url": url if isinstance(url, str) else None,
        "anthropic_version": header(headers, "anthropic-version"),
        "anthropic_beta": header(headers, "anthropic-beta"),
        "helper": header(headers, "x-stainless-helper"),
    }
    builder.meta.update((k, v) for k, v in found.items() if v is not None)
