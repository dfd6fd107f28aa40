"""One captured HTTP exchange as the importers read a recorded one, with nothing secret in it.

The record is the ``{request: {method, url, headers, body}, response: {status_code, headers,
body}}`` shape of recorded traffic (:mod:`agenttrail.formats.http.recording`). What is kept:

- headers: only those the readers use (:data:`KEPT_HEADERS`); ``Authorization``,
  ``x-api-key``, ``api-key``, cookies and every other header are dropped, whatever they hold;
- the URL without its user and password, and without any query parameter whose name says it
  holds a credential (:data:`SECRET_PARAMS`);
- bodies decoded as the response's ``Content-Encoding`` says (gzip and deflate always; br and
  zstd when the ``brotli`` / ``zstandard`` packages are installed), then as UTF-8.

Rules of the record: docs/capture.md, What is never stored.
"""

from __future__ import annotations

import importlib
import json
import pickle
import re
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "KEPT_HEADERS",
    "SECRET_PARAMS",
    "Headers",
    "HttpExchange",
    "decoded",
    "from_wire",
    "header_text",
    "kept_headers",
    "named",
    "record_of",
    "redacted_url",
    "to_wire",
]

Headers = Mapping[str, str] | Iterable[tuple[str, str]]
"""Headers as a mapping or as ``(name, value)`` pairs (repeated names allowed)."""


@dataclass(frozen=True)
class HttpExchange:
    """One HTTP exchange with a provider's API, as it happened."""

    method: str
    """``POST``."""
    url: str
    """The full request URL (user, password and credential query parameters are dropped
    before anything is stored)."""
    request_headers: Headers
    """As sent; only the few the readers use are kept (never a credential)."""
    request_body: bytes
    """The request body as sent (JSON)."""
    status: int | None = None
    """The response's HTTP status; ``None`` when no response came (see :attr:`error`)."""
    response_headers: Headers = ()
    """As received (``Content-Encoding`` says how to decode the body)."""
    response_body: bytes = b""
    """The body as received, all of it or, for a stream cut short, what arrived."""
    started: float = 0.0
    """When the request was sent: Unix seconds."""
    duration_s: float = 0.0
    """Seconds from sending to the end of the response body (or to the failure)."""
    error: str | None = None
    """Why the exchange did not end normally (``ReadTimeout: timed out``, ``ConnectError: …``,
    a stream's ``RemoteProtocolError: …``); ``None`` when it did, or when the caller closed a
    stream early."""
    complete: bool = True
    """False when the response body was cut short: a stream interrupted, or abandoned by the
    caller before its end."""


KEPT_HEADERS = frozenset(
    {
        "user-agent",  # the session's agent
        "anthropic-version",  # Anthropic sessions' metadata
        "anthropic-beta",
        "x-stainless-helper",
        "content-type",
        "date",  # the response's time when its body has none
        "request-id",  # Anthropic's id of the request, kept on its events
    }
)
"""The only headers a record keeps (lower case): those the readers of recordings use. An
allow-list, so that no credential header (``Authorization``, ``x-api-key``, ``api-key``,
``Proxy-Authorization``, ``Cookie``, a vendor's own) is ever stored."""

SECRET_PARAMS = re.compile(r"key|token|secret|signature|sig$|auth|password|credential", re.I)
"""A query parameter whose name matches is dropped from the stored URL (``?key=``,
``?api-key=``, ``?access_token=``, ``?X-Amz-Signature=``)."""

_ENCODING = "content-encoding"
"""Not kept in a record, but read to decode the body it comes with."""


_READ_RAW = frozenset(name.encode() for name in (*KEPT_HEADERS, _ENCODING))
"""The names of :data:`KEPT_HEADERS` and ``Content-Encoding`` as httpx's raw headers hold
them (bytes), once lowered."""


def header_text(value: bytes) -> str:
    """A header field's bytes as text: UTF-8, else (obs-text, RFC 9110 §5.5) ISO-8859-1, a
    byte a character."""
    try:
        return value.decode()
    except UnicodeDecodeError:
        return value.decode("iso-8859-1")


def kept_headers(headers: Headers) -> dict[str, str]:
    """The headers a record keeps (:data:`KEPT_HEADERS`), by lower-case name; the first value
    of a repeated name."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    kept: dict[str, str] = {}
    for name, value in pairs:
        lower = name.lower()
        if lower in KEPT_HEADERS and lower not in kept:
            kept[lower] = value
    return kept


@lru_cache(maxsize=256)
def redacted_url(url: str) -> str:
    """``url`` without user, password and credential query parameters (:data:`SECRET_PARAMS`);
    remembered for the few URLs a client calls again and again."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if not parts.query and "@" not in parts.netloc and not parts.fragment:
        return url  # nothing to remove (every call of an SDK's client, as a rule)
    netloc = parts.netloc.rpartition("@")[2]
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    kept = urlencode([(k, v) for k, v in query if not SECRET_PARAMS.search(k)])
    return urlunsplit((parts.scheme, netloc, parts.path, kept, ""))


def decoded(body: bytes, headers: Headers) -> bytes:
    """``body`` with the content codings of its ``Content-Encoding`` header undone (RFC 9110
    §8.4: listed in the order applied, so undone last first).

    Raises:
        ValueError: a coding this installation cannot undo, or bytes that do not inflate.
    """
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    codings: list[str] = []
    for name, value in pairs:
        if name.lower() == _ENCODING:
            codings += [c.strip().lower() for c in value.split(",") if c.strip()]
    for coding in reversed(codings):
        body = _undo(coding, body)
    return body


def _undo(coding: str, body: bytes) -> bytes:
    if coding in ("identity", ""):
        return body
    if coding in ("gzip", "x-gzip"):
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if coding == "deflate":  # zlib-wrapped as RFC 9110 says, raw as some servers send it
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)
    if coding in ("br", "zstd"):
        name = "brotli" if coding == "br" else "zstandard"
        try:
            module: Any = importlib.import_module(name)  # optional: installed with httpx[brotli]
        except ImportError:
            raise ValueError(f"Content-Encoding {coding} needs the {name} package") from None
        if coding == "br":
            return bytes(module.decompress(body))
        return bytes(module.ZstdDecompressor().decompressobj().decompress(body))
    raise ValueError(f"unknown Content-Encoding {coding!r}")


def named(exchange: HttpExchange) -> str:
    """An exchange as named in log messages (its URL without credentials)."""
    return f"{exchange.method} {redacted_url(exchange.url)}"


def record_of(exchange: HttpExchange) -> tuple[dict[str, Any], dict[str, Any]]:
    """The exchange as the importers read recorded traffic (``{request, response}``), with
    nothing secret kept (this module), and its request body parsed (``{}`` when it is not a
    JSON object) for recognition."""
    request_text = exchange.request_body.decode("utf-8", "replace")
    try:
        parsed = json.loads(request_text)
    except ValueError:
        parsed = None
    response: dict[str, Any] = {"status_code": exchange.status, "headers": {}, "body": None}
    if exchange.status is not None:
        body = decoded(exchange.response_body, exchange.response_headers)
        response["headers"] = kept_headers(exchange.response_headers)
        response["body"] = body.decode("utf-8", "replace")
    request = {
        "method": exchange.method,
        "url": redacted_url(exchange.url),
        "headers": kept_headers(exchange.request_headers),
        "body": parsed if isinstance(parsed, dict) else request_text,  # parsed once
    }
    return {"request": request, "response": response}, parsed if isinstance(parsed, dict) else {}


_WIRE = struct.Struct("<iddB7I")
"""The fixed part of an exchange on the pipe to capture's writer process (:func:`to_wire`):
status (-1: none), started, duration, flags (:data:`_COMPLETE`, :data:`_ERRORED`), then
the lengths of the seven parts that follow it: method, URL, error, request headers, response
headers, session (a pickle; empty: none), request body; the response body is the rest."""

_COMPLETE, _ERRORED = 1, 2


def to_wire(exchange: HttpExchange, session: object) -> bytes:
    """``exchange`` (and the session it goes to) as it crosses to capture's writer process:
    only the headers capture reads (:data:`KEPT_HEADERS`, ``Content-Encoding``) and the URL
    without credentials (:func:`redacted_url`), so that no credential leaves the agent's
    process; the bodies as they are, behind a small fixed header (no pickling of objects on
    the agent's path; a session given, rare, is pickled). :func:`from_wire` reads it back.

    Raises:
        TypeError, AttributeError, ValueError: a header that is not text, or a session
            that cannot be pickled.
    """
    error = exchange.error
    parts = (
        exchange.method.encode(),
        redacted_url(exchange.url).encode(),
        b"" if error is None else error.encode(errors="surrogatepass"),
        _header_lines(exchange.request_headers),
        _header_lines(exchange.response_headers),
        b"" if session is None else pickle.dumps(session, protocol=pickle.HIGHEST_PROTOCOL),
        exchange.request_body,
    )
    status = -1 if exchange.status is None else exchange.status
    flags = (_COMPLETE if exchange.complete else 0) | (0 if error is None else _ERRORED)
    fixed = _WIRE.pack(
        status, exchange.started, exchange.duration_s, flags, *(len(part) for part in parts)
    )
    return b"".join((fixed, *parts, exchange.response_body))


def from_wire(data: bytes) -> tuple[HttpExchange, Any]:
    """The exchange and session :func:`to_wire` made ``data`` of."""
    status, started, duration_s, flags, *sizes = _WIRE.unpack_from(data)
    parts, at = [], _WIRE.size
    for size in sizes:
        parts.append(data[at : at + size])
        at += size
    method, url, error, sent, received, session, request_body = parts
    exchange = HttpExchange(
        method=method.decode(),
        url=url.decode(),
        request_headers=_header_pairs(sent),
        request_body=request_body,
        status=None if status < 0 else status,
        response_headers=_header_pairs(received),
        response_body=data[at:],
        started=started,
        duration_s=duration_s,
        error=error.decode(errors="surrogatepass") if flags & _ERRORED else None,
        complete=bool(flags & _COMPLETE),
    )
    return exchange, pickle.loads(session) if session else None


def _header_lines(headers: Headers) -> bytes:
    """The headers capture reads (:data:`KEPT_HEADERS`, ``Content-Encoding``) as ``name:value``
    lines (a field value holds no CR or LF: RFC 9110 §5.5). httpx's ``Headers`` are filtered
    on their raw bytes (``.raw``; names lowered) and copied as they are, on the agent's path:
    none is decoded there, :func:`_header_pairs` decodes those kept in the writer.

    Raises:
        TypeError: a header given as ``(name, value)`` whose value is not text.
    """
    raw = getattr(headers, "raw", None)
    if isinstance(raw, list):
        kept = _READ_RAW
        return b"".join([low + b":" + v + b"\r\n" for n, v in raw if (low := n.lower()) in kept])
    lines = []
    for name, value in headers.items() if isinstance(headers, Mapping) else headers:
        if (low := name.lower()) not in KEPT_HEADERS and low != _ENCODING:
            continue
        if not isinstance(value, str):
            raise TypeError(f"header {name!r}: {type(value).__name__}, not text")
        lines.append(f"{name}:{value}\r\n")
    return "".join(lines).encode()


def _header_pairs(lines: bytes) -> list[tuple[str, str]]:
    """The ``(name, value)`` pairs of :func:`_header_lines`, a line at a time decoded as UTF-8,
    else as ISO-8859-1 (a byte a character, as HTTP/1.1 carries a value that is not UTF-8)."""
    pairs = []
    for line in lines.split(b"\r\n")[:-1]:
        name, _, value = header_text(line).partition(":")
        pairs.append((name, value))
    return pairs
