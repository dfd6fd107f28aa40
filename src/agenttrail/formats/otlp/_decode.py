"""OTLP trace requests from bytes: protobuf with the official message classes, OTLP JSON with
protobuf's ``json_format``, and attribute values (``AnyValue``) as plain Python values.

OTLP/HTTP (https://opentelemetry.io/docs/specs/otlp/#otlphttp): a body is one
``ExportTraceServiceRequest``, binary protobuf (``application/x-protobuf``) or its JSON
mapping (``application/json``), where, unlike protobuf's own JSON mapping, ``traceId`` and
``spanId`` are hex strings (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
from collections.abc import Iterable
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from agenttrail.formats.http.recording import type_name

__all__ = ["attributes", "hex_id", "request_from_json", "request_from_protobuf", "value_of"]

_NOT_A_REQUEST = "not an OTLP ExportTraceServiceRequest in JSON"

_FAILED_FIELD = re.compile(r"Failed to parse (\w+) field: ")
"""One level of the field path in protobuf's ``json_format.ParseError`` message."""

_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
"""The byte fields OTLP JSON writes as hex (spans and their links)."""


def request_from_protobuf(data: bytes) -> ExportTraceServiceRequest:
    """Parse a binary ``ExportTraceServiceRequest``.

    Raises:
        ValueError: the bytes are not one (the protobuf library's reason in the message).
    """
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except DecodeError as e:
        raise ValueError(f"not an OTLP ExportTraceServiceRequest in protobuf: {e}") from None
    return request


def request_from_json(document: Any) -> ExportTraceServiceRequest:
    """An ``ExportTraceServiceRequest`` from its OTLP JSON form (already parsed).

    Hex ids are turned into the base64 that ``json_format`` reads for ``bytes`` fields;
    unknown fields are ignored, as OTLP JSON receivers must
    (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding).

    Raises:
        ValueError: the document does not have the message's shape; names the field.
    """
    if not isinstance(document, dict):
        raise ValueError("expected an ExportTraceServiceRequest object (resourceSpans)")
    resources = _list(document.get("resourceSpans") or document.get("resource_spans"))
    for r, resource in enumerate(resources):
        scopes = _list(resource.get("scopeSpans") or resource.get("scope_spans"))
        for s, scope in enumerate(scopes):
            for n, span in enumerate(_list(scope.get("spans"))):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                _ids_to_base64(span, where)
                for k, link in enumerate(_list(span.get("links"))):
                    _ids_to_base64(link, f"{where}.links[{k}]")
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except json_format.ParseError as e:
        raise ValueError(f"{_NOT_A_REQUEST}: {_located(document, request, e)}") from None
    except RecursionError:
        raise ValueError(f"{_NOT_A_REQUEST}: nested too deeply") from None
    except (SystemError, UnicodeError):
        # upb raises SystemError (its own UnicodeEncodeError inside) for a field name holding a
        # lone surrogate, which JSON text can spell (\ud800) and UTF-8 cannot carry
        raise ValueError(f"{_NOT_A_REQUEST}: a name or text is not valid Unicode") from None
    return request


def _list(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _located(value: dict[str, Any], message: Message, error: json_format.ParseError) -> str:
    """Where ``value`` (the JSON of ``message``) fails to parse, and why, as one clause:
    ``resourceSpans[0].scopeSpans[1].spans[2].startTimeUnixNano: expected an integer, not
    'abc'``. protobuf's own message names the field path without the list indices, and says
    ``Failed to parse F field:`` once per level; the element at fault is found by parsing
    the message's parts one at a time."""
    path = ""
    while (inner := _failing_part(value, message)) is not None:
        where, value, message, fault = inner
        path += where
        if isinstance(fault, str):  # said here: protobuf's words for it were no help
            return f"{path.lstrip('.')}: {fault}"
        error = fault
    fields = []
    text = str(error)
    while found := _FAILED_FIELD.match(text):
        fields.append(found[1])
        text = text[found.end() :]
    text = text.rstrip(".")
    if at := _AT_FIELD.search(text):  # "… at AnyValue.boolValue": the field, when not named yet
        text = text[: at.start()]
        path += "" if fields else at[1]
    place = ".".join([path.lstrip(".")] * bool(path) + fields)
    return f"{place}: {_reason(text)}" if place else _reason(text)


def _failing_part(
    value: dict[str, Any], message: Message
) -> tuple[str, dict[str, Any], Message, json_format.ParseError | str] | None:
    """The first part of ``value`` (an element of a list of messages, or a message field)
    that fails to parse on its own: its path from ``value`` (``.spans[2]``), its JSON, its
    message and protobuf's error, or what is wrong with it when protobuf's words would not
    say (a list where one message goes: "unhashable type: 'dict'"); ``None`` when no part
    fails (the fault is ``value``'s own)."""
    for field in message.DESCRIPTOR.fields:
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            continue
        name = field.json_name if field.json_name in value else field.name
        part = value.get(name)
        held = getattr(message, field.name)
        if isinstance(held, Message):  # one message
            if part is not None and not isinstance(part, dict):
                return f".{name}", value, message, f"expected an object, not {type_name(part)}"
            elements: Iterable[tuple[int | None, Any]] = [(None, part)]
        else:  # a repeated field: a container of messages
            elements = enumerate(part) if isinstance(part, list) else []
        for index, element in elements:
            if not isinstance(element, dict):
                continue
            inner = held if index is None else held.add()
            try:
                json_format.ParseDict(element, inner, ignore_unknown_fields=True)
            except json_format.ParseError as e:
                return (f".{name}" if index is None else f".{name}[{index}]"), element, inner, e
            except Exception:  # the part fails otherwise (a lone surrogate): said as a whole
                return None
    return None


_AT_FIELD = re.compile(r" at [A-Za-z]\w*((?:\.\w+(?:\[\d+\])?)*)$")
"""Where some of protobuf's reasons end by saying where: the message, then its field."""

_REASONS = (
    (re.compile(r"invalid literal for int\(\) with base 10: (.*)"), "expected an integer, not {}"),
    (
        re.compile(
            r"int\(\) argument must be a string, a bytes-like object or a real number, not '(\w+)'"
        ),
        "expected an integer, not {}",
    ),
    (re.compile(r"expected string or bytes-like object, got '(\w+)'"), "expected a string, not {}"),
    (re.compile(r"repeated field \w+ must be in \[\] which is .*"), "expected a list ([…])"),
)
"""Python's own words in protobuf's reasons, and what they mean in the document's terms."""


def _reason(text: str) -> str:
    """protobuf's reason, with Python's words for a value of the wrong type said plainly."""
    for pattern, said in _REASONS:
        if found := pattern.fullmatch(text):
            return said.format(*found.groups())
    return text


def _ids_to_base64(record: dict[str, Any], where: str) -> None:
    """Turn ``record``'s hex ids into base64 (``where``: its path, named in errors).

    Raises:
        ValueError: an id that is not text (a number, an object).
    """
    for name in _ID_FIELDS:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(
                f"{_NOT_A_REQUEST}: {where}.{name}: expected a hex string, not {type_name(value)}"
            )
        if isinstance(value, str) and value and len(value) % 2 == 0:
            # not hex: json_format names the field when it is not base64 either
            with contextlib.suppress(ValueError):
                record[name] = base64.b64encode(bytes.fromhex(value)).decode("ascii")


def hex_id(value: bytes) -> str:
    """A trace or span id as OTLP JSON and W3C Trace Context write it: lower-case hex."""
    return binascii.hexlify(value).decode("ascii")


def value_of(value: AnyValue) -> Any:
    """An ``AnyValue`` as a Python value: str, bool, int, float, list, dict; bytes as base64
    text (a payload is JSON-shaped); ``None`` when unset."""
    kind = value.WhichOneof("value")
    if kind == "string_value":  # most attributes: tested first, read without getattr
        return value.string_value
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, kind) if kind else None


def attributes(pairs: Any) -> dict[str, Any]:
    """Attributes (a repeated ``KeyValue``) as a mapping; a key given twice keeps its last
    value. One pass over the pairs, text values (most of them) read in place."""
    found: dict[str, Any] = {}
    pair: KeyValue
    for pair in pairs:
        value = pair.value
        if value.WhichOneof("value") == "string_value":
            found[pair.key] = value.string_value
        else:
            found[pair.key] = value_of(value)
    return found
