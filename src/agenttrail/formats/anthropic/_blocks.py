"""Checking and mapping Messages API content: bodies, messages and blocks into payloads.

The pieces the importer (:mod:`agenttrail.formats.anthropic`) builds events from: shape checks
that name the field (a :class:`~agenttrail.errors.FormatError` from the ``Reporter``), the
``tool_call`` / ``tool_result`` payloads a block becomes, token usage, and the fingerprint that
decides whether a message of a request is already in the conversation. The block vocabulary is
:mod:`agenttrail.providers.anthropic`.
"""

from __future__ import annotations

import json
from typing import Any

from agenttrail.formats._common import JSONValueError, json_problem, loads
from agenttrail.formats.anthropic._stream import Reporter
from agenttrail.model import events
from agenttrail.providers import anthropic

__all__ = [
    "block_text",
    "call_payload",
    "check_blocks",
    "check_messages",
    "fingerprint",
    "is_error_body",
    "is_tool_block",
    "kept_blocks",
    "mapping",
    "optional",
    "recorded_body",
    "result_payload",
    "usage_counts",
]


def mapping(builder: Reporter, value: Any, at: str) -> dict[str, Any]:
    """A value that must be a JSON object."""
    if not isinstance(value, dict):
        raise builder.fail("expected a JSON object", at)
    return value


def recorded_body(builder: Reporter, value: Any, at: str) -> Any:
    """A recorded body: a JSON value, or JSON / SSE text as recorded."""
    if isinstance(value, str):
        stripped = value.lstrip()
        if stripped.startswith(("{", "[")):
            try:
                return loads(value)
            except json.JSONDecodeError as e:
                raise builder.fail(f"invalid JSON: {json_problem(e)}", at) from None
            except JSONValueError as e:
                raise builder.fail(str(e), e.within(at)) from None
    return value


def is_error_body(body: Any) -> bool:
    """True for the Messages API error shape ``{"type": "error", "error": {...}}``."""
    return (
        isinstance(body, dict)
        and body.get("type") == "error"
        and isinstance(body.get("error"), dict)
    )


def optional(builder: Reporter, obj: dict[str, Any], name: str, kind: type, at: str) -> Any:
    """An optional field that must be of type ``kind`` when present."""
    value = obj.get(name)
    if value is not None and not isinstance(value, kind):
        raise builder.fail(f"expected {kind.__name__}", f"{at}.{name}")
    return value


def check_messages(builder: Reporter, value: Any, at: str) -> list[dict[str, Any]]:
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
            check_blocks(builder, content, f"{where}.content")
        elif not isinstance(content, str):
            raise builder.fail("expected a string or a list of content blocks", f"{where}.content")
    return value


def check_blocks(builder: Reporter, value: Any, at: str) -> list[dict[str, Any]]:
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


def is_tool_block(kind: str) -> bool:
    """True for a tool call or a tool result block (client or server)."""
    return kind in anthropic.TOOL_CALL_BLOCKS or anthropic.is_tool_result(kind)


def block_text(blocks: list[dict[str, Any]]) -> str:
    """The texts of the ``text`` blocks, joined with newlines."""
    return "\n".join(
        b["text"]
        for b in blocks
        if b["type"] == anthropic.TEXT_BLOCK and isinstance(b.get("text"), str)
    )


def kept_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The blocks verbatim, unless they are at most one plain ``{type: text, text}`` block."""
    plain = all(b["type"] == "text" and b.keys() == {"type", "text"} for b in blocks)
    return None if plain and len(blocks) <= 1 else blocks


def call_payload(
    builder: Reporter, block: dict[str, Any], at: str, message_id: str | None, raw: str | None
) -> dict[str, Any]:
    """A ``tool_call`` from a ``tool_use`` / ``server_tool_use`` / ``mcp_tool_use`` block."""
    kind = block["type"]
    call_id = optional(builder, block, "id", str, at) or ""
    name = optional(builder, block, "name", str, at) or ""
    return events.tool_call(
        call_id,
        name,
        block.get("input"),
        arguments=raw,
        messageId=message_id,
        caller=block.get("caller"),
        server=True if kind in anthropic.SERVER_TOOL_CALL_BLOCKS else None,
        blockType=kind if kind == "mcp_tool_use" else None,
        serverName=block.get("server_name"),
        cache_control=block.get("cache_control"),
    )


def result_payload(builder: Reporter, block: dict[str, Any], at: str) -> dict[str, Any]:
    """A ``tool_result`` from a ``tool_result`` or server ``*_tool_result`` block."""
    kind = block["type"]
    tool_use_id = optional(builder, block, "tool_use_id", str, at)
    is_error = optional(builder, block, "is_error", bool, at)
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


def usage_counts(builder: Reporter, value: Any, at: str) -> dict[str, int | None] | None:
    """Token counts; a count the response does not report is ``None``, a reported 0 stays 0.

    The Messages API's kinds are already disjoint (``input_tokens`` excludes the cache reads
    and writes, https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching), so each
    maps to its kind of :func:`agenttrail.model.events.usage` as it is.
    """
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


def fingerprint(message: dict[str, Any]) -> tuple[Any, ...]:
    """What decides whether two messages are the same: role, texts, tool ids, result content.

    What clients change when they send a response back as history is ignored:

    - empty text blocks, which they drop, and ``cache_control``, which they add;
    - thinking blocks (``thinking``, ``redacted_thinking``), which they may leave out of the
      assistant turns before the last, and which the API strips from those turns whether
      sent or not (extended thinking, "Preserving thinking blocks":
      https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking; context
      windows: https://docs.anthropic.com/en/docs/build-with-claude/context-windows);
    - a key that is null rather than absent, in a result's content and in any other block
      compared whole: the SDK's models hold every optional field, so a block sent back with
      ``model_dump()`` has nulls the response did not, and one sent with
      ``model_dump(exclude_none=True)`` lacks the nulls it had: the same block either way.
    """
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    parts: list[tuple[Any, ...]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            if block.get("text"):
                parts.append(("text", block.get("text")))
        elif isinstance(kind, str) and kind in anthropic.TOOL_CALL_BLOCKS:
            parts.append((kind, block.get("id"), block.get("name")))
        elif isinstance(kind, str) and anthropic.is_tool_result(kind):
            body = json.dumps(_without_nulls(block.get("content")), sort_keys=True)
            parts.append((kind, block.get("tool_use_id"), body, bool(block.get("is_error"))))
        elif isinstance(kind, str) and kind in anthropic.THINKING_BLOCKS:
            continue
        else:
            rest = {k: v for k, v in block.items() if k != "cache_control"}
            parts.append((kind, json.dumps(_without_nulls(rest), sort_keys=True)))
    return (message.get("role"), tuple(parts))


def _without_nulls(value: Any) -> Any:
    """``value`` without the object keys whose value is null, at every depth (list items that
    are null stay: they hold a place)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
