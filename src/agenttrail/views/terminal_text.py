"""The terminal transcript's text: what each row's event column and text column say, one
writer per type of event (:mod:`agenttrail.views.terminal` lays the rows out).

Text from the log passes :func:`agenttrail.views.safe.safe`; long arguments, tool results,
shell output and annotations are clipped unless ``full`` is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agenttrail.codec import json_line
from agenttrail.model import (
    Attachment,
    Event,
    attachment_of,
    call_name,
    context_text,
    end_text,
    note_line,
    payload_attachments,
    prose_text,
    text_of,
    tool_status,
    usage_of,
)
from agenttrail.views.order import TextRun
from agenttrail.views.pairing import Pairing, erased_lines
from agenttrail.views.safe import safe
from agenttrail.views.table import StyledText
from agenttrail.views.units import duration_text, size_text

__all__ = [
    "ANNOTATION_CHARS",
    "ARGS_CHARS",
    "RESULT_CHARS",
    "RESULT_LINES",
    "row_label",
    "row_text",
    "run_text",
]

ARGS_CHARS = 160
"""Widest tool-call argument text shown in a row before it is cut (characters)."""

ANNOTATION_CHARS = 100
"""Characters of a runtime annotation's data shown: annotations are quiet asides."""

RESULT_LINES = 6
"""Lines of a tool result shown under its call unless ``full`` is asked for."""

RESULT_CHARS = 480
"""Characters of a tool result shown under its call unless ``full`` is asked for: one line
of minified JSON can otherwise fill the screen."""


_LABELS = {
    "tool_call": ("tool", "yellow"),
    "tool_result": ("tool result", "yellow"),
    "error": ("error", "bold red"),
    "session_end": ("end", "grey50"),
    "erasure": ("erasure", "grey50"),
    "erased": ("erased", "grey50"),
}
"""The event column of the types labelled by their kind alone."""


def row_label(event: Event) -> tuple[str, str]:
    """The event column of ``event``'s row, and its style: a message's role and character,
    a rag, recall or shell event's type, an annotation's kind, an unknown type's name."""
    kind = event.type or ""
    fixed = _LABELS.get(kind)
    if fixed is not None:
        return fixed
    payload = event.payload
    if kind == "message":
        role = str(payload.get("role", "?"))
        name = payload.get("character")
        label = safe(f"{role} {name}" if isinstance(name, str) and name else role)
        return label, "grey50" if event.actor == "system" else ""
    if kind in ("rag", "recall", "shell"):
        return safe(kind), "blue"
    if kind == "annotation":
        return safe(str(payload.get("kind", "note"))), "grey50"
    return safe(event.type or "(untyped)"), "italic"


def _message(event: Event, pairing: Pairing, full: bool) -> StyledText:
    return _message_text(event.payload)


def run_text(event: Event, run: TextRun, first: bool) -> StyledText:
    """One run of an ordered message: its blocks' text, the meta on the first run only."""
    view = {**event.payload, "content": text_of(run.blocks) or "", "blocks": run.blocks}
    if not first:
        view.pop("meta", None)
    return _message_text(view)


def _message_text(payload: dict[str, Any]) -> StyledText:
    text = StyledText(safe(prose_text(payload.get("content")).strip()))
    blocks = payload.get("blocks")
    if isinstance(blocks, list):
        kinds = {str(b.get("type")) for b in blocks if isinstance(b, dict) and not attachment_of(b)}
        if kinds - {"text"}:
            text.append(safe(f"\n[{', '.join(sorted(kinds - {'text'}))} blocks kept]"), style="dim")
    text.append(_attachment_lines(payload_attachments(payload)), style="cyan")
    text.append(_meta_line(payload.get("meta")), style="dim")
    return text


def _tool_call(event: Event, pairing: Pairing, full: bool) -> StyledText:
    payload = event.payload
    args = payload.get("input")
    args_text = args if isinstance(args, str) else json_line(args, spaced=True)
    if len(args_text) > ARGS_CHARS:
        args_text = args_text[:ARGS_CHARS] + "…"
    text = StyledText(safe(f"{call_name(payload)}({args_text})"))
    result = pairing.result_of.get(event.seq)
    if result is not None and result.erased:  # its type and call id kept by the erasure
        said = pairing.erased.get(result.seq, f"erased seq {result.seq}")
        text.append(safe(f" — {said}"), style="grey50")
    elif result is not None:
        status = tool_status(result.payload)
        text.append(safe(f" — {status}"), style="green" if status.ok else "bold red")
        output = _output_text(result.payload.get("output"))
        if not status.ok and output.strip().removeprefix("error:").strip() == status.detail:
            output = ""  # the status line already says all of it
        if output:
            text.append("\n" + safe(_clip(output, full)), style="dim")
        text.append(_attachment_lines(payload_attachments(result.payload)), style="cyan")
    return text


def _output_text(output: Any) -> str:
    """A tool's output as a row shows it: its text (:func:`prose_text`), or, when that text is
    the output's JSON, that JSON with a space after each ``,`` and ``:``, so that the row
    wraps between tokens (a string with spaces may wrap at them; a token longer than the
    column is folded)."""
    text = prose_text(output)
    if not isinstance(output, str) and text and text == json_line(output):
        return json_line(output, spaced=True)  # the output read as its JSON
    return text


def _attachment_lines(found: list[Attachment]) -> str:
    """One ``[attachment: image/png, 12.1 KiB, sha256 ab12cd34]`` line per attachment
    (:class:`agenttrail.model.Attachment`): named, never shown as base64."""
    if not found:  # most rows
        return ""
    return "".join(safe(f"\n[attachment: {a.label(size_text)}]") for a in found)


def _tool_result(event: Event, pairing: Pairing, full: bool) -> StyledText:
    payload = event.payload
    status = tool_status(payload)
    text = StyledText(
        safe(f"{payload.get('name') or ''} result for {payload.get('toolCallId')!r} — {status}")
    )
    text.append("\n" + safe(_clip(_output_text(payload.get("output")), full)), style="dim")
    text.append(_attachment_lines(payload_attachments(payload)), style="cyan")
    return text


def _error(event: Event, pairing: Pairing, full: bool) -> StyledText:
    return StyledText(safe(str(event.payload.get("message", ""))), style="red")


def _context(event: Event, pairing: Pairing, full: bool) -> StyledText:
    """A rag or shell event: its headline, a shell's output under it; a recall: its lines."""
    said = context_text(event.payload)
    assert said is not None  # written for the types context_text reads
    headline, body = said
    if event.type == "recall":
        return StyledText(safe(body))
    text = StyledText(safe(headline))
    if event.type == "shell":
        text.append("\n" + safe(_clip(body, full)), style="dim")
    return text


def _annotation(event: Event, pairing: Pairing, full: bool) -> StyledText:
    p = event.payload
    body = p.get("text")
    if not isinstance(body, str):  # summed up as the viewer sums it; --full shows it all
        data = p.get("data")
        body = (
            json_line(data, spaced=True)
            if full
            else _clip(note_line(data), False, chars=ANNOTATION_CHARS)
        )
    return StyledText(safe(body), style="grey50")


def _session_end(event: Event, pairing: Pairing, full: bool) -> StyledText:
    return StyledText(safe(end_text(event.payload)), style="grey50")


def _erasure(event: Event, pairing: Pairing, full: bool) -> StyledText:
    said = context_text(event.payload)
    assert said is not None
    return StyledText(safe(said[0]), style="grey50")


def _erased(event: Event, pairing: Pairing, full: bool) -> StyledText:
    """An erased event: who erased it and why; an erased tool call's row also shows its
    result (kept paired by the erasure record, :func:`agenttrail.views.pairing.tool_refs`)."""
    return StyledText(safe("\n".join(erased_lines(event, pairing))), style="grey50")


def _generic(event: Event, pairing: Pairing, full: bool) -> StyledText:
    body = {k: v for k, v in event.payload.items() if k != "type"}
    return StyledText(safe(_clip(json_line(body, spaced=True), full)))


def row_text(event: Event, pairing: Pairing, full: bool) -> StyledText:
    """The text column of ``event``'s row (a new :class:`StyledText` the caller may add to):
    what it says, a call's with its result (``pairing``), tool results and shell output
    clipped to :data:`RESULT_LINES` lines and :data:`RESULT_CHARS` characters unless
    ``full``."""
    return _WRITERS.get(event.type or "", _generic)(event, pairing, full)


_WRITERS: dict[str, Callable[[Event, Pairing, bool], StyledText]] = {
    "message": _message,
    "tool_call": _tool_call,
    "tool_result": _tool_result,
    "error": _error,
    "rag": _context,
    "recall": _context,
    "shell": _context,
    "annotation": _annotation,
    "session_end": _session_end,
    "erasure": _erasure,
    "erased": _erased,
}
"""The text column of each type's row (its label: :func:`row_label`); others: :func:`_generic`."""


def _meta_line(meta: Any) -> str:
    """``\nⓘ model · provider · tokens in 1,234, out 56 · 1.2 s``, what of it ``meta`` says;
    its text from the log made safe."""
    if not isinstance(meta, dict):
        return ""
    parts = [safe(str(meta[k])) for k in ("model", "provider", "location") if meta.get(k)]
    usage = usage_of(meta)  # one meaning for every provider, older OpenAI events included
    if usage is not None:
        counts = [
            f"{label} {usage[key]:,}"
            for key, label in (
                ("input", "in"),
                ("output", "out"),
                ("cache_read", "cache read"),
                ("cache_write", "cache write"),
            )
            if usage.get(key) is not None  # unknown counts are left out, never shown as 0
        ]
        if counts:
            parts.append("tokens " + ", ".join(counts))
    duration = meta.get("duration_ms")
    if isinstance(duration, int | float) and not isinstance(duration, bool):
        parts.append(duration_text(duration))
    return "\nⓘ " + " · ".join(parts) if parts else ""


def _clip(text: str, full: bool, *, chars: int | None = None) -> str:
    if chars is not None and len(text) > chars:
        return text[:chars] + "…"
    if full:
        return text
    lines = text.splitlines()
    if len(lines) <= RESULT_LINES and len(text) <= RESULT_CHARS:
        return text
    shown = "\n".join(lines[:RESULT_LINES])[:RESULT_CHARS]
    hidden = len(text) - len(shown)
    return f"{shown}… ({hidden:,} more characters; --full shows them)"
