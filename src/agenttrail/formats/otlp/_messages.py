"""Chat messages out of span attributes and span events, in every shape still sent.

- OpenTelemetry GenAI semantic conventions (open-telemetry/semantic-conventions-genai,
  docs/gen-ai/gen-ai-spans.md and gen-ai-events.md, 2026 development status): the
  ``gen_ai.input.messages``, ``gen_ai.output.messages`` and ``gen_ai.system_instructions``
  attributes, a list of ``{role, parts: [{type: text|tool_call|tool_call_response|…}],
  finish_reason?}`` (structured, or as a JSON string), on the span or on its
  ``gen_ai.client.inference.operation.details`` event;
- the deprecated per-message span events (semantic conventions v1.36.0 and earlier):
  ``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
  ``gen_ai.tool.message`` and ``gen_ai.choice``;
- the older flattened attributes ``gen_ai.prompt.N.*`` and ``gen_ai.completion.N.*``
  (OpenLLMetry);
- OpenInference's flattened ``llm.input_messages.N.message.*`` and ``llm.output_messages``
  (Arize-ai/openinference, spec/semantic_conventions.md).

Each becomes a :class:`Message`: a role, its text, its tool calls and its tool results. A
semantic-conventions message with a part of another type (``reasoning``, ``blob``, ``uri``,
``file``, or any other, gen-ai-input-messages.json) keeps every part but its tool parts as
``blocks``, in order: those parts verbatim, its text parts as the log's text blocks
(``{"type": "text", "text": …}``), so that the views read them as any provider's
(docs/log-format.md, Block order). The other shapes carry text and tool calls only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "Call",
    "History",
    "Message",
    "input_messages",
    "output_messages",
    "parsed_arguments",
]


@dataclass(frozen=True)
class Call:
    """A tool call an assistant message asks for."""

    id: str
    name: str
    input: Any
    """The arguments as an object when they parse as JSON, else as given."""
    arguments: str | None = None
    """The arguments as the source gave them, when that was text."""


@dataclass(frozen=True)
class Message:
    """One chat message, whatever shape it came in."""

    role: str
    text: str = ""
    calls: tuple[Call, ...] = ()
    results: tuple[tuple[str | None, Any], ...] = ()
    """``(tool call id, output)`` of each tool result the message carries."""
    finish_reason: str | None = None
    blocks: tuple[dict[str, Any], ...] = ()
    """Its content parts but the tool parts, in order, when one is neither text nor a tool
    part (module docstring); else none, the text being all there is."""
    order: tuple[tuple[str, int | str], ...] = ()
    """With :attr:`blocks`: ``("block", i)`` and ``("toolCall", id)`` in the parts' order,
    as :func:`agenttrail.model.events.block_order` takes them."""

    print: tuple[Any, ...] = field(init=False, repr=False, compare=False)
    """What makes two messages the same one sent again: role, text, call and result ids
    (as live capture compares messages, docs/capture.md). Made with the message: a history
    read once gives its messages again to every span that repeats it."""

    def __post_init__(self) -> None:
        ids = (tuple(c.id for c in self.calls), tuple(r[0] for r in self.results))
        object.__setattr__(self, "print", (self.role, self.text, *ids))


_DEPRECATED_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
"""Span events of semantic conventions v1.36.0 and earlier, one per input message."""


class History:
    """Reads ``gen_ai.input.messages`` the way a conversation sends it: each inference span
    repeats the history of the one before, as JSON text, with messages appended. When a
    span's text is the last one read with more elements after its last (the text up to that
    one's closing ``]``, then ``,``), only those are parsed, and the messages read before are
    given again, the same objects: the history is parsed once per conversation, not once per
    span. Any other text is parsed whole. The messages are those :func:`_semconv` reads from
    the whole text either way: a JSON array with elements after the first ``k`` is the first
    ``k`` and an array of the rest.
    """

    def __init__(self) -> None:
        self.text = ""
        """The last JSON text read, stripped of trailing whitespace."""
        self.messages: list[Message] = []
        """Its messages."""
        self.elements = 0
        """How many elements its array had (an empty one cannot be extended with a comma)."""

    def read(self, value: Any) -> list[Message]:
        """The messages of a ``gen_ai.input.messages`` value (structured, or its JSON text)."""
        if not isinstance(value, str):
            return _semconv(value)
        text = value.rstrip()
        head = self.text[:-1]
        if self.elements and text.startswith(head) and text[len(head) :].lstrip()[:1] == ",":
            rest = text[len(head) :].lstrip()[1:]
            try:
                tail = json.loads("[" + rest)
            except ValueError:
                tail = None
            if isinstance(tail, list):
                self.text, self.elements = text, self.elements + len(tail)
                self.messages = self.messages + _semconv(tail)
                return self.messages
        decoded = _decoded(value)
        self.text, self.messages, self.elements = "", _semconv(decoded), 0
        if isinstance(decoded, list) and text.endswith("]"):
            self.text, self.elements = text, len(decoded)
        return self.messages


def input_messages(
    attrs: dict[str, Any],
    span_events: list[tuple[str, dict[str, Any]]],
    history: History | None = None,
) -> list[Message]:
    """The messages a span sent the model, the system instructions first; ``history``
    reads ``gen_ai.input.messages`` when given (a conversation's spans, in order)."""
    found = [Message("system", text) for text in _instruction_texts(attrs)]
    if "gen_ai.input.messages" in attrs:
        value = attrs["gen_ai.input.messages"]
        return found + (history.read(value) if history is not None else _semconv(value))
    for name, event_attrs in span_events:
        if name == "gen_ai.client.inference.operation.details":
            found = [Message("system", t) for t in _instruction_texts(event_attrs)]
            return found + _semconv(event_attrs.get("gen_ai.input.messages"))
    deprecated = [
        _deprecated(_DEPRECATED_EVENTS[name], event_attrs)
        for name, event_attrs in span_events
        if name in _DEPRECATED_EVENTS
    ]
    if deprecated:
        return found + deprecated
    if any(k.startswith("llm.input_messages.") for k in attrs):
        return found + [_openinference(m) for m in _indexed(attrs, "llm.input_messages.")]
    return found + [_flattened(m) for m in _indexed(attrs, "gen_ai.prompt.")]


def output_messages(
    attrs: dict[str, Any], span_events: list[tuple[str, dict[str, Any]]]
) -> list[Message]:
    """The messages (choices) the model answered with, each with its finish reason: its own,
    else the span's (``gen_ai.response.finish_reasons``, one per choice; OpenInference's
    ``llm.finish_reason``)."""
    found = _outputs(attrs, span_events)
    reasons = _decoded(attrs.get("gen_ai.response.finish_reasons", attrs.get("llm.finish_reason")))
    if isinstance(reasons, str):
        reasons = [reasons]
    if not isinstance(reasons, list):
        return found
    return [
        replace(m, finish_reason=reasons[c])
        if m.finish_reason is None and c < len(reasons) and isinstance(reasons[c], str)
        else m
        for c, m in enumerate(found)
    ]


def _outputs(attrs: dict[str, Any], span_events: list[tuple[str, dict[str, Any]]]) -> list[Message]:
    if "gen_ai.output.messages" in attrs:
        return _semconv(attrs["gen_ai.output.messages"])
    for name, event_attrs in span_events:
        if name == "gen_ai.client.inference.operation.details":
            return _semconv(event_attrs.get("gen_ai.output.messages"))
    choices = [_choice(a) for name, a in span_events if name == "gen_ai.choice"]
    if choices:
        return choices
    if any(k.startswith("llm.output_messages.") for k in attrs):
        return [_openinference(m) for m in _indexed(attrs, "llm.output_messages.")]
    return [_flattened(m) for m in _indexed(attrs, "gen_ai.completion.")]


def _decoded(value: Any) -> Any:
    """A structured value that may come as its JSON text (semantic conventions allow both)."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _text(value: Any) -> str:
    value = _decoded(value)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        parts = [p.get("text", p.get("content")) if isinstance(p, dict) else p for p in value]
        if all(isinstance(p, str) for p in parts):
            return "\n".join(parts)  # type: ignore[arg-type]
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def parsed_arguments(value: Any) -> tuple[Any, str | None]:
    """Tool-call arguments as sent: JSON text parsed (and the text kept, as the payload's
    ``arguments``), text that is not JSON kept as text, anything else as it is (no text)."""
    if isinstance(value, str):
        try:
            return json.loads(value), value
        except ValueError:
            return value, value
    return value, None


def _instruction_texts(attrs: dict[str, Any]) -> list[str]:
    value = _decoded(attrs.get("gen_ai.system_instructions"))
    if value is None:
        return []
    text = _text(value)
    return [text] if text else []


def _semconv(value: Any) -> list[Message]:
    messages = _decoded(value)
    if not isinstance(messages, list):
        return []
    found = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        texts, calls, results = [], [], []
        blocks: list[dict[str, Any]] = []
        order: list[tuple[str, int | str]] = []
        other = False  # a part neither text nor a tool part: the blocks are kept
        for part in message.get("parts") or []:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "tool_call":
                parsed, raw = parsed_arguments(part.get("arguments"))
                calls.append(Call(str(part.get("id") or ""), str(part.get("name")), parsed, raw))
                order.append(("toolCall", calls[-1].id))
            elif kind == "tool_call_response":
                # "result" in the current conventions, "response" in earlier ones
                output = part.get("result", part.get("response"))
                results.append((_str_or_none(part.get("id")), output))
            else:
                order.append(("block", len(blocks)))
                if kind == "text":
                    texts.append(_text(part.get("content")))
                    blocks.append({"type": "text", "text": texts[-1]})
                else:
                    other = True
                    blocks.append(part)
        reason = message.get("finish_reason")
        found.append(
            Message(
                str(message.get("role") or "user"),
                "\n".join(texts),
                tuple(calls),
                tuple(results),
                reason if isinstance(reason, str) else None,
                tuple(blocks) if other else (),
                tuple(order) if other else (),
            )
        )
    return found


def _str_or_none(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _openai_calls(value: Any) -> tuple[Call, ...]:
    """Calls in OpenAI's shape ``[{id, function: {name, arguments}}]`` (the deprecated events)."""
    calls = _decoded(value)
    found = []
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict):
            spec = call.get("function")
            function: dict[str, Any] = spec if isinstance(spec, dict) else call
            parsed, raw = parsed_arguments(function.get("arguments"))
            found.append(Call(str(call.get("id") or ""), str(function.get("name")), parsed, raw))
    return tuple(found)


def _deprecated(role: str, attrs: dict[str, Any]) -> Message:
    body = _decoded(attrs.get("gen_ai.event.content"))
    fields = {**attrs, **(body if isinstance(body, dict) else {})}
    if role == "tool":
        return Message("tool", "", (), ((_str_or_none(fields.get("id")), fields.get("content")),))
    return Message(role, _text(fields.get("content")), _openai_calls(fields.get("tool_calls")))


def _choice(attrs: dict[str, Any]) -> Message:
    body = _decoded(attrs.get("gen_ai.event.content"))
    fields = {**attrs, **(body if isinstance(body, dict) else {})}
    message = _decoded(fields.get("message"))
    message = message if isinstance(message, dict) else {}
    reason = fields.get("finish_reason")
    return Message(
        "assistant",
        _text(message.get("content")),
        _openai_calls(message.get("tool_calls")),
        finish_reason=reason if isinstance(reason, str) else None,
    )


_INDEX = re.compile(r"(\d+)\.(.+)")


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.N.rest`` attributes as one mapping of ``rest`` per ``N``, in N order."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix) and (m := _INDEX.fullmatch(key[len(prefix) :])):
            found.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return [found[i] for i in sorted(found)]


def _openinference(fields: dict[str, Any]) -> Message:
    role = str(fields.get("message.role") or "user")
    text = fields.get("message.content")
    if text is None:
        parts = _indexed(fields, "message.contents.")
        text = "\n".join(
            str(p.get("message_content.text"))
            for p in parts
            if p.get("message_content.text") is not None
        )
    calls = []
    for call in _indexed(fields, "message.tool_calls."):
        parsed, raw = parsed_arguments(call.get("tool_call.function.arguments"))
        calls.append(
            Call(
                str(call.get("tool_call.id") or ""),
                str(call.get("tool_call.function.name")),
                parsed,
                raw,
            )
        )
    if role == "tool":
        return Message("tool", "", (), ((_str_or_none(fields.get("message.tool_call_id")), text),))
    return Message(role, _text(text), tuple(calls))


def _flattened(fields: dict[str, Any]) -> Message:
    role = str(fields.get("role") or "user")
    calls = []
    for call in _indexed(fields, "tool_calls."):
        parsed, raw = parsed_arguments(call.get("arguments"))
        calls.append(Call(str(call.get("id") or ""), str(call.get("name")), parsed, raw))
    reason = fields.get("finish_reason")
    if role == "tool":
        return Message(
            "tool", "", (), ((_str_or_none(fields.get("tool_call_id")), fields.get("content")),)
        )
    return Message(
        role,
        _text(fields.get("content")),
        tuple(calls),
        finish_reason=reason if isinstance(reason, str) else None,
    )
