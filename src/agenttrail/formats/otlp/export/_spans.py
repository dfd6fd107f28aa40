"""The spans of one session: an ``invoke_agent`` span per turn, a ``chat {model}`` span per
model call and an ``execute_tool {name}`` span per tool call, as OTLP protobuf messages.

Rules (OpenTelemetry semantic conventions v1.41.0: ``docs/gen-ai/gen-ai-agent-spans.md``,
Invoke agent internal span; ``gen-ai-spans.md``, Inference and Execute tool span), with the
OpenInference attributes Phoenix reads and Langfuse's session attribute beside them (the
package docstring lists them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from agenttrail.codec import escaped_surrogates, json_line
from agenttrail.formats.otlp.export._messages import (
    Message,
    assistant_message,
    finish_reason,
    message_parts,
    output_message,
    tool_message,
    tool_response,
)
from agenttrail.model import UNDATED_NOTE, Event, Session, tool_status, usage_of
from agenttrail.replay.plan import AssistantTurn, Call, SystemItem, UserItem, plan

__all__ = ["TOOL_ERROR", "session_spans", "span_id", "trace_id"]

TOOL_ERROR = "tool_error"
"""The ``error.type`` of an ``execute_tool`` span whose result says the call failed
(:func:`agenttrail.model.tool_status`); the only error type this export reports."""

_SEPARATE_SYSTEM = frozenset({"anthropic"})
"""Providers whose API takes the system prompt apart from the messages (Anthropic's
``system``): their system messages go in ``gen_ai.system_instructions``; every other
provider's stay in ``gen_ai.input.messages`` with role ``system``, as the conventions ask of
instructions that are part of the chat history."""

_ROOT = "invoke_agent"
"""The operation of a turn's root span."""

_TURN_OPENERS = frozenset({"user", "trigger"})
"""User-side items that open a turn: the user's own message, or a trigger firing."""

Attributes = dict[str, Any]


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(parts).encode()).digest()


def trace_id(session_id: str, seq: int) -> bytes:
    """The 16-byte trace id of the turn opened by event ``seq``: the first 16 bytes of
    SHA-256 of ``agenttrail trace``, the session id and the seq, NUL-separated. Pushing a
    session twice gives the same ids, so a backend sees the same trace again."""
    return _digest("agenttrail trace", session_id, str(seq))[:16]


def span_id(session_id: str, seq: int, operation: str) -> bytes:
    """The 8-byte span id of the ``operation`` span (``invoke_agent``, ``chat``,
    ``execute_tool``) made from event ``seq``: the first 8 bytes of SHA-256 of ``agenttrail
    span``, the session id, the seq and the operation, NUL-separated (a turn that opens with a
    model call has an ``invoke_agent`` and a ``chat`` span from one event)."""
    return _digest("agenttrail span", session_id, str(seq), operation)[:8]


def _nanos(created_at: str) -> int:
    """Nanoseconds since the Unix epoch of a ``created_at`` (RFC 3339, UTC)."""
    moment = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // _MICROSECOND * 1000


_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)


def _value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, (list, tuple)):
        return AnyValue(array_value=ArrayValue(values=[_value(v) for v in value]))
    return AnyValue(string_value=escaped_surrogates(str(value)))  # protobuf takes UTF-8 only


def attributes(values: Attributes) -> list[KeyValue]:
    """OTLP attributes of a mapping, in its order; ``None`` values are left out. Strings,
    integers, floats, booleans and lists of them are OTLP values as they are; anything else
    is its text."""
    return [KeyValue(key=k, value=_value(v)) for k, v in values.items() if v is not None]


def _text(value: Any) -> str:
    """A value as attribute text: a string as it is, anything else as compact JSON. The
    conventions' structured attributes go on spans as JSON strings where a language's SDK has
    no structured attribute values (gen-ai-spans.md, Recording content on attributes)."""
    return value if isinstance(value, str) else json_line(value)


def _plain(message: Message) -> str:
    """The text parts of a message, joined by newlines."""
    return "\n".join(p["content"] for p in message["parts"] if p.get("type") == "text")


def _openinference(prefix: str, messages: Sequence[Message]) -> Attributes:
    """OpenInference's flattened messages: ``{prefix}.N.message.role`` / ``.content``, an
    assistant's ``.tool_calls.M.tool_call.id`` / ``.function.name`` / ``.function.arguments``,
    and one ``tool`` message per tool response with its ``.tool_call_id``."""
    flat: Attributes = {}
    index = 0
    for message in messages:
        if message["role"] == "tool":
            for part in message["parts"]:
                key = f"{prefix}.{index}.message"
                flat[f"{key}.role"] = "tool"
                flat[f"{key}.tool_call_id"] = part.get("id")
                flat[f"{key}.content"] = _text(part.get("response"))
                index += 1
            continue
        key = f"{prefix}.{index}.message"
        flat[f"{key}.role"] = message["role"]
        flat[f"{key}.content"] = _plain(message)
        calls = [p for p in message["parts"] if p.get("type") == "tool_call"]
        for n, call in enumerate(calls):
            flat[f"{key}.tool_calls.{n}.tool_call.id"] = call.get("id")
            flat[f"{key}.tool_calls.{n}.tool_call.function.name"] = call.get("name")
            arguments = _text(call.get("arguments"))
            flat[f"{key}.tool_calls.{n}.tool_call.function.arguments"] = arguments
        index += 1
    return flat


@dataclass
class _Turn:
    """One turn's spans as they are built: its root, its children, its times."""

    opener: Event
    children: list[Span] = field(default_factory=list)
    times: list[int] = field(default_factory=list)
    chats: list[Attributes] = field(default_factory=list)
    first_input: Message | None = None
    last_output: Message | None = None


class _SessionSpans:
    """Walks a session's replay plan once, keeping the message history, and makes spans."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.history: list[tuple[bool, Message]] = []  # (is a system message, message)
        self.last_time: int | None = None
        self.spans: list[Span] = []

    def common(self, event: Event, kind: str) -> Attributes:
        return {
            "openinference.span.kind": kind,
            "gen_ai.conversation.id": self.session.id,
            "session.id": self.session.id,
            "langfuse.session.id": self.session.id,
            "user.id": self.session.user,
            "langfuse.user.id": self.session.user,
            "agenttrail.seq": event.seq,
            "agenttrail.hash": event.hash.hex(),
            "agenttrail.undated": None if self.session.dated else UNDATED_NOTE,
        }

    def span(
        self, turn: _Turn, event: Event, operation: str, name: str, times: tuple[int, int]
    ) -> Span:
        """A span of ``turn`` made from ``event``; a child of the turn's ``invoke_agent``
        span unless it is that span."""
        root = operation == _ROOT
        start, end = times
        return Span(
            trace_id=trace_id(self.session.id, turn.opener.seq),
            span_id=span_id(self.session.id, event.seq, operation),
            parent_span_id=b"" if root else span_id(self.session.id, turn.opener.seq, _ROOT),
            name=escaped_surrogates(name),
            kind=Span.SPAN_KIND_CLIENT if operation == "chat" else Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=min(start, end),
            end_time_unix_nano=end,
        )

    def walk(self, events: Iterable[Event]) -> list[Span]:
        turn: _Turn | None = None
        for item in plan(events).items:
            opens = isinstance(item, UserItem) and item.kind in _TURN_OPENERS
            if turn is None:
                turn = _Turn(_item_event(item))
            elif opens and (turn.first_input is not None or turn.children):
                self.close(turn)
                turn = _Turn(_item_event(item))
            if opens and turn.first_input is None:
                turn.opener = _item_event(item)  # leading system messages join the turn
            self.add(turn, item)
        if turn is not None:
            self.close(turn)
        return self.spans

    def add(self, turn: _Turn, item: SystemItem | UserItem | AssistantTurn) -> None:
        if isinstance(item, SystemItem):
            self.history.append(
                (True, {"role": "system", "parts": message_parts(item.event.payload)})
            )
            self.seen(turn, [item.event])
        elif isinstance(item, UserItem):
            if item.kind in ("user", "runtime", "trigger"):
                message = {"role": "user", "parts": message_parts(item.event.payload)}
                self.history.append((False, message))
                if item.kind != "runtime" and turn.first_input is None:
                    turn.first_input = message
            self.seen(turn, [item.event])
        else:
            self.assistant(turn, item)

    def seen(self, turn: _Turn, events: Iterable[Event]) -> None:
        for event in events:
            moment = _nanos(event.created_at)
            turn.times.append(moment)
            self.last_time = moment if self.last_time is None else max(self.last_time, moment)

    def assistant(self, turn: _Turn, item: AssistantTurn) -> None:
        before = self.last_time
        if item.message is not None:
            turn.children.append(self.chat(turn, item, before))
            turn.last_output = output_message(item)
        self.history.append((False, assistant_message(item)))
        results = tool_message(item)
        if results is not None:
            self.history.append((False, results))
        # in the order the results came (the log's), which the calls' order need not be
        for call in sorted(item.calls, key=lambda c: (c.result or c.event).seq):
            turn.children.append(self.tool(turn, call))
        self.seen(turn, [e for e in (item.message,) if e is not None])
        self.seen(turn, [c.event for c in item.calls])
        self.seen(turn, [c.result for c in item.calls if c.result is not None])

    def chat(self, turn: _Turn, item: AssistantTurn, before: int | None) -> Span:
        assert item.message is not None
        event = item.message
        meta = event.payload.get("meta")
        meta = meta if isinstance(meta, dict) else {}
        model = meta.get("model") if isinstance(meta.get("model"), str) else None
        provider = meta.get("provider") if isinstance(meta.get("provider"), str) else None
        separate = provider in _SEPARATE_SYSTEM
        system = [
            part for is_system, m in self.history if is_system and separate for part in m["parts"]
        ]
        inputs = [m for is_system, m in self.history if not (is_system and separate)]
        output = output_message(item)
        raw_reason, _ = finish_reason(item)
        counts = usage_of(meta) or {}
        prompt = counts.get("input")
        if prompt is not None:
            prompt += (counts.get("cache_read") or 0) + (counts.get("cache_write") or 0)
        completion = counts.get("output")
        attrs: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
            "gen_ai.response.id": _string(event.payload.get("messageId")),
            "gen_ai.response.finish_reasons": [raw_reason] if raw_reason else None,
            "gen_ai.usage.input_tokens": prompt,
            "gen_ai.usage.output_tokens": completion,
            "gen_ai.usage.cache_read.input_tokens": counts.get("cache_read"),
            "gen_ai.usage.cache_creation.input_tokens": counts.get("cache_write"),
            "gen_ai.input.messages": json_line(inputs),
            "gen_ai.output.messages": json_line([output]),
            "gen_ai.system_instructions": json_line(system) if system else None,
            **self.common(event, "LLM"),
            "llm.model_name": model,
            "llm.provider": provider,
            "llm.token_count.prompt": prompt,
            "llm.token_count.completion": completion,
            "llm.token_count.total": _total(prompt, completion),
            "llm.token_count.prompt_details.cache_read": counts.get("cache_read"),
            "llm.token_count.prompt_details.cache_write": counts.get("cache_write"),
            **_openinference(
                "llm.input_messages",
                ([{"role": "system", "parts": system}] if system else []) + inputs,
            ),
            **_openinference("llm.output_messages", [output]),
            "input.value": json_line(inputs),
            "input.mime_type": "application/json",
            "output.value": _plain(output) or None,
            "output.mime_type": "text/plain" if _plain(output) else None,
        }
        turn.chats.append(attrs)
        end = _nanos(event.created_at)
        duration = meta.get("duration_ms")
        if isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0:
            start = end - int(duration * 1_000_000)
            attrs["agenttrail.duration_ms"] = duration  # what the span's length came from
        else:
            start = before if before is not None else end
        name = f"chat {model}" if model else "chat"
        span = self.span(turn, event, "chat", name, (start, end))
        span.attributes.extend(attributes(attrs))
        return span

    def tool(self, turn: _Turn, call: Call) -> Span:
        event = call.event
        start = _nanos(event.created_at)
        end = _nanos(call.result.created_at) if call.result is not None else start
        end = max(start, end)
        arguments = call.payload.get("input")
        attrs: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": None if call.server else "function",
            "gen_ai.tool.call.arguments": _text(arguments),
            **self.common(event, "TOOL"),
            "tool.name": call.name,
            "tool.parameters": _text(arguments),
            "input.value": _text(arguments),
            "input.mime_type": "text/plain" if isinstance(arguments, str) else "application/json",
        }
        status = Status()  # unset on success (Recording Errors: OK is the application's)
        if call.result is not None:
            response = tool_response(call.result)
            verdict = tool_status(call.result.payload)
            attrs["gen_ai.tool.call.result"] = _text(response)
            attrs["output.value"] = _text(response)
            attrs["agenttrail.result_seq"] = call.result.seq
            attrs["agenttrail.result_hash"] = call.result.hash.hex()
            if not verdict.ok:
                attrs["error.type"] = TOOL_ERROR
                detail = escaped_surrogates(verdict.detail)
                status = Status(code=Status.STATUS_CODE_ERROR, message=detail)
        span = self.span(turn, event, "execute_tool", f"execute_tool {call.name}", (start, end))
        span.attributes.extend(attributes(attrs))
        span.status.CopyFrom(status)
        return span

    def close(self, turn: _Turn) -> None:
        event = turn.opener
        first = next(iter(turn.chats), {})
        agent = self.session.agent
        inputs = [turn.first_input] if turn.first_input is not None else []
        outputs = [turn.last_output] if turn.last_output is not None else []
        attrs: Attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": first.get("gen_ai.provider.name"),
            "gen_ai.agent.name": agent,
            "gen_ai.request.model": first.get("gen_ai.request.model"),
            "gen_ai.input.messages": json_line(inputs) if inputs else None,
            "gen_ai.output.messages": json_line(outputs) if outputs else None,
            **self.common(event, "AGENT"),
            "input.value": _plain(inputs[0]) if inputs else None,
            "input.mime_type": "text/plain" if inputs else None,
            "output.value": _plain(outputs[0]) if outputs else None,
            "output.mime_type": "text/plain" if outputs else None,
        }
        times = turn.times or [_nanos(event.created_at)]
        name = f"invoke_agent {agent}" if agent else "invoke_agent"
        root = self.span(turn, event, "invoke_agent", name, (min(times), max(times)))
        root.attributes.extend(attributes(attrs))
        self.spans.append(root)
        self.spans.extend(turn.children)


def _item_event(item: SystemItem | UserItem | AssistantTurn) -> Event:
    if isinstance(item, AssistantTurn):
        return item.message if item.message is not None else item.calls[0].event
    return item.event


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _total(prompt: int | None, completion: int | None) -> int | None:
    return None if prompt is None and completion is None else (prompt or 0) + (completion or 0)


def session_spans(session: Session, events: Iterable[Event]) -> list[Span]:
    """The spans of one session's events, turn by turn: each turn's ``invoke_agent`` span,
    then its ``chat`` and ``execute_tool`` spans (children of it), in log order.

    The messages are the replay plan's (:func:`agenttrail.replay.plan.plan`): an API message
    stored in growing parts is read once, whole; a call is paired with its result by id; what
    replay leaves out (errors, annotations, a user's own tool calls) makes no span.

    Args:
        session: the session row (its id, agent and user go on every span).
        events: the session's events in seq order.
    """
    return _SessionSpans(session).walk(events)
