"""Recognising OpenAI recordings: which files are ours, and the exchanges a document holds.

Split from :mod:`agenttrail.formats.openai` (which reads them): a Chat Completions message
list, a request body, recorded request/response JSON, or a VCR cassette — and never an
Anthropic recording, a Claude Code transcript or agenttrail's own export.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agenttrail.errors import FormatError
from agenttrail.formats._common import json_prefix, lead_bytes
from agenttrail.formats.http.recording import Exchange, fail, from_cassette, from_record
from agenttrail.providers import anthropic, openai

__all__ = ["decoded_message", "endpoint", "exchanges", "sniff", "str_in"]

_SNIFF_PARSE_LIMIT = 16 * 1024 * 1024
"""Largest JSON file (bytes) that :func:`sniff` parses whole to look at its shape. Recordings
are kilobytes to a few megabytes; a larger file is judged by the shape of its first
:data:`_SNIFF_PREFIX` bytes (:func:`~agenttrail.formats._common.json_prefix`)."""

_SNIFF_PREFIX = 1024 * 1024
"""Bytes of a file over :data:`_SNIFF_PARSE_LIMIT` whose JSON shape :func:`sniff` reads: enough
for the first messages or items of any recording, bounded so that detection stays cheap."""

_SNIFF_HEAD = 64 * 1024
"""How many leading bytes of a file that is not valid JSON are searched for OpenAI markers."""

_OPENAI_MARKERS = (
    b'"tool_calls"',
    b'"tool_call_id"',
    b'"chat.completion',
    b'"function_call_output"',
    b"api.openai.com",
)
_ANTHROPIC_MARKERS = (
    b'"tool_use"',
    b'"tool_result"',
    b'"stop_reason"',
    b"api.anthropic.com",
    b"anthropic-version",
)

_CASSETTE_START = re.compile(
    rb"\A(?:\xef\xbb\xbf)?(?:[ \t]*(?:#[^\n]*|---[^\n]*)?\r?\n)*interactions:"
)
_OPENAI_URI = re.compile(
    rb"^\s*uri:\s*['\"]?https?://[^\s'\"]*/(?:chat/completions|responses)\b", re.MULTILINE
)

# --- recognising the input ---------------------------------------------------------------


def sniff(path: Path, data: bytes) -> bool:
    """True when ``data`` is an OpenAI recording this module reads.

    A VCR cassette is recognised by its ``interactions:`` head and an OpenAI endpoint in a
    ``uri:`` line. A JSON file (up to :data:`_SNIFF_PARSE_LIMIT` bytes; a larger one by its
    first :data:`_SNIFF_PREFIX` bytes) is parsed and its shape checked; Anthropic content
    blocks or endpoints, JSON Lines (Claude Code transcripts, agenttrail's own export) and
    other shapes are refused. A file that is not valid JSON is
    claimed only when its first bytes carry OpenAI markers and no Anthropic ones, so that
    ``read`` can name where it breaks.
    """
    first = lead_bytes(data)  # not data.lstrip(): a copy of the whole file
    if first in (b"[", b"{"):
        return _sniff_json(path, data)
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    return bool(_CASSETTE_START.match(body)) and bool(_OPENAI_URI.search(body))


def _sniff_json(path: Path, data: bytes) -> bool:
    if len(data) > _SNIFF_PARSE_LIMIT:
        # too large to parse for a look: judge the shape its first bytes give
        doc = json_prefix(data, _SNIFF_PREFIX)
        return doc is not None and _is_openai_document(doc, path)
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return _looks_like_broken_openai(data)
    return _is_openai_document(doc, path)


def _looks_like_broken_openai(data: bytes) -> bool:
    try:
        json.loads(data.split(b"\n", 1)[0])
    except (ValueError, RecursionError):
        head = data[:_SNIFF_HEAD]
        return any(m in head for m in _OPENAI_MARKERS) and not any(
            m in head for m in _ANTHROPIC_MARKERS
        )
    return False  # the first line is a whole JSON value: JSON Lines, not one document


def _is_openai_document(doc: Any, path: Path) -> bool:
    if isinstance(doc, list):
        if not doc:
            return False
        if all(isinstance(x, dict) and "request" in x for x in doc):
            return all(_is_openai_exchange(x, path) for x in doc)
        if all(isinstance(x, list) for x in doc):
            return all(x and _is_message_list(x) for x in doc)
        return _is_message_list(doc) or _is_items_list(doc)
    if not isinstance(doc, dict):
        return False
    interactions = doc.get("interactions")
    if isinstance(interactions, list):
        uris = [
            i["request"].get("uri")
            for i in interactions
            if isinstance(i, dict) and isinstance(i.get("request"), dict)
        ]
        return any(isinstance(u, str) and endpoint(u) is not None for u in uris)
    if "request" in doc:
        return _is_openai_exchange(doc, path)
    return _is_openai_body(doc)


def _is_message_list(value: list[Any]) -> bool:
    # a role of the wrong type is still claimed, so that read() names the field
    return all(
        isinstance(m, dict) and "role" in m and not _has_anthropic_blocks(m)
        for m in map(decoded_message, value)
    )


def decoded_message(value: Any) -> Any:
    """A message list's element as a message: a JSON-encoded object (how tracing span
    attributes store messages, e.g. ``"{\"role\":\"user\",\"content\":\"hi\"}"``) parsed;
    anything else, or a string that is not a JSON object, as given (``read`` names it)."""
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        return value
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return value
    return parsed if isinstance(parsed, dict) else value


def _is_items_list(value: list[Any]) -> bool:
    if not all(isinstance(i, dict) and ("role" in i or "type" in i) for i in value):
        return False
    return any(str_in(i.get("type"), openai.INPUT_ITEM_MARKS) for i in value) and not any(
        _has_anthropic_blocks(i) for i in value
    )


def _has_anthropic_blocks(message: dict[str, Any]) -> bool:
    content = message.get("content")
    if not isinstance(content, list):
        return False
    for block in content:
        if isinstance(block, dict):
            kind = block.get("type")
            if str_in(kind, anthropic.DISTINCT_BLOCKS) or (kind == "image" and "source" in block):
                return True
    return False


def str_in(value: Any, names: frozenset[str]) -> bool:
    """``value`` is one of ``names`` (a set lookup that a list or object cannot break)."""
    return isinstance(value, str) and value in names


def _is_anthropic_body(body: dict[str, Any]) -> bool:
    model = body.get("model")
    return (
        body.get("type") == "message"
        or "anthropic_version" in body
        or ("system" in body and "messages" in body)
        or (isinstance(model, str) and model.startswith("claude"))
    )


def _is_openai_body(body: Any) -> bool:
    if not isinstance(body, dict) or _is_anthropic_body(body):
        return False
    messages = body.get("messages")
    if isinstance(messages, list):
        return bool(messages) and _is_message_list(messages)
    if "model" in body and isinstance(body.get("input"), str | list):
        return True
    kind = body.get("object")
    if isinstance(body.get("choices"), list):
        return kind is None or (isinstance(kind, str) and kind.startswith("chat.completion"))
    return kind == "response" and isinstance(body.get("output"), list)


def _is_openai_exchange(record: dict[str, Any], path: Path) -> bool:
    try:
        exchange = from_record(record, 1, "", path)
    except FormatError:
        return False
    bodies = (exchange.request, _maybe_json(exchange.response))
    if any(isinstance(body, dict) and _is_anthropic_body(body) for body in bodies):
        return False
    if exchange.uri is not None:
        return "anthropic" not in exchange.uri and (
            "openai" in exchange.uri or endpoint(exchange.uri) is not None
        )
    return any(_is_openai_body(body) for body in bodies)


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value


def endpoint(uri: str) -> str | None:
    """``chat`` or ``responses`` for a conversation endpoint's URL, else ``None`` (also for
    text that does not parse as a URL)."""
    try:
        path = urlsplit(uri).path.rstrip("/")
    except ValueError:
        return None
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    return None


def exchanges(doc: Any, path: Path) -> list[Exchange]:
    if isinstance(doc, list):
        if doc and all(isinstance(x, dict) and "request" in x for x in doc):
            return [from_record(x, i + 1, f"[{i}]", path) for i, x in enumerate(doc)]
        if doc and all(isinstance(x, list) for x in doc):
            return [
                Exchange(i + 1, f"[{i}]", request={"messages": x}, list_where=f"[{i}]")
                for i, x in enumerate(doc)
            ]
        if any(isinstance(x, dict) and "role" not in x and "type" in x for x in doc):
            return [Exchange(1, "", request={"input": doc}, list_where="")]
        return [Exchange(1, "", request={"messages": doc}, list_where="")]
    if isinstance(doc, dict):
        if "interactions" in doc:
            return from_cassette(doc, path)
        if "request" in doc:
            return [from_record(doc, 1, "", path)]
        if "messages" in doc or "input" in doc:
            return [Exchange(1, "", request=doc)]
        if "choices" in doc or "output" in doc:
            return [Exchange(1, "", response=doc)]
    raise fail(
        path,
        "not an OpenAI recording: expected a message list, a request or response body, "
        "{request, response} records or a VCR cassette (interactions)",
    )
