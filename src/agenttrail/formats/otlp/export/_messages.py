"""Log events as OpenTelemetry GenAI messages: the JSON of ``gen_ai.input.messages``,
``gen_ai.output.messages`` and ``gen_ai.system_instructions``.

Shapes (OpenTelemetry semantic conventions v1.41.0, ``docs/gen-ai/gen-ai-input-messages.json``,
``gen-ai-output-messages.json``, ``gen-ai-system-instructions.json``)::

    message   {"role": "system"|"user"|"assistant"|"tool", "parts": [part, ...]}
    output    the same with "finish_reason": "stop"|"length"|"content_filter"|"tool_call"|...
    part      {"type": "text", "content": str}
              {"type": "reasoning", "content": str}
              {"type": "tool_call", "id": str, "name": str, "arguments": any}
              {"type": "tool_call_response", "id": str, "response": any}
              {"type": "uri", "modality": str, "uri": str, "mime_type"?: str}
              {"type": "file", "modality": str, "file_id": str, "mime_type"?: str}
              {"type": <block type>, ...}        a generic part: any other block, by its type

An attachment the log holds whole (base64) is named, not copied: a generic part of type
``attachment`` with its ``modality``, ``mime_type``, ``size`` (bytes) and ``sha256``, as the
views name it (docs/log-format.md, Attachments); its bytes stay in the log.
"""

from __future__ import annotations

from typing import Any

from agenttrail.model import (
    Attachment,
    Event,
    attachment_of,
    content_order,
    output_text,
    text_of,
)
from agenttrail.providers import anthropic, openai
from agenttrail.replay.plan import AssistantTurn, Call

__all__ = [
    "Message",
    "assistant_message",
    "finish_reason",
    "message_parts",
    "output_message",
    "tool_message",
    "tool_response",
]

Message = dict[str, Any]
"""One GenAI message or part: a JSON-ready mapping."""

_FINISH_REASONS = {**openai.FINISH_REASONS, **anthropic.STOP_REASONS}
"""A provider's finish or stop reason → the semantic conventions' ``FinishReason`` (the
output-messages schema); a reason not listed is passed on as it is (the schema allows any
string)."""


def finish_reason(turn: AssistantTurn) -> tuple[str | None, str]:
    """The provider's own finish reason of a model call as recorded (``finishReason`` of
    OpenAI, ``stopReason`` of Anthropic; ``None`` when the log does not say), and the
    conventions' value for it. When the log does not say, the value is inferred from the
    message: ``tool_call`` when it issued client-side tool calls, else ``stop``."""
    payload = turn.message.payload if turn.message is not None else {}
    raw = payload.get("finishReason", payload.get("stopReason"))
    if isinstance(raw, str) and raw:
        return raw, _FINISH_REASONS.get(raw, raw)
    return None, "tool_call" if any(not c.server for c in turn.calls) else "stop"


def _attachment_part(found: Attachment) -> Message:
    mime = {"mime_type": found.media_type} if found.media_type else {}
    if found.reference is not None and found.reference.startswith("file id "):
        file_id = found.reference.removeprefix("file id ")
        return {"type": "file", "modality": found.kind, "file_id": file_id, **mime}
    if found.reference is not None:
        return {"type": "uri", "modality": found.kind, "uri": found.reference, **mime}
    return {
        "type": "attachment",
        "modality": found.kind,
        **mime,
        "size": found.size,
        "sha256": found.sha256,
    }


def _block_part(block: Any) -> Message | None:
    """The part of one content block; ``None`` for a block that says nothing to send
    (redacted thinking, an empty text)."""
    if not isinstance(block, dict):
        return {"type": "text", "content": str(block)}
    kind = block.get("type")
    text = block.get("text")
    if isinstance(text, str) and kind in (None, anthropic.TEXT_BLOCK, "input_text", "output_text"):
        return {"type": "text", "content": text} if text else None
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        return {"type": "reasoning", "content": block["thinking"]}
    if kind in anthropic.THINKING_BLOCKS:
        return None
    found = attachment_of(block)
    if found is not None:
        return _attachment_part(found)
    return {"type": str(kind), **{k: v for k, v in block.items() if k != "type"}}


def message_parts(payload: dict[str, Any]) -> list[Message]:
    """The parts of a message payload's content: its ``blocks`` (else its ``content`` when
    that is a list of blocks) one part each, else its text as one ``text`` part."""
    blocks = payload.get("blocks")
    content = payload.get("content")
    if not isinstance(blocks, list):
        blocks = content if isinstance(content, list) else None
    if blocks is None:
        text = text_of(content)
        return [{"type": "text", "content": text}] if text else []
    return [part for block in blocks if (part := _block_part(block)) is not None]


def _call_part(call: Call) -> Message:
    # `input` is the parsed arguments: the conventions ask for an object
    arguments = call.payload.get("input")
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}


def tool_response(result: Event) -> Any:
    """What a tool result returned, for a ``tool_call_response`` part and
    ``gen_ai.tool.call.result``: its ``output`` as recorded (a string or any JSON value), else
    its error text."""
    output = result.payload.get("output")
    return output if output is not None else output_text(result.payload)


def assistant_message(turn: AssistantTurn) -> Message:
    """The assistant message of one model call: its blocks, reasoning and tool calls in the
    provider's order (``order``, docs/log-format.md, Block order; else blocks then calls),
    with the results of server-side tools (which the provider ran inside the call) as
    ``tool_call_response`` parts where they came."""
    payload = turn.message.payload if turn.message is not None else {}
    calls = {call.id: call for call in turn.calls}
    parts: list[Message] = []
    order = content_order(payload) if turn.message is not None else None
    if order is None:
        parts.extend(message_parts(payload))
        for call in turn.calls:
            parts.append(_call_part(call))
            if call.server and call.result is not None:
                parts.append(_response_part(call))
        return {"role": "assistant", "parts": parts}
    placed: set[str] = set()
    for entry in order:
        if entry.kind == "block":
            part = _block_part(entry.block)
            if part is not None:
                parts.append(part)
        elif entry.id in calls and entry.kind == "toolCall":
            parts.append(_call_part(calls[entry.id]))
            placed.add(entry.id)
        elif entry.id in calls and calls[entry.id].result is not None:
            parts.append(_response_part(calls[entry.id]))
    parts.extend(_call_part(c) for c in turn.calls if c.id not in placed)
    return {"role": "assistant", "parts": parts}


def _response_part(call: Call) -> Message:
    assert call.result is not None
    return {"type": "tool_call_response", "id": call.id, "response": tool_response(call.result)}


def output_message(turn: AssistantTurn) -> Message:
    """The one output message of a model call (one choice), with its ``finish_reason``."""
    return {**assistant_message(turn), "finish_reason": finish_reason(turn)[1]}


def tool_message(turn: AssistantTurn) -> Message | None:
    """The ``tool`` message that sends the results of a model call's client-side tool calls
    back to the model, one ``tool_call_response`` part each, in call order; ``None`` when
    none has a result."""
    parts = [
        _response_part(call) for call in turn.calls if not call.server and call.result is not None
    ]
    return {"role": "tool", "parts": parts} if parts else None
