"""Assembling an Anthropic Messages API stream into messages, as the SDK's accumulator does.

https://docs.anthropic.com/en/docs/build-with-claude/streaming
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from agenttrail.errors import FormatError
from agenttrail.formats._common import JSONValueError, json_problem, loads
from agenttrail.formats.http.sse import sse_events
from agenttrail.providers import anthropic

__all__ = ["Reporter", "StreamError", "Streamed", "assemble_sse"]


class Reporter(Protocol):
    """Where errors and warnings about a stream go (the importer's builder)."""

    @property
    def where(self) -> str: ...

    def fail(self, message: str, at: str) -> FormatError: ...

    def warn(self, text: str) -> None: ...


@dataclass
class Streamed:
    """A message assembled from a stream."""

    body: dict[str, Any]
    """The message as the non-streaming API would have returned it."""
    line: int
    """Line of its ``message_start`` event."""
    arguments: dict[int, str] = field(default_factory=dict)
    """Content position → the tool input JSON text as streamed (``input_json_delta``)."""
    slots: dict[int, tuple[int, int]] = field(default_factory=dict, repr=False)
    """Stream block ``index`` → (position in ``content`` of the block its deltas go to, line
    of its ``content_block_start``); a position differs from its index only after an index
    started twice."""


@dataclass
class StreamError:
    """An ``error`` event in a stream."""

    data: dict[str, Any]
    line: int
    interrupted: bool = False
    """It came while a message was streaming: that message, just before it in the stream's
    output, holds only what arrived (as a cut stream's does)."""


@dataclass(frozen=True)
class _Where:
    """Where a stream's lines are: the file itself, or a recorded response body (``at``)."""

    builder: Reporter
    at: str | None = None

    def fail(self, message: str, line: int, name: str | None = None) -> FormatError:
        if self.at is None:
            return FormatError(message, path=self.builder.where, line=line, field=name)
        where = f"{self.at} (SSE line {line})" + (f".{name}" if name else "")
        return self.builder.fail(message, where)

    def warn(self, line: int, text: str) -> None:
        prefix = f"line {line}" if self.at is None else f"{self.at.lstrip('.')}, SSE line {line}"
        self.builder.warn(f"{prefix}: {text}")


def assemble_sse(
    builder: Reporter, text: str, at: str | None = None
) -> list[Streamed | StreamError]:
    """Assemble Messages API stream events into messages, as the SDK's accumulator does.

    Text deltas are concatenated, ``input_json_delta`` fragments joined then parsed (the first
    may be empty), usage from ``message_start`` is updated by ``message_delta``
    (https://docs.anthropic.com/en/docs/build-with-claude/streaming). An ``error`` event ends
    the message streaming (the SDK raises it and reads no further): that message, from what
    arrived, comes before the :class:`StreamError`. ``at`` names the recorded body the text
    came from, ``None`` for the file itself.

    Raises:
        FormatError: an event's data is not JSON (unless it is the last, cut-off event) or
            not of the documented shape; names the line.
    """
    where = _Where(builder, at)
    out: list[Streamed | StreamError] = []
    current: Streamed | None = None
    buffers: dict[int, str] = {}
    stopped = False

    def finish(error_line: int | None = None) -> None:
        nonlocal current
        if current is None:
            return
        if error_line is not None:
            where.warn(
                current.line,
                f"the message started here is cut short by the error event at line "
                f"{error_line}; it is assembled from what arrived",
            )
        elif not stopped:
            where.warn(
                current.line,
                "the message started here has no message_stop (truncated?); it is "
                "assembled from what arrived",
            )
        content = current.body["content"]
        for index, raw in buffers.items():
            if not raw:
                continue  # no input_json_delta: the input of content_block_start stands
            current.arguments[index] = raw
            try:
                content[index]["input"] = loads(raw)
            except ValueError:  # not JSON, or a number JSON does not allow
                content[index]["input"] = raw
                where.warn(
                    current.line,
                    f"the message started here has tool input that is not JSON (block "
                    f"{index}); kept as text",
                )
        out.append(current)
        current = None

    for event in sse_events(text):
        line, name, raw, ended = event.line, event.name, event.data, event.complete
        try:
            data = loads(raw)
        except json.JSONDecodeError as e:
            if not ended:
                where.warn(line, "the last event is cut off (truncated?) and dropped")
                break
            raise where.fail(f"invalid JSON in SSE data: {json_problem(e)}", line) from None
        except JSONValueError as e:
            raise where.fail(f"SSE data: {e}", line, e.field or None) from None
        if not isinstance(data, dict):
            raise where.fail("SSE data is not a JSON object", line)
        kind = data.get("type", name)
        if kind == "message_start":
            finish()
            message = data.get("message")
            if not isinstance(message, dict):
                raise where.fail("expected an object", line, "message")
            body = dict(message)
            content = body.get("content")
            if content is not None and not isinstance(content, list):
                raise where.fail("expected a list of content blocks", line, "message.content")
            for index, block in enumerate(content or []):
                if not isinstance(block, dict):
                    raise where.fail(
                        "expected a content block object", line, f"message.content[{index}]"
                    )
            usage = body.get("usage")
            if usage is not None and not isinstance(usage, dict):
                raise where.fail("expected an object", line, "message.usage")
            body["content"] = list(content or [])
            body["usage"] = dict(usage or {})
            current, buffers, stopped = Streamed(body, line), {}, False
            current.slots = {i: (i, line) for i in range(len(body["content"]))}
        elif kind in ("ping", None):
            continue
        elif kind == "error":
            interrupted = current is not None
            finish(line)
            out.append(StreamError(data, line, interrupted))
        elif current is None:
            raise where.fail(f"{kind} before message_start", line)
        elif kind in ("content_block_start", "content_block_delta", "content_block_stop"):
            _block_event(where, current, buffers, kind, data, line)
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, dict):
                for name in ("content", "usage"):  # built from the other events, never replaced
                    if name in delta:
                        problem = (
                            f"unexpected in a message_delta (the {name} comes from other events)"
                        )
                        raise where.fail(problem, line, f"delta.{name}")
                current.body.update(delta)
            usage = data.get("usage")
            if isinstance(usage, dict):
                current.body["usage"].update((k, v) for k, v in usage.items() if v is not None)
        elif kind == "message_stop":
            stopped = True
            finish()
        else:
            where.warn(line, f"unknown stream event {kind!r} ignored")
    finish()
    return out


def _restarted(
    where: _Where, current: Streamed, index: int, block: dict[str, Any], line: int
) -> None:
    """Warn about a ``content_block_start`` at an index that already started: the stream
    contradicts itself, so both blocks are named and kept."""
    position, first = current.slots[index]
    earlier = current.body["content"][position]

    def named(b: dict[str, Any]) -> str:
        return (
            f"{b.get('type')} {b['id']!r}" if isinstance(b.get("id"), str) else str(b.get("type"))
        )

    where.warn(
        line,
        f"block {index} ({named(block)}) starts again while block {index} ({named(earlier)}, "
        f"started at line {first}) is in use; the stream contradicts itself, and both are "
        f"kept as separate blocks, later deltas of index {index} going to the new one",
    )


def _block_event(
    where: _Where,
    current: Streamed,
    buffers: dict[int, str],
    kind: str,
    data: dict[str, Any],
    line: int,
) -> None:
    """Apply one ``content_block_start`` / ``_delta`` / ``_stop`` event to ``current``."""
    content: list[Any] = current.body["content"]
    index = data.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise where.fail("expected a non-negative integer", line, "index")
    if kind == "content_block_start":
        block = data.get("content_block")
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise where.fail("expected a content block with a type", line, "content_block.type")
        started = len(current.slots)
        if index > started:  # blocks start in order (the SDK's accumulator appends them)
            raise where.fail(f"block {index} starts before block {started}", line, "index")
        if index < started:
            _restarted(where, current, index, block, line)
        # a block that starts again is a new block after the others, as the SDK's accumulator
        # appends every content_block_start; later deltas of the index go to it
        current.slots[index] = (len(content), line)
        content.append(dict(block))
        if block["type"] in anthropic.TOOL_CALL_BLOCKS:
            buffers[len(content) - 1] = ""
        return
    if index not in current.slots:
        raise where.fail(f"{kind} for block {index}, which never started", line)
    if kind == "content_block_stop":
        return
    position = current.slots[index][0]
    block = content[position]
    delta = data.get("delta")
    if not isinstance(delta, dict):
        raise where.fail("expected an object", line, "delta")
    dtype = delta.get("type")
    if dtype in ("text_delta", "thinking_delta", "input_json_delta"):
        name = {"text_delta": "text", "thinking_delta": "thinking"}.get(dtype, "partial_json")
        piece = delta.get(name, "")
        if not isinstance(piece, str):
            raise where.fail("expected a string", line, f"delta.{name}")
        if dtype == "input_json_delta":
            buffers[position] = buffers.get(position, "") + piece
            return
        so_far = block.get(name, "")
        if not isinstance(so_far, str):
            raise where.fail(f"a {dtype} for block {index}, whose {name} is not a string", line)
        block[name] = so_far + piece
    elif dtype == "signature_delta":
        block["signature"] = delta.get("signature")
    elif dtype == "citations_delta":
        citations = block.get("citations") or []
        if not isinstance(citations, list):
            raise where.fail(
                f"a citations_delta for block {index}, whose citations are not a list", line
            )
        block["citations"] = [*citations, delta.get("citation")]
    else:
        where.warn(line, f"unknown delta type {dtype!r} ignored")
