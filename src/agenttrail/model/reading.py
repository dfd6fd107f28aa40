"""Read views of payloads: the one home of what the text of a content value is, whether a tool
result failed, and what its output says.

Every view (terminal, web rows, Fountain, search), replay and the evidence read payloads
through these functions, so a rule is stated once (docs/architecture.md, One of each rule).

Content arrives as a plain string (OpenAI), a list of blocks of which some carry ``text``
(Anthropic, Claude Code, Responses parts), or any JSON value (tool outputs).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agenttrail.codec import json_line

__all__ = [
    "USAGE_KINDS",
    "ToolStatus",
    "content_text",
    "failed",
    "message_text",
    "other_blocks",
    "output_text",
    "text_of",
    "tool_status",
    "usage_of",
    "usage_totals",
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


USAGE_KINDS = ("input", "output", "cache_read", "cache_write")
"""The token kinds of ``meta.usage``, disjoint (:func:`agenttrail.model.events.usage`)."""


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_of(meta: Any) -> dict[str, int | None] | None:
    """The token usage of an event's ``meta``, each token in one kind; ``None`` when the meta
    reports none.

    Rule (docs/log-format.md, Usage): the kinds are disjoint. Events that OpenAI's importer
    wrote before ``meta.usage_raw`` existed counted the cache reads inside ``input`` too;
    they are recognised by provider ``openai`` and no ``usage_raw`` key, and read with the
    cache reads taken out of ``input`` (the stored bytes are never rewritten). A count that
    is not an integer reads as ``None``.

    Returns:
        ``{input, output, cache_read, cache_write}`` in tokens, ``None`` where unknown.
    """
    if not isinstance(meta, dict) or not isinstance(meta.get("usage"), dict):
        return None
    usage = meta["usage"]
    counts = {kind: _count(usage.get(kind)) for kind in USAGE_KINDS}
    prompt, cached = counts["input"], counts["cache_read"]
    old_openai = meta.get("provider") == "openai" and "usage_raw" not in meta
    if old_openai and prompt is not None and cached is not None and cached <= prompt:
        counts["input"] = prompt - cached
    return counts


def usage_totals(payloads: Iterable[Payload]) -> dict[str, int | None]:
    """Token totals of payloads (a session's events), per kind, no token counted twice.

    Each payload's ``meta`` is read with :func:`usage_of`; payloads without usage add
    nothing.

    Returns:
        ``{input, output, cache_read, cache_write}``: the sum of each kind over the payloads
        that report it, ``None`` for a kind none reports (never a made-up 0).
    """
    totals: dict[str, int | None] = dict.fromkeys(USAGE_KINDS)
    for payload in payloads:
        counts = usage_of(payload.get("meta")) if isinstance(payload, dict) else None
        for kind, count in (counts or {}).items():
            if count is not None:
                totals[kind] = (totals[kind] or 0) + count
    return totals
