"""Anthropic Messages API recordings: request/response pairs, bare bodies, message lists, SSE.

Inputs recognised (Messages API reference: https://docs.anthropic.com/en/api/messages)::

    exchanges   [{"request": {method, url, headers, body}, "response": {status_code, headers,
                  body}}, ...] or one such object (anthropic-sdk-python's inline snapshots)
    request     {model, messages: [{role, content}], system?, ...}      a bare request body
    response    {type: "message", role: "assistant", id, model, content: [...], usage, ...}
    messages    [{role: "user"|"assistant", content: str | [block, ...]}, ...]
    sse         event: message_start / content_block_* / message_delta / message_stop lines
                (https://docs.anthropic.com/en/docs/build-with-claude/streaming)

Mapping (the importer conventions of docs/architecture.md):

- ``system`` (a string or text blocks) → a ``system`` message with actor ``system``, once at
  the start and again only when a later request changes it.
- A user message: ``tool_result`` blocks → ``tool_result`` events (``toolCallId`` = the
  block's ``tool_use_id`` verbatim, ``output`` = its ``content`` verbatim, ``is_error`` kept),
  then the other blocks as one user message. Actor ``user`` is stored when the message holds
  no tool results (a prompt); text sent beside tool results may be runtime text, so its actor
  is left to be derived.
- An assistant message: one ``message`` (text blocks joined with ``\\n``; ``blocks`` = the
  non-tool blocks verbatim when they are more than one plain text block; ``messageId``,
  ``stopReason``, ``container`` and ``meta`` for a response), then in content order one
  ``tool_call`` per ``tool_use`` / ``server_tool_use`` / ``mcp_tool_use`` block (``caller``
  kept verbatim, ``server=True`` for server tools) and one ``tool_result`` per server tool
  result block (``*_tool_result``; ``is_error`` true when its content is a
  ``*_tool_result_error``, https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/code-execution-tool).
- A response with HTTP status ≥ 400, or an ``error`` body / SSE ``error`` event → an ``error``
  event (``code`` = status, ``errorType`` = ``error.type``;
  https://docs.anthropic.com/en/api/errors).

Each request carries the whole history, so a file of exchanges is one session: exchange k
appends the request's messages after the longest common prefix with the conversation so far
(the previous request's messages and the previous response), compared by role, text and tool
ids. A request that does not extend that conversation is appended from where it differs, with
a warning naming the exchange. Pairing of calls and results is left to
:func:`agenttrail.views.pairing.pair_tool_calls` (by id over the whole session).

Truncated SSE streams (no ``message_stop``) are assembled from what arrived, with a warning; a
last event whose JSON was cut off is dropped with a warning. Malformed JSON anywhere else, and
a content block without a ``type``, raise :class:`~agenttrail.errors.FormatError`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agenttrail.errors import FormatError
from agenttrail.formats._common import (
    ImportedSession,
    JSONValueError,
    decode_text,
    load_json,
    loads,
    title_from,
)
from agenttrail.formats.anthropic._stream import CALL_TYPES, Streamed, assemble_sse
from agenttrail.formats.http.recording import header, http_date
from agenttrail.model import NewEvent, NewSession, content_text, events

__all__ = ["NAME", "read", "sniff"]

NAME = "anthropic"

_PROVIDER = "anthropic"

_SNIFF_PARSE_LIMIT = 8 * 1024 * 1024
"""Files up to this size (bytes) are parsed whole by :func:`sniff` for a precise answer;
recordings are far smaller, and a larger file is judged by its first bytes only."""

_SNIFF_PREFIX = 64 * 1024
"""Bytes :func:`sniff` looks at when it does not parse the whole file."""

_ANTHROPIC_BLOCKS = frozenset(
    {
        "text",
        "image",
        "document",
        "search_result",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "mcp_tool_use",
        "container_upload",
    }
)
"""Content block types of the Messages API (besides any ``*_tool_result``)."""

_NOT_A_TURN = re.compile(r"/count_tokens/?$|/v1/(?:models|files|messages/batches)(?:/|$)")
"""Endpoints in a recording that produce no turn (token counting, models, files, batches);
Bedrock and Vertex URLs (``…/invoke``, ``…:rawPredict``) are turns and are not matched."""

_OPENAI_MESSAGE_KEYS = frozenset({"tool_calls", "tool_call_id", "function_call"})
_OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})
_ANTHROPIC_REQUEST_KEYS = frozenset({"system", "stop_sequences", "top_k", "anthropic_version"})


# --- recognising the input ------------------------------------------------------------------


def sniff(path: Path, data: bytes) -> bool:
    """True when ``data`` is an Anthropic Messages recording, body, message list or SSE stream.

    Not claimed: OpenAI Chat Completions messages (``tool_calls``, ``tool`` / ``system``
    roles, string content only), JSON Lines files (Claude Code transcripts, agenttrail's own
    export). Files up to 8 MiB are parsed for the answer; malformed ones are judged by their
    first bytes so that :func:`read` can name the fault.
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
            return _kind(doc) is not None
    return _looks_anthropic(head.decode("utf-8", errors="replace"))


def _kind(doc: Any) -> str | None:
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
            marked = any(k in doc for k in _ANTHROPIC_REQUEST_KEYS) or _has_blocks(messages)
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
        if _OPENAI_MESSAGE_KEYS & message.keys():
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
                if kind not in _ANTHROPIC_BLOCKS and not kind.endswith("_tool_result"):
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


# --- reading --------------------------------------------------------------------------------


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read one Anthropic recording into one session.

    Args:
        path: the file's path (named in errors and warnings; ``path.name`` in metadata).
        data: the file's bytes: JSON (exchanges, a request or response body, a message list)
            or a Server-Sent Events stream of the Messages API.

    Returns:
        One :class:`ImportedSession` with ``id`` ``None`` (the recordings carry no session
        id) and events in conversation order, each with a stable ``key``.

    Raises:
        FormatError: not UTF-8, malformed JSON or SSE data, a document of none of the shapes
            above, or a field of the wrong type (e.g. a content block without ``type``); the
            message names the file and the line or field.
    """
    builder = _Builder(path)
    text = decode_text(path, data)
    if text.lstrip().startswith(("event:", "data:", ":")):
        kind = "sse"
        for k, item in enumerate(assemble_sse(builder, text), start=1):
            if isinstance(item, Streamed):
                builder.response(item.body, f"line {item.line}", k, arguments=item.arguments)
            else:
                builder.error(None, item.data, f"x{k}:error", None)
    else:
        doc = load_json(path, data)
        found = _kind(doc)
        if found is None:
            raise FormatError(
                "not an Anthropic Messages recording: expected request/response exchanges, a "
                "request or response body, a message list or an SSE stream",
                path=str(path),
            )
        kind = found
        if kind == "exchanges":
            items = doc if isinstance(doc, list) else [doc]
            for k, item in enumerate(items, start=1):
                builder.exchange(item, f"[{k - 1}]" if isinstance(doc, list) else "", k)
        elif kind == "request":
            builder.request(doc, "", 1, None)
        elif kind == "response":
            builder.response(doc, "", 1)
        else:
            builder.history(_messages(builder, doc, ""), "", 1, None)
    return [builder.session(kind)]


@dataclass
class _Builder:
    """Turns messages, responses and errors into events, keeping the conversation so far."""

    path: Path
    events: list[NewEvent] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    conversation: list[Any] = field(default_factory=list)
    """Fingerprints of the messages sent and received so far (see :func:`_fingerprint`)."""
    system: Any = None
    title: str | None = None
    started: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    exchanges: int = 0

    @property
    def where(self) -> str:
        return str(self.path)

    def fail(self, message: str, at: str) -> FormatError:
        return FormatError(message, path=self.where, field=at.lstrip(".") or None)

    def warn(self, text: str) -> None:
        self.warnings.append(f"{self.path.name}: {text}")

    def add(self, payload: dict[str, Any], key: str, created_at: str | None) -> None:
        self.events.append(NewEvent(payload, created_at, key))
        if self.started is None and created_at is not None:
            self.started = created_at

    def session(self, kind: str) -> ImportedSession:
        metadata = {"format": NAME, "source": self.path.name, "input": kind, **self.meta}
        if self.exchanges:
            metadata["exchanges"] = self.exchanges
        new = NewSession(
            title=self.title,
            agent=metadata.pop("agent", None),
            started=self.started,
            metadata=metadata,
        )
        return ImportedSession(new, self.events, self.warnings)

    # -- exchanges ---------------------------------------------------------------------------

    def exchange(self, item: dict[str, Any], at: str, k: int) -> None:
        """One recorded request/response pair (exchange ``k``, 1-based)."""
        self.exchanges += 1
        request = _mapping(self, item.get("request"), f"{at}.request")
        response = _mapping(self, item.get("response"), f"{at}.response")
        headers = response.get("headers")
        created = http_date(header(headers, "date"))
        request_id = header(headers, "request-id")
        if k == 1:
            self._session_meta(request)
        url = request.get("url")
        path = ""
        if isinstance(url, str):
            try:
                path = urlsplit(url).path
            except ValueError as e:  # a bad IPv6 literal, say
                raise self.fail(f"not a URL: {e}", f"{at}.request.url") from None
        if _NOT_A_TURN.search(path):
            self.warn(f"exchange {k}: {path} is not a Messages API call; skipped")
            return
        body = _body(self, request.get("body"), f"{at}.request.body")
        if not isinstance(body, dict):
            raise self.fail("expected a JSON object", f"{at}.request.body")
        self.request(body, f"{at}.request.body", k, created)
        status = response.get("status_code")
        if status is not None and (not isinstance(status, int) or isinstance(status, bool)):
            raise self.fail("expected an integer HTTP status", f"{at}.response.status_code")
        reply = _body(self, response.get("body"), f"{at}.response.body")
        if isinstance(reply, str) and reply.lstrip().startswith(("event:", "data:")):
            streamed = assemble_sse(self, reply, f"{at}.response.body")
            for n, part in enumerate(streamed):
                key = f"x{k}:s{n}"
                if isinstance(part, Streamed):
                    self.response(
                        part.body,
                        f"{at}.response.body",
                        k,
                        created,
                        request_id,
                        arguments=part.arguments,
                        key=key,
                    )
                else:  # an error event inside a stream that began with HTTP 200
                    self.error(None, part.data, f"{key}:error", created, request_id)
        elif (status is not None and status >= 400) or _is_error_body(reply):
            self.error(status, reply, f"x{k}:error", created, request_id)
        else:
            reply = _mapping(self, reply, f"{at}.response.body")
            self.response(reply, f"{at}.response.body", k, created, request_id)

    def _session_meta(self, request: dict[str, Any]) -> None:
        headers = request.get("headers")
        url = request.get("url")
        found = {
            "agent": header(headers, "user-agent"),
            "url": url if isinstance(url, str) else None,
            "anthropic_version": header(headers, "anthropic-version"),
            "anthropic_beta": header(headers, "anthropic-beta"),
            "helper": header(headers, "x-stainless-helper"),
        }
        self.meta.update((k, v) for k, v in found.items() if v is not None)

    def request(self, body: dict[str, Any], at: str, k: int, created: str | None) -> None:
        """A request body: its system prompt and the messages not yet in the conversation."""
        messages = _messages(self, body.get("messages"), f"{at}.messages")
        if isinstance(body.get("model"), str) and "model" not in self.meta:
            self.meta["model"] = body["model"]
        tools = body.get("tools")
        if isinstance(tools, list) and "tools" not in self.meta:
            self.meta["tools"] = [t.get("name") for t in tools if isinstance(t, dict)]
        self.history(messages, f"{at}.messages", k, created, body.get("system"), f"{at}.system")

    def history(
        self,
        messages: list[dict[str, Any]],
        at: str,
        k: int,
        created: str | None,
        system: Any = None,
        system_at: str = "system",
    ) -> None:
        """Append the messages of request ``k`` that are not yet in the conversation."""
        prints = [_fingerprint(m) for m in messages]
        same = 0
        while (
            same < min(len(prints), len(self.conversation))
            and prints[same] == self.conversation[same]
        ):
            same += 1
        if same < len(self.conversation):
            so_far = len(self.conversation)
            if same < len(messages):
                how = f"its message {same + 1} differs from message {same + 1} of {so_far}"
                done = f"its messages {same + 1}-{len(messages)} are appended as sent"
            else:
                how = f"it sends only {len(messages)} of the {so_far} messages"
                done = "nothing is appended"
            self.warn(
                f"exchange {k}: the request does not extend the conversation so far ({how}); {done}"
            )
        self._system(system, system_at, k, created)
        for i in range(same, len(messages)):
            self.message(messages[i], f"{at}[{i}]", f"x{k}:m{i}", created)
        self.conversation = prints

    def _system(self, system: Any, at: str, k: int, created: str | None) -> None:
        """Emit the system prompt when it is new or differs from the one in force."""
        if system is None or system == self.system:
            return
        self.system = system
        if isinstance(system, str):
            payload = events.message("system", system, actor="system")
        elif isinstance(system, list):
            blocks = _blocks(self, system, at)
            payload = events.message("system", _text(blocks), actor="system", blocks=_keep(blocks))
        else:
            raise self.fail("expected a string or a list of text blocks", at)
        self.add(payload, f"x{k}:system", created)

    # -- messages ----------------------------------------------------------------------------

    def message(self, message: dict[str, Any], at: str, key: str, created: str | None) -> None:
        """A message of a request's history (or of a bare message list)."""
        role, content = message["role"], message["content"]
        if role == "user":
            self._user(content, at, key, created)
        else:
            self._assistant(content, f"{at}.content", key, created, {})

    def _user(self, content: Any, at: str, key: str, created: str | None) -> None:
        if isinstance(content, str):
            self._title(content)
            self.add(events.message("user", content, actor="user"), key, created)
            return
        blocks = _blocks(self, content, f"{at}.content")
        others = []
        results = 0
        for j, block in enumerate(blocks):
            if _is_result(block["type"]):
                results += 1
                payload = _result(self, block, f"{at}.content[{j}]")
                self.add(payload, f"{key}:b{j}", created)
            else:
                others.append(block)
        if others or not results:
            text = _text(others)
            self._title(text)
            actor = None if results else "user"
            payload = events.message("user", text, actor=actor, blocks=_keep(others))
            self.add(payload, key, created)

    def _assistant(
        self,
        content: Any,
        at: str,
        key: str,
        created: str | None,
        extra: dict[str, Any],
        *,
        message_id: str | None = None,
        arguments: dict[int, str] | None = None,
    ) -> None:
        blocks = (
            [{"type": "text", "text": content}]
            if isinstance(content, str)
            else _blocks(self, content, at)
        )
        others = [b for b in blocks if not _is_tool(b["type"])]
        payload = events.message("assistant", _text(others), blocks=_keep(others), **extra)
        self.add(payload, key, created)
        for j, block in enumerate(blocks):
            kind = block["type"]
            where = f"{at}[{j}]"
            if kind in CALL_TYPES:
                raw = (arguments or {}).get(j)
                call = _call(self, block, where, message_id, raw)
                self.add(call, f"{key}:b{j}", created)
            elif _is_result(kind):
                self.add(_result(self, block, where), f"{key}:b{j}", created)

    def response(
        self,
        body: dict[str, Any],
        at: str,
        k: int,
        created: str | None = None,
        request_id: str | None = None,
        *,
        arguments: dict[int, str] | None = None,
        key: str | None = None,
    ) -> None:
        """A successful response: one assistant message with meta, then its tool events."""
        if body.get("type") == "error":
            self.error(None, body, f"{key or f'x{k}'}:error", created, request_id)
            return
        content = body.get("content")
        if not isinstance(content, list):
            raise self.fail("expected a list of content blocks", f"{at}.content")
        message_id = _optional(self, body, "id", str, at)
        model = _optional(self, body, "model", str, at)
        meta = events.meta(
            model=model,
            provider=_PROVIDER,
            usage=_usage(self, body.get("usage"), f"{at}.usage"),
            location="remote",
        )
        extra = {
            "meta": meta,
            "messageId": message_id,
            "stopReason": body.get("stop_reason"),
            "stopSequence": body.get("stop_sequence"),
            "container": body.get("container"),
            "requestId": request_id,
        }
        self._assistant(
            content,
            f"{at}.content",
            key or f"x{k}:response",
            created,
            extra,
            message_id=message_id,
            arguments=arguments,
        )
        self.conversation = [*self.conversation, _fingerprint(body)]

    def error(
        self,
        status: int | None,
        body: Any,
        key: str,
        created: str | None,
        request_id: str | None = None,
    ) -> None:
        """An error response: ``{"type": "error", "error": {"type", "message"}}`` or any body."""
        error_type = None
        if _is_error_body(body):
            detail = body["error"]
            message = detail.get("message")
            message = message if isinstance(message, str) else content_text(detail)
            error_type = detail.get("type")
            request_id = body.get("request_id") or request_id
        elif isinstance(body, str) and body:
            message = body
        elif body is not None:
            message = content_text(body)
        else:
            message = f"HTTP {status}"
        payload = events.error(message, code=status, errorType=error_type, requestId=request_id)
        self.add(payload, key, created)

    def _title(self, text: str) -> None:
        if self.title is None:
            self.title = title_from(text)


# --- helpers: validation and mapping --------------------------------------------------------


def _mapping(builder: _Builder, value: Any, at: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise builder.fail("expected a JSON object", at)
    return value


def _body(builder: _Builder, value: Any, at: str) -> Any:
    """A recorded body: a JSON value, or JSON / SSE text as recorded."""
    if isinstance(value, str):
        stripped = value.lstrip()
        if stripped.startswith(("{", "[")):
            try:
                return loads(value)
            except json.JSONDecodeError as e:
                raise builder.fail(f"invalid JSON: {e.msg} (column {e.colno})", at) from None
            except JSONValueError as e:
                raise builder.fail(str(e), e.within(at)) from None
    return value


def _is_error_body(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and body.get("type") == "error"
        and isinstance(body.get("error"), dict)
    )


def _optional(builder: _Builder, obj: dict[str, Any], name: str, kind: type, at: str) -> Any:
    value = obj.get(name)
    if value is not None and not isinstance(value, kind):
        raise builder.fail(f"expected {kind.__name__}", f"{at}.{name}")
    return value


def _messages(builder: _Builder, value: Any, at: str) -> list[dict[str, Any]]:
    """Validate ``[{role: user|assistant, content: str | [block, ...]}, ...]``."""
    if not isinstance(value, list):
        raise builder.fail("expected a list of messages", at)
    for i, message in enumerate(value):
        where = f"{at}[{i}]"
        if not isinstance(message, dict):
            raise builder.fail("expected a JSON object", where)
        if message.get("role") not in ("user", "assistant"):
            raise builder.fail(
                f"expected 'user' or 'assistant', not {message.get('role')!r}", f"{where}.role"
            )
        content = message.get("content")
        if isinstance(content, list):
            _blocks(builder, content, f"{where}.content")
        elif not isinstance(content, str):
            raise builder.fail("expected a string or a list of content blocks", f"{where}.content")
    return value


def _blocks(builder: _Builder, value: Any, at: str) -> list[dict[str, Any]]:
    """Validate a list of content blocks, each an object with a string ``type``."""
    if not isinstance(value, list):
        raise builder.fail("expected a list of content blocks", at)
    for j, block in enumerate(value):
        if not isinstance(block, dict):
            raise builder.fail("expected a content block object", f"{at}[{j}]")
        if not isinstance(block.get("type"), str):
            problem = "missing" if "type" not in block else "expected a string"
            raise builder.fail(f"content block type {problem}", f"{at}[{j}].type")
    return value


def _is_result(kind: str) -> bool:
    return kind == "tool_result" or kind.endswith("_tool_result")


def _is_tool(kind: str) -> bool:
    return kind in CALL_TYPES or _is_result(kind)


def _text(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(
        b["text"] for b in blocks if b["type"] == "text" and isinstance(b.get("text"), str)
    )


def _keep(blocks: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The blocks verbatim, unless they are at most one plain ``{type: text, text}`` block."""
    plain = all(b["type"] == "text" and b.keys() == {"type", "text"} for b in blocks)
    return None if plain and len(blocks) <= 1 else blocks


def _call(
    builder: _Builder, block: dict[str, Any], at: str, message_id: str | None, raw: str | None
) -> dict[str, Any]:
    """A ``tool_call`` from a ``tool_use`` / ``server_tool_use`` / ``mcp_tool_use`` block."""
    kind = block["type"]
    call_id = _optional(builder, block, "id", str, at) or ""
    name = _optional(builder, block, "name", str, at) or ""
    return events.tool_call(
        call_id,
        name,
        block.get("input"),
        arguments=raw,
        messageId=message_id,
        caller=block.get("caller"),
        server=True if CALL_TYPES[kind] else None,
        blockType=kind if kind == "mcp_tool_use" else None,
        serverName=block.get("server_name"),
        cache_control=block.get("cache_control"),
    )


def _result(builder: _Builder, block: dict[str, Any], at: str) -> dict[str, Any]:
    """A ``tool_result`` from a ``tool_result`` or server ``*_tool_result`` block."""
    kind = block["type"]
    tool_use_id = _optional(builder, block, "tool_use_id", str, at)
    is_error = _optional(builder, block, "is_error", bool, at)
    output = block.get("content")
    server = kind != "tool_result"
    if server and is_error is None and isinstance(output, dict):
        # Server tools report failure as content {"type": "<tool>_tool_result_error",
        # "error_code": ...} (Anthropic docs, code execution / web search tool).
        result_type = output.get("type")
        if isinstance(result_type, str) and result_type.endswith("_error"):
            is_error = True
    return events.tool_result(
        tool_use_id,
        output=output,
        is_error=is_error,
        server=True if server else None,
        resultType=kind if server else None,
        cache_control=block.get("cache_control"),
    )


def _usage(builder: _Builder, value: Any, at: str) -> dict[str, int | None] | None:
    """Token counts; a count the response does not report is ``None``, a reported 0 stays 0."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise builder.fail("expected a JSON object", at)
    counts: dict[str, int | None] = {}
    for name in (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ):
        count = value.get(name)
        if count is not None and (not isinstance(count, int) or isinstance(count, bool)):
            raise builder.fail("expected an integer token count", f"{at}.{name}")
        counts[name] = count
    return events.usage(
        input=counts["input_tokens"],
        output=counts["output_tokens"],
        cache_read=counts["cache_read_input_tokens"],
        cache_write=counts["cache_creation_input_tokens"],
    )


def _fingerprint(message: dict[str, Any]) -> tuple[Any, ...]:
    """What decides whether two messages are the same: role, texts, tool ids, result content.

    Empty text blocks and ``cache_control`` are ignored: clients drop the one and add the
    other when they send a response back as history.
    """
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    parts: list[tuple[Any, ...]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            if block.get("text"):
                parts.append(("text", block.get("text")))
        elif kind in CALL_TYPES:
            parts.append((kind, block.get("id"), block.get("name")))
        elif isinstance(kind, str) and _is_result(kind):
            body = json.dumps(block.get("content"), sort_keys=True)
            parts.append((kind, block.get("tool_use_id"), body, bool(block.get("is_error"))))
        elif kind == "thinking":
            parts.append((kind, block.get("thinking")))
        else:
            rest = {k: v for k, v in block.items() if k != "cache_control"}
            parts.append((kind, json.dumps(rest, sort_keys=True)))
    return (message.get("role"), tuple(parts))
