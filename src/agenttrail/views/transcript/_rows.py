"""Row writers: one per kind of event, each giving the fields of its ``view``.

The views and the fields every row carries are listed in :mod:`agenttrail.views.transcript`.
A writer reads one event's payload (a tool row also its result, a run card also its call);
which row an event gets, and what it depends on elsewhere in the log, is the index's business
(:mod:`agenttrail.views.transcript._index`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agenttrail.model import (
    Attachment,
    Event,
    attachment_of,
    attachments,
    context_text,
    end_text,
    note_line,
    other_blocks,
    payload_attachments,
    prose_text,
    reasoning_of,
    text_of,
    tool_status,
    usage_of,
)
from agenttrail.providers.anthropic import CLAUDE_CODE_RUNTIME_RECORDS
from agenttrail.views.order import text_runs
from agenttrail.views.pairing import ANOMALY_TEXT, Anomaly
from agenttrail.views.safe import safe
from agenttrail.views.transcript._runs import Run
from agenttrail.views.units import size_text

__all__ = [
    "ARGS_CHARS",
    "NOTE_CHARS",
    "RESULT_CHARS",
    "TEXT_CHARS",
    "Row",
    "attachment_fields",
    "display_text",
    "event_fields",
    "is_runtime",
    "kind_row",
    "meta_fields",
    "run_card",
    "tool_row",
]

TEXT_CHARS = 4000
"""Characters of a message sent in a row before the reader asks for the rest: a long reply
stays readable and a 2 MiB paste does not stall the page."""

ARGS_CHARS = 2000
"""Characters of a tool call's arguments (pretty JSON) sent in a row."""

RESULT_CHARS = 2000
"""Characters of a tool result sent in a row; larger results are loaded on demand."""

NOTE_CHARS = 240
"""Characters of a runtime note or an unknown event's JSON: asides stay one or two lines."""

Row = dict[str, Any]
"""One row: a JSON-ready mapping."""

RowWriter = Callable[[dict[str, Any], bool], Row]
"""``(payload, full) -> fields`` of one kind of event's row."""

_WRITERS: dict[str, RowWriter] = {}


def _writes(kind: str) -> Callable[[RowWriter], RowWriter]:
    """Register the writer of the rows of payload type ``kind``."""

    def register(writer: RowWriter) -> RowWriter:
        _WRITERS[kind] = writer
        return writer

    return register


def event_fields(
    event: Event, *, anomaly: Anomaly | None, agent_id: str | None, place: int, full: bool
) -> Row:
    """The fields every row has, whatever its view: seq, its place in reading order, time,
    actor, type, hash, meta, the pairing anomaly and the subagent the event belongs to."""
    return {
        "seq": event.seq,
        "place": place,
        "created_at": event.created_at,
        "actor": event.actor,
        "type": safe(event.type) if event.type is not None else None,
        "hash": event.hash.hex(),
        "meta": meta_fields(event.payload.get("meta")),
        "anomaly": None
        if anomaly is None
        else {
            "kind": anomaly.kind,
            "text": ANOMALY_TEXT[anomaly.kind],
            "call_id": safe(anomaly.call_id) if anomaly.call_id else None,
        },
        "agent_id": safe(agent_id) if agent_id is not None else None,
        "full": full,
    }


def kind_row(event: Event, full: bool) -> Row:
    """The fields of the row of an event shown on its own, by its payload type; as JSON (the
    ``event`` view) for a type no writer knows."""
    return _WRITERS.get(event.type or "", _generic)(event.payload, full)


def _clip(text: str, limit: int, full: bool) -> tuple[str, int]:
    text = safe(text)
    return (text if full or len(text) <= limit else text[:limit]), len(text)


def display_text(value: Any) -> str:
    """Readable text of a payload value: its prose when it is all text (a string, or blocks
    that all carry text: :func:`agenttrail.model.text_of`), else indented JSON, so that a
    block without text is shown rather than left out."""
    if value is None:
        return ""
    if attachments(value):  # named on the row (``attachments``), never shown as base64
        return prose_text(value)
    text = text_of(value)
    if text is not None and not other_blocks(value):
        return text
    return json.dumps(value, ensure_ascii=False, indent=2, default=repr)


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _optional_text(value: Any) -> str | None:
    return safe(value) if isinstance(value, str) and value else None


def meta_fields(value: Any) -> dict[str, Any] | None:
    """The ⓘ fields of an event's meta; ``None`` when it says nothing."""
    if not isinstance(value, dict):
        return None
    counts = usage_of(value)  # one meaning for every provider, older OpenAI events included
    duration = value.get("duration_ms", value.get("durationMs"))
    out = {
        "model": _optional_text(value.get("model")),
        "provider": _optional_text(value.get("provider")),
        "location": _optional_text(value.get("location")),
        "usage": counts if counts and any(v is not None for v in counts.values()) else None,
        "duration_ms": _number(duration),
    }
    return out if any(v is not None for v in out.values()) else None


@_writes("message")
def _message(payload: dict[str, Any], full: bool) -> Row:
    text, chars = _clip(prose_text(payload.get("content")).strip(), TEXT_CHARS, full)
    blocks = payload.get("blocks")
    blocks = [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []
    kinds = sorted(
        {str(b.get("type")) for b in blocks if attachment_of(b) is None and reasoning_of(b) is None}
        - {"text", "thinking"}
    )
    thinking, thinking_chars = _clip(_reasoning(blocks), TEXT_CHARS, full)
    return {
        "view": "message",
        "role": _optional_text(payload.get("role")),
        "character": _optional_text(payload.get("character")),
        "text": text,
        "text_chars": chars,
        "thinking": thinking,
        "thinking_chars": thinking_chars,
        "blocks": [safe(k) for k in kinds],
        "runs": _runs(payload, full),
        "attachments": attachment_fields(payload_attachments(payload), full),
    }


_THUMBNAIL_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image types a row gives a ``data:`` URL for: the four the providers take as image input
(https://platform.claude.com/docs/en/build-with-claude/vision), so a media type from the log
never becomes anything else in an ``img`` element."""


def attachment_fields(found: list[Attachment], full: bool) -> list[Row]:
    """The attachments of a row, named: kind, media type, size in bytes, SHA-256, file name,
    where a reference points, a one-line ``label``; and, in a ``full`` row, an image's
    ``data_url`` for an ``img`` element (the viewer's CSP allows ``img-src data:``,
    server/viewer.py), so a page of rows never carries the bytes unless asked."""
    return [
        {
            "kind": a.kind,
            "media_type": _optional_text(a.media_type),
            "size": a.size,
            "sha256": a.sha256,
            "name": _optional_text(a.name),
            "reference": _optional_text(a.reference),
            "label": safe(a.label(size_text)),
            "data_url": a.data_url() if full and a.media_type in _THUMBNAIL_TYPES else None,
        }
        for a in found
    ]


def _reasoning(blocks: list[dict[str, Any]]) -> str:
    """The reasoning of ``blocks`` (:func:`agenttrail.model.reasoning_of`), a blank line
    between two blocks'."""
    return "\n\n".join(text for b in blocks if (text := reasoning_of(b)) is not None)


def _runs(payload: dict[str, Any], full: bool) -> list[Row] | None:
    """An ordered assistant message's runs (:func:`agenttrail.views.order.text_runs`): each
    run's text and thinking, and the ids of the calls that follow it (their rows come after
    the message's, in seq order); ``None`` for a message whose blocks all come first."""
    runs = text_runs(payload)
    if runs is None:
        return None
    out = []
    for run in runs:
        text, chars = _clip(text_of(run.blocks) or "", TEXT_CHARS, full)
        thinking = _reasoning(run.blocks)
        out.append(
            {
                "text": text,
                "text_chars": chars,
                "thinking": _clip(thinking, TEXT_CHARS, full)[0],
                "calls": [safe(c) for c in run.calls],
            }
        )
    return out


def _arguments(call: dict[str, Any], full: bool) -> tuple[str, int]:
    value = call.get("input", call.get("arguments"))
    return _clip(display_text(value), ARGS_CHARS, full)


def _result_fields(result: dict[str, Any], full: bool) -> Row:
    status = tool_status(result)
    body = display_text(result.get("output"))
    error = result.get("error")
    if error and not body:
        body = error if isinstance(error, str) else display_text(error)
    text, chars = _clip(body, RESULT_CHARS, full)
    return {
        "status": "ok" if status.ok else "error",
        "status_detail": safe(status.detail),
        "result_text": text,
        "result_chars": chars,
        "result_attachments": attachment_fields(payload_attachments(result), full),
    }


def tool_row(
    call: Event, result: Event | None, anomaly: Anomaly | None, full: bool, *, erased: str | None
) -> Row:
    """The ``tool`` view of a call and, when it has arrived, its paired result; a result that
    was erased has status ``erased`` and ``erased`` (``erased seq N by WHO: WHY``,
    :func:`agenttrail.views.pairing.erased_notes`) as its text."""
    payload = call.payload
    arguments, arguments_chars = _arguments(payload, full)
    row: Row = {
        "view": "tool",
        "call_id": _optional_text(payload.get("id")),
        "name": safe(str(payload.get("name") or "?")),
        "character": _optional_text(payload.get("character")),
        "arguments": arguments,
        "arguments_chars": arguments_chars,
        "result_seq": None,
        "status": "pending" if anomaly is None or anomaly.kind == "no_result" else "unpaired",
        "status_detail": "",
        "result_text": "",
        "result_chars": 0,
        "result_attachments": [],
        "result": None,
        "duration_ms": _duration(payload, None),
    }
    if result is not None:
        row.update(_result_fields(result.payload, full))
        if result.erased:
            note = safe(erased or f"erased seq {result.seq}")
            row.update(
                status="erased", status_detail=note, result_text=note, result_chars=len(note)
            )
        row["result_seq"] = result.seq
        row["duration_ms"] = _duration(payload, result.payload)
        row["result"] = {
            "seq": result.seq,
            "created_at": result.created_at,
            "actor": result.actor,
            "hash": result.hash.hex(),
            "meta": meta_fields(result.payload.get("meta")),
        }
    return row


def _duration(call: dict[str, Any], result: dict[str, Any] | None) -> int | float | None:
    for payload in (result, call):
        meta = payload.get("meta") if payload is not None else None
        if isinstance(meta, dict):
            duration = _number(meta.get("duration_ms", meta.get("durationMs")))
            if duration is not None:
                return duration
    return None


@_writes("tool_result")
def _orphan_result(payload: dict[str, Any], full: bool) -> Row:
    return {
        "view": "result",
        "call_id": _optional_text(payload.get("toolCallId")),
        "name": _optional_text(payload.get("name")),
        **_result_fields(payload, full),
    }


def run_card(run: Run, result: Event, call: Event | None, full: bool) -> Row:
    """The ``run`` view: a finished run's card, at the result that finished it."""
    facts = result.payload.get("toolUseResult")
    facts = facts if isinstance(facts, dict) else {}
    call_input = call.payload.get("input") if call is not None else None
    call_input = call_input if isinstance(call_input, dict) else {}
    prompt, prompt_chars = _clip(
        display_text(call_input.get("prompt") or facts.get("prompt") or ""), TEXT_CHARS, full
    )
    fields = _result_fields(result.payload, full)
    duration = _number(facts.get("totalDurationMs"))
    if duration is None:
        duration = _duration(call.payload if call is not None else {}, result.payload)
    return {
        "view": "run",
        "agent_id": safe(run.agent_id),
        "call_seq": run.call_seq,
        "name": safe(str(call.payload.get("name") or "?")) if call is not None else None,
        "description": _optional_text(call_input.get("description")),
        "subagent_type": _optional_text(call_input.get("subagent_type")),
        "prompt": prompt,
        "prompt_chars": prompt_chars,
        "run_status": _optional_text(facts.get("status")),
        "duration_ms": duration,
        "tokens": _number(facts.get("totalTokens")),
        "tool_uses": _number(facts.get("totalToolUseCount")),
        "members": len(run.members),
        "started_at": call.created_at if call is not None else None,
        "call_meta": meta_fields(call.payload.get("meta")) if call is not None else None,
        **fields,
    }


@_writes("error")
def _error(payload: dict[str, Any], full: bool) -> Row:
    text, chars = _clip(str(payload.get("message", "")), TEXT_CHARS, full)
    return {"view": "error", "text": text, "text_chars": chars}


@_writes("rag")
def _rag(payload: dict[str, Any], full: bool) -> Row:
    title, _ = _said(payload)
    return {"view": "context", "kind": "rag", "title": safe(title), "text": "", "text_chars": 0}


@_writes("recall")
def _recall(payload: dict[str, Any], full: bool) -> Row:
    title, lines = _said(payload)
    text, chars = _clip(lines, TEXT_CHARS, full)
    return {"view": "context", "kind": "recall", "title": title, "text": text, "text_chars": chars}


@_writes("shell")
def _shell(payload: dict[str, Any], full: bool) -> Row:
    title, output = _said(payload)
    text, chars = _clip(output, RESULT_CHARS, full)
    return {
        "view": "context",
        "kind": "shell",
        "title": safe(title),
        "status": "ok" if payload.get("exit_code") in (0, None) else "error",
        "text": text,
        "text_chars": chars,
    }


@_writes("erasure")
def _erasure(payload: dict[str, Any], full: bool) -> Row:
    text = safe(_said(payload)[0])
    return {"view": "note", "kind": "erasure", "text": text, "text_chars": len(text)}


def _said(payload: dict[str, Any]) -> tuple[str, str]:
    """:func:`agenttrail.model.context_text` of a payload of a type it reads."""
    said = context_text(payload)
    assert said is not None  # the writers above are for those types only
    return said


def is_runtime(payload: dict[str, Any]) -> bool:
    """Whether an event is a runtime row a reader may hide: an ``annotation`` of one of
    :data:`agenttrail.providers.anthropic.CLAUDE_CODE_RUNTIME_RECORDS` (progress, file
    snapshots, queue operations)."""
    return (
        payload.get("type") == "annotation" and payload.get("kind") in CLAUDE_CODE_RUNTIME_RECORDS
    )


@_writes("annotation")
def _annotation(payload: dict[str, Any], full: bool) -> Row:
    body = payload.get("text")
    if isinstance(body, str):
        text, chars = _clip(body, NOTE_CHARS, full)
    else:  # the line sums the data up; the whole data is what a reader loads on demand
        data = json.dumps(payload.get("data"), ensure_ascii=False, default=repr, indent=2)
        text = safe(data) if full else _clip(note_line(payload.get("data")), NOTE_CHARS, False)[0]
        chars = len(safe(data))
    return {
        "view": "note",
        "kind": safe(str(payload.get("kind") or "note")),
        "text": text,
        "text_chars": chars,
        "runtime": is_runtime(payload),
    }


@_writes("session_end")
def _session_end(payload: dict[str, Any], full: bool) -> Row:
    text = safe(end_text(payload))
    return {"view": "note", "kind": "end", "text": text, "text_chars": len(text)}


def _generic(payload: dict[str, Any], full: bool) -> Row:
    body = {k: v for k, v in payload.items() if k != "type"}
    text, chars = _clip(json.dumps(body, ensure_ascii=False, default=repr), NOTE_CHARS * 4, full)
    kind = payload.get("type")
    label = safe(kind) if isinstance(kind, str) else "(untyped)"
    return {"view": "event", "label": label, "text": text, "text_chars": chars}
