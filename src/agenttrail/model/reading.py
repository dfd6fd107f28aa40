"""Read views of payloads: the one home of what the text of a content value is, whether a tool
result failed, and what its output says.

Every view (terminal, web rows, Fountain, search), replay and the evidence read payloads
through these functions, so a rule is stated once (docs/architecture.md, One of each rule).

Content arrives as a plain string (OpenAI), a list of blocks of which some carry ``text``
(Anthropic, Claude Code, Responses parts), or any JSON value (tool outputs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agenttrail.codec import json_line

__all__ = [
    "ContentPart",
    "ToolStatus",
    "content_order",
    "content_text",
    "failed",
    "message_text",
    "other_blocks",
    "output_text",
    "text_of",
    "tool_status",
]

Payload = dict[str, Any]


def _blocks(value: Any) -> list[dict[str, Any]] | None:
    if isinstance(value, list) and all(isinstance(b, dict) for b in value):
        return value
    return None


def text_of(value: Any) -> str | None:
    """The prose of a content value, or ``None`` when it holds none.

    Returns:
        A string as it is; for a list of blocks (mappings), the ``text`` of every block that
        has one, joined with newlines; ``None`` for anything else (no text at all).
    """
    if isinstance(value, str):
        return value
    blocks = _blocks(value)
    if blocks is None:
        return None
    texts = [b["text"] for b in blocks if isinstance(b.get("text"), str)]
    return "\n".join(texts) if texts else None


def content_text(value: Any) -> str:
    """Readable text of a content value: its prose (:func:`text_of`), else compact JSON, and
    ``""`` for ``None``."""
    if value is None:
        return ""
    text = text_of(value)
    return text if text is not None else json_line(value)


def message_text(payload: Payload) -> str:
    """The prose of a message payload's ``content``; ``""`` when it has none. Never JSON of
    tool-use or other blocks (their numbers are a call, not something the message says)."""
    return text_of(payload.get("content")) or ""


def other_blocks(value: Any) -> list[str]:
    """The ``type`` of every block of a content value that carries no text (``image``,
    ``tool_use``, ...), in order; ``[]`` for a string or a value that is not a block list."""
    blocks = _blocks(value)
    if blocks is None:
        return []
    return [str(b.get("type")) for b in blocks if not isinstance(b.get("text"), str)]


@dataclass(frozen=True)
class ContentPart:
    """One entry of an assistant message's content in the provider's order."""

    kind: str
    """``block``, ``toolCall`` or ``toolResult``."""
    block: dict[str, Any] | None = None
    """For ``block``: the block (from the payload's ``blocks``)."""
    id: str | None = None
    """For ``toolCall`` / ``toolResult``: the id of the ``tool_call`` event (a result's
    ``toolCallId``) it stands for."""


def content_order(payload: Payload) -> list[ContentPart] | None:
    """An assistant message's blocks and tool events in the provider's order, from its
    ``order`` field (docs/log-format.md, Block order).

    Returns:
        The parts in order, every block of ``blocks`` exactly once; ``None`` when the payload
        has no ``order`` (its order is then all ``blocks``, then its tool events in seq order:
        every payload stored before the field, and every one whose blocks all come first), or
        when the field is malformed (an index out of range or twice, an entry of another
        shape), so that a damaged field is read as no field rather than losing a block.
    """
    order = payload.get("order")
    blocks = _blocks(payload.get("blocks"))
    if not isinstance(order, list) or blocks is None:
        return None
    parts: list[ContentPart] = []
    used: set[int] = set()
    for entry in order:
        if not isinstance(entry, dict) or len(entry) != 1:
            return None
        [(kind, value)] = entry.items()
        if kind == "block":
            if not isinstance(value, int) or isinstance(value, bool) or value in used:
                return None
            if not 0 <= value < len(blocks):
                return None
            used.add(value)
            parts.append(ContentPart("block", block=blocks[value]))
        elif kind in ("toolCall", "toolResult") and isinstance(value, str) and value:
            parts.append(ContentPart(kind, id=value))
        else:
            return None
    return parts if len(used) == len(blocks) else None


def output_text(result: Payload) -> str:
    """A ``tool_result`` payload's output as text (:func:`content_text`), or its error text
    when it has no output."""
    output = result.get("output")
    error = result.get("error")
    if output is None and error is not None:
        return error if isinstance(error, str) else json_line(error)
    return content_text(output)


@dataclass(frozen=True)
class ToolStatus:
    """Whether a tool call succeeded, from its result alone."""

    ok: bool
    """False when the result says the call failed."""
    detail: str
    """``""`` when ok; else the first line of the error (``exit 1``)."""

    def __str__(self) -> str:
        return "ok" if self.ok else f"error: {self.detail}" if self.detail else "error"


def _exit_code(result: Payload) -> int | None:
    code = result.get("exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def failed(result: Payload) -> bool | None:
    """What a result says about failing, as a provider's ``is_error`` flag would: the flag as
    recorded; else ``True`` for an ``error`` field or a non-zero exit code; else ``None``
    (nothing says it failed). Replay sends this as Anthropic's ``is_error``."""
    flag = result.get("is_error")
    if isinstance(flag, bool):
        return flag
    if result.get("error") or _exit_code(result) not in (None, 0):
        return True
    return None


def tool_status(result: Payload) -> ToolStatus:
    """The status of a ``tool_result`` payload, taken from the result itself.

    Rule (docs/specs.md, The Harvey audit trail: W1): an ``error`` field, a non-zero
    ``exit_code``, ``is_error`` true, or output text starting with ``error:`` mean failure;
    the detail is the first line of the error text (without the ``error:`` prefix).
    """
    err = result.get("error")
    if err:
        return ToolStatus(False, _first_line(err if isinstance(err, str) else str(err)))
    exit_code = _exit_code(result)
    if exit_code not in (None, 0):
        return ToolStatus(False, f"exit {exit_code}")
    text = content_text(result.get("output"))
    if result.get("is_error") is True or text.lstrip().lower().startswith("error:"):
        return ToolStatus(False, _first_line(_strip_error(text)))
    return ToolStatus(True, "")


def _strip_error(text: str) -> str:
    stripped = text.lstrip()
    return stripped[6:].lstrip() if stripped.lower().startswith("error:") else stripped


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()
