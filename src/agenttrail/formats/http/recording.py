"""Recorded HTTP traffic, whatever the provider: VCR cassettes and ``{request, response}`` records.

These containers hold one API call per entry; the provider's format modules interpret the
bodies. Shapes read::

    interactions: [{request: {body, uri, method, headers},          a vcrpy cassette (YAML or
                    response: {status: {code}, headers, body: {string}}}]    JSON; bodies may be
                                                                    !!binary, gzip included)
    {request, response} or a list of them     ``request`` is a body or ``{method, url, headers,
                                              body}``; ``response`` a body or ``{status_code,
                                              headers, body}`` (the Anthropic SDK's snapshots)

vcrpy's layout: https://vcrpy.readthedocs.io/en/latest/advanced.html; server-sent events:
WHATWG HTML §9.2 (https://html.spec.whatwg.org/multipage/server-sent-events.html).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from agenttrail.errors import FormatError
from agenttrail.formats._common import JSONValueError, loads, timestamp_or_none

__all__ = [
    "MAX_YAML_VALUES",
    "Exchange",
    "fail",
    "from_cassette",
    "from_record",
    "header",
    "http_date",
    "join",
    "load_yaml",
    "parse_json_body",
    "request_body",
    "type_name",
]


@dataclass
class Exchange:
    """One request and its response as found in a file; bodies not yet interpreted."""

    number: int
    """1-based position in the file; names the exchange in keys and warnings."""
    where: str
    """Field path of the exchange in the file (``interactions[0]``, ``[2]``, ``""``)."""
    request: dict[str, Any] | None = None
    """The request body, parsed; ``None`` when not recorded."""
    request_where: str = ""
    """Field path of the request body."""
    list_where: str | None = None
    """Field path of the request's message or item list when the file holds a bare list."""
    response: Any = None
    """The response body: a mapping, JSON or server-sent-event text, or ``None``."""
    response_where: str = ""
    """Field path of the response body."""
    status: int | None = None
    """HTTP status code, when recorded."""
    date: str | None = None
    """The response's ``Date`` header in ``created_at`` form."""
    uri: str | None = None
    """The request URL, when recorded."""
    method: str | None = None
    """The HTTP method, when recorded."""
    user_agent: str | None = None
    """The client named in the request's ``user-agent`` header (``OpenAI/Python 1.54.3``)."""


def join(where: str, name: str) -> str:
    """A field path one level down: ``join("a[0]", "b")`` is ``a[0].b``."""
    return f"{where}.{name}" if where else name


def fail(
    path: Path, message: str, where: str | None = None, line: int | None = None
) -> FormatError:
    """The :class:`FormatError` for ``path``, naming the field path and line when known."""
    return FormatError(message, path=str(path), line=line, field=where or None)


MAX_YAML_VALUES = 1_000_000
"""Most values (scalars, lists and mappings) a YAML file may stand for once its aliases are
expanded. Recorded traffic uses few aliases or none; aliases of aliases (the "billion laughs")
make a small file stand for billions of values, which storing or exporting would write out."""


def type_name(value: Any) -> str:
    """A JSON-ish name for a value's type, for error messages."""
    return "null" if value is None else type(value).__name__


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` (no object construction from tags) that also refuses, as YAML
    errors with a line, what it would otherwise let through or crash on: a scalar its tag
    cannot read (``2024-13-45``, ``!!int abc``), a mapping key that is not text (JSON has
    only text keys), an alias inside the node it names (a value that contains itself), and a
    document whose aliases expand to more than :data:`MAX_YAML_VALUES` values."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._open: list[str] = []
        """Anchors of the nodes being composed, outermost first."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
        anchor = event.anchor
        if isinstance(event, yaml.AliasEvent):
            if anchor in self._open:
                mark = event.start_mark if isinstance(event.start_mark, yaml.Mark) else None
                raise yaml.composer.ComposerError(
                    None, None, f"alias *{anchor} inside the node it names", mark
                )
            return super().compose_node(parent, index)
        if anchor is None:
            return super().compose_node(parent, index)
        self._open.append(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._open.pop()

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is not None and _expanded_size(node, {}) > MAX_YAML_VALUES:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"aliases expand to more than {MAX_YAML_VALUES:,} values",
                node.start_mark,
            )
        return node

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, AttributeError) as e:  # a scalar its tag's constructor refuses
            kind = node.tag.rsplit(":", 1)[-1]
            shown = "a value"
            if isinstance(node, yaml.ScalarNode):
                value = str(node.value)
                shown = repr(value if len(value) <= 40 else f"{value[:37]}...")
            why = f" ({str(e).split(': ', 1)[0]})" if isinstance(e, ValueError) else ""
            raise yaml.constructor.ConstructorError(
                None, None, f"{shown} is not a valid {kind}{why}", node.start_mark
            ) from None

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)
        for key in mapping:
            if not isinstance(key, str):
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is not text (quote it)", node.start_mark
                )
        return mapping


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many values ``node`` stands for with every alias expanded; an alias is the same
    node object as its anchor, so ``sizes`` (by ``id``) counts each node's subtree once."""
    size = sizes.get(id(node))
    if size is None:
        size = 1
        if isinstance(node, yaml.SequenceNode):
            size += sum(_expanded_size(item, sizes) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            size += sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
        sizes[id(node)] = size
    return size


def load_yaml(path: Path, text: str) -> Any:
    """Parse YAML safely (no object construction from tags) into JSON-shaped values.

    Raises:
        FormatError: not YAML, a scalar that does not read as its type, a key that is not
            text, a recursive alias, aliases that expand too far (:data:`MAX_YAML_VALUES`) or
            nesting too deep; names the line when known.
    """
    try:
        return yaml.load(text, Loader=_Loader)  # a SafeLoader: no objects built from tags
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        raise fail(path, f"invalid YAML: {e.problem or e.context}", line=line) from None
    except yaml.reader.ReaderError as e:  # a character YAML refuses; its text has 2 lines
        line = text.count("\n", 0, e.position) + 1
        character = f"U+{e.character:04X}" if isinstance(e.character, int) else repr(e.character)
        raise fail(path, f"invalid YAML: {character}: {e.reason}", line=line) from None
    except yaml.YAMLError as e:
        raise fail(path, f"invalid YAML: {e}") from None
    except RecursionError:
        raise fail(path, "invalid YAML: nested too deeply to read") from None


def from_record(record: dict[str, Any], number: int, where: str, path: Path) -> Exchange:
    """One ``{request, response}`` record; either side may be missing (``None``).

    Raises:
        FormatError: a side of the wrong type, a request body that is not a JSON object, or
            a status that is not an integer; names the field.
    """
    exchange = Exchange(number, where)
    request, response = record.get("request"), record.get("response")
    if isinstance(request, dict) and "body" in request and request.keys() & _REQUEST_WRAPPER:
        exchange.request_where = join(where, "request.body")
        exchange.request = request_body(request.get("body"), path, exchange.request_where)
        _request_details(exchange, request, "url" if "url" in request else "uri", path, where)
    elif isinstance(request, dict):
        exchange.request, exchange.request_where = request, join(where, "request")
    elif request is not None:
        raise fail(path, f"expected an object, not {type_name(request)}", join(where, "request"))
    # a Responses API body has "status" too, but never "body"
    if isinstance(response, dict) and "body" in response and response.keys() & _RESPONSE_WRAPPER:
        status = response.get("status_code", response.get("status"))
        if isinstance(status, dict):
            status = status.get("code")
        exchange.status = _status(status, path, join(where, "response.status_code"))
        exchange.date = http_date(header(response.get("headers"), "date"))
        exchange.response_where = join(where, "response.body")
        exchange.response = _text(response.get("body"), path, exchange.response_where)
    elif isinstance(response, dict | str):
        exchange.response, exchange.response_where = response, join(where, "response")
    elif response is not None:
        raise fail(path, f"expected an object, not {type_name(response)}", join(where, "response"))
    return exchange


_REQUEST_WRAPPER = frozenset({"method", "url", "uri", "headers"})
_RESPONSE_WRAPPER = frozenset({"status_code", "status", "headers"})


def from_cassette(doc: dict[str, Any], path: Path) -> list[Exchange]:
    """The interactions of a vcrpy cassette; each must have its request and its response.

    Raises:
        FormatError: ``interactions`` is not a list, an interaction lacks a side (a truncated
            cassette), a request body is not a JSON object, a status is not an integer.
    """
    interactions = doc.get("interactions")
    if not isinstance(interactions, list):
        raise fail(path, f"expected a list, not {type_name(interactions)}", "interactions")
    found = []
    for index, interaction in enumerate(interactions):
        where = f"interactions[{index}]"
        if not isinstance(interaction, dict):
            raise fail(path, f"expected a mapping, not {type_name(interaction)}", where)
        request, response = interaction.get("request"), interaction.get("response")
        if not isinstance(request, dict):
            raise _missing(path, request, f"{where}.request")
        exchange = Exchange(index + 1, where, request_where=f"{where}.request.body")
        body = request.get("body")
        if isinstance(body, dict) and "string" in body:
            body = body["string"]
        exchange.request = request_body(body, path, exchange.request_where)
        _request_details(exchange, request, "uri", path, where)
        if not isinstance(response, dict):
            raise _missing(path, response, f"{where}.response")
        status = response.get("status")
        code = status.get("code") if isinstance(status, dict) else status
        exchange.status = _status(code, path, f"{where}.response.status.code")
        exchange.date = http_date(header(response.get("headers"), "date"))
        body = response.get("body")
        exchange.response_where = f"{where}.response.body.string"
        exchange.response = _text(
            body.get("string") if isinstance(body, dict) else body, path, exchange.response_where
        )
        found.append(exchange)
    return found


def _missing(path: Path, part: Any, where: str) -> FormatError:
    problem = "missing (truncated cassette?)" if part is None else "expected a mapping"
    return fail(path, problem, where)


def _request_details(
    exchange: Exchange, request: dict[str, Any], key: str, path: Path, where: str
) -> None:
    """URL, method and client of a request; ``key`` names its URL (``url`` or ``uri``).

    Raises:
        FormatError: a URL that does not parse (an unclosed IPv6 bracket, say).
    """
    uri = request.get(key)
    exchange.uri = uri if isinstance(uri, str) else None
    if exchange.uri is not None:
        try:
            urlsplit(exchange.uri)
        except ValueError as e:
            raise fail(path, f"not a URL: {e}", join(where, f"request.{key}")) from None
    method = request.get("method")
    exchange.method = method if isinstance(method, str) else None
    exchange.user_agent = header(request.get("headers"), "user-agent")


def request_body(value: Any, path: Path, where: str) -> dict[str, Any] | None:
    """A request body as a mapping: JSON text parsed; empty → ``None``.

    Raises:
        FormatError: not JSON, or JSON that is not an object; names the field.
    """
    value = _text(value, path, where)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        value = parse_json_body(value, path, where)
    if not isinstance(value, dict):
        raise fail(path, f"expected a JSON object, not {type_name(value)}", where)
    return value


def parse_json_body(text: str, path: Path, where: str, *, event_line: int | None = None) -> Any:
    """A recorded body's JSON text (or one server-sent event's data), parsed strictly
    (:func:`~agenttrail.formats._common.loads`: no NaN or infinity).

    Args:
        text: the JSON text.
        path: the file, for errors.
        where: the body's field path, for errors.
        event_line: for the data of a server-sent event, the body line the event starts on.

    Raises:
        FormatError: not JSON (naming the body line and column, or the event's line) or a
            number ``loads`` refuses (naming the field).
    """
    event = "" if event_line is None else f"server-sent event at body line {event_line}: "
    try:
        return loads(text)
    except json.JSONDecodeError as e:
        at = f" (body line {e.lineno}, column {e.colno})" if event_line is None else ""
        raise fail(path, f"{event}invalid JSON: {e.msg}{at}", where) from None
    except JSONValueError as e:
        raise fail(path, f"{event}{e}", e.within(where)) from None


def _status(value: Any, path: Path, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise fail(path, f"expected an integer HTTP status, not {type_name(value)}", where)


def _text(value: Any, path: Path, where: str) -> Any:
    """A body as text: bytes are decoded (gzip-compressed ones inflated first)."""
    if not isinstance(value, bytes):
        return value
    if value.startswith(b"\x1f\x8b"):
        try:
            value = gzip.decompress(value)
        except (OSError, EOFError) as e:
            raise fail(path, f"gzip body does not inflate: {e}", where) from None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as e:
        raise fail(path, f"body is not UTF-8 (byte {e.start})", where) from None


def header(headers: Any, name: str) -> str | None:
    """A header's first value by lower-case ``name``, compared case-insensitively.

    ``headers`` is a mapping (vcrpy stores each value as a list) or a list of pairs.
    """
    pairs: list[Any] = []
    if isinstance(headers, dict):
        pairs = list(headers.items())
    elif isinstance(headers, list):
        pairs = [p for p in headers if isinstance(p, list | tuple) and len(p) == 2]
    for key, value in pairs:
        if isinstance(key, str) and key.lower() == name:
            if isinstance(value, list):
                value = value[0] if value else None
            return value if isinstance(value, str) else None
    return None


@lru_cache(maxsize=64)
def http_date(value: str | None) -> str | None:
    """An HTTP ``Date`` header (RFC 9110 §5.6.7) in ``created_at`` form, else ``None``.
    Remembered: the header has a resolution of one second, so the exchanges of a busy
    agent (and of a recording) share a few values, and parsing one costs tens of µs."""
    if value is None:
        return None
    try:
        return timestamp_or_none(parsedate_to_datetime(value))
    except (TypeError, ValueError, IndexError, OverflowError):  # a year or zone beyond range
        return timestamp_or_none(value)
