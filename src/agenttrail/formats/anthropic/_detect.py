"""Recognising Anthropic Messages recordings: which files are ours, and what a document is.

Split from :mod:`agenttrail.formats.anthropic` (which reads them): request/response exchanges,
a request or response body, a message list, or a stream — and never an OpenAI Chat
Completions message list, a Claude Code transcript or agenttrail's own export.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agenttrail.formats._common import json_prefix
from agenttrail.formats.http.recording import header
from agenttrail.providers import anthropic, openai

__all__ = ["document_kind", "sniff"]

_SNIFF_PARSE_LIMIT = 8 * 1024 * 1024
"""Files up to this size (bytes) are parsed whole by :func:`sniff` for a precise answer;
recordings are far smaller, and a larger file is judged by its first bytes only."""

_SNIFF_PREFIX = 64 * 1024
"""Bytes :func:`sniff` looks at when it does not parse the whole file."""


_OPENAI_ROLES = openai.CHAT_ROLES - anthropic.ROLES
"""Chat Completions roles no Anthropic message has (``system``, ``developer``, ``tool``,
``function``)."""


def sniff(path: Path, data: bytes) -> bool:
    """True when ``data`` is an Anthropic Messages recording, body, message list or SSE stream.

    Not claimed: OpenAI Chat Completions messages (``tool_calls``, ``tool`` / ``system``
    roles, string content only), JSON Lines files (Claude Code transcripts, agenttrail's own
    export). Files up to 8 MiB are parsed for the answer; a larger one by the JSON shape of its
    first :data:`_SNIFF_PREFIX` bytes, and malformed ones by their first bytes so that
    :func:`read` can name the fault.
    """
    head = data[:_SNIFF_PREFIX].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith((b"event:", b"data:", b":")):
        return b"message_start" in head
    if not head.startswith((b"{", b"[")):
        return False
    if len(data) <= _SNIFF_PARSE_LIMIT:
        try:
            doc = json.loads(data.decode("utf-8-sig"))
        except (ValueError, RecursionError):  # not UTF-8 or JSON, an over-long int, too deep
            pass
        else:
            return document_kind(doc) is not None
    doc = json_prefix(data, _SNIFF_PREFIX)  # too large to parse: the shape its prefix gives
    if doc is not None and document_kind(doc) is not None:
        return True
    return _looks_anthropic(head.decode("utf-8", errors="replace"))


def document_kind(doc: Any) -> str | None:
    """What a parsed document is: ``exchanges``, ``request``, ``response``, ``messages``."""
    if isinstance(doc, dict):
        if _is_exchange(doc):
            return "exchanges"
        if doc.get("type") == "message" and doc.get("role") == "assistant":
            return "response" if isinstance(doc.get("content"), list) else None
        if "messages" in doc and "model" in doc:
            messages = doc["messages"]
            if not isinstance(messages, list) or not _anthropic_messages(messages):
                return None
            marked = any(k in doc for k in anthropic.DISTINCT_REQUEST_FIELDS) or _has_blocks(
                messages
            )
            return "request" if marked else None
        return None
    if isinstance(doc, list) and doc and all(isinstance(x, dict) for x in doc):
        if all(_is_exchange(x) for x in doc):
            return "exchanges"
        if _anthropic_messages(doc) and _has_blocks(doc):
            return "messages"
    return None


def _is_exchange(item: dict[str, Any]) -> bool:
    request, response = item.get("request"), item.get("response")
    if not isinstance(request, dict) or not isinstance(response, dict):
        return False
    url = request.get("url")
    if isinstance(url, str) and ("anthropic.com" in url or "/v1/messages" in url):
        return True
    if header(request.get("headers"), "anthropic-version") is not None:
        return True
    body = request.get("body")  # Bedrock and Vertex name the version in the body instead
    return isinstance(body, dict) and "anthropic_version" in body


def _anthropic_messages(messages: list[Any]) -> bool:
    """Every item is ``{role: user|assistant, content}`` with no OpenAI-only keys."""
    for message in messages:
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            return False
        role = message["role"]
        if not isinstance(role, str) or role in _OPENAI_ROLES:
            return False
        if openai.CHAT_CALL_FIELDS & message.keys():
            return False
    return True


def _has_blocks(messages: list[dict[str, Any]]) -> bool:
    """Some message's content is a list of blocks, all of Messages API types."""
    found = False
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                kind = block.get("type") if isinstance(block, dict) else None
                if not isinstance(kind, str):
                    continue
                if kind not in anthropic.BLOCKS and not anthropic.is_tool_result(kind):
                    return False
                found = True
    return found


_ANTHROPIC_MARKS = re.compile(
    r'api\.anthropic\.com|"anthropic-version"|"type"\s*:\s*"(?:tool_use|tool_result|'
    r'server_tool_use|thinking|redacted_thinking)"|"type"\s*:\s*"message"\s*,\s*"role"\s*:\s*'
    r'"assistant"'
)
_JSONL_MARKS = re.compile(r'"(?:parentUuid|sessionId|leafUuid)"|"seq"\s*:.*"hash"\s*:')


def _looks_anthropic(head: str) -> bool:
    """A guess from the first bytes, for files too big to parse or malformed."""
    first = head.split("\n", 1)[0]
    try:
        json.loads(first)
    except (ValueError, RecursionError):
        pass
    else:
        return False  # a whole JSON value on the first line and more after it: JSON Lines
    if _JSONL_MARKS.search(head) or '"tool_calls"' in head or "chatcmpl" in head:
        return False
    return _ANTHROPIC_MARKS.search(head) is not None
