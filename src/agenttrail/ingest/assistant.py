"""One assistant message as a live agent records it: its text, its tool calls, its usage.

A model response that asks for several tools at once (OpenAI ``tool_calls``, Anthropic
``tool_use`` blocks) is one assistant message. The recorder writes it in the layout the
importers write (``formats/openai``, ``formats/anthropic``), in one transaction::

    message    {type: message, role: assistant, content: text or "", actor: agent,
                meta: {model, provider, usage, usage_raw?, duration_ms, location},
                character?, messageId}
    tool_call  {type: tool_call, id, name, input, actor: agent, messageId}   one per call,
                                                                              in order

The calls follow their message with nothing in between (one transaction takes consecutive
seqs), so replay (``replay/plan.py``) reads them as that message's calls, up to the first
result: one assistant message with all its calls in every target. The usage is on the message
and on no call, so a sum over the session counts it once (docs/log-format.md, Usage). The text
comes before the calls, the order the importers give a message without a recorded block order.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenttrail.errors import InputError
from agenttrail.model import NewEvent, events
from agenttrail.model.reading import USAGE_KINDS

__all__ = [
    "CallSpec",
    "ToolCall",
    "assistant_events",
    "call_id",
    "checked_usage",
    "model_meta",
]


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model issued it, for :meth:`agenttrail.Turn.assistant`."""

    name: str
    """The tool's name, as the model gave it."""
    input: Any = None
    """The arguments as the model gave them (JSON-shaped: usually an object)."""
    id: str | None = None
    """The provider's call id (``call_…``, ``toolu_…``); drawn when ``None``."""


CallSpec = ToolCall | tuple[str, Any] | tuple[str, Any, str | None]
"""A tool call given to :meth:`agenttrail.Turn.assistant`: a :class:`ToolCall`, or ``(name,
input)`` / ``(name, input, id)``."""


def call_id(given: str | None = None) -> str:
    """``given``, or a new call id ``call_`` + 24 hex digits."""
    return given if given is not None else f"call_{uuid.uuid4().hex[:24]}"


def _tool_call(spec: Any, where: str) -> ToolCall:
    if isinstance(spec, ToolCall):
        call = spec
    elif isinstance(spec, tuple) and len(spec) in (2, 3):
        call = ToolCall(*spec)
    else:
        raise InputError(f"{where}: expected a ToolCall or (name, input[, id]), not {spec!r:.80}")
    if not isinstance(call.name, str) or not call.name:
        raise InputError(f"{where}: the tool name must be a non-empty string, not {call.name!r}")
    if call.id is not None and (not isinstance(call.id, str) or not call.id):
        raise InputError(f"{where}: the call id must be a non-empty string, not {call.id!r}")
    return ToolCall(call.name, call.input, call_id(call.id))


def checked_usage(usage: Mapping[str, Any] | None, where: str) -> dict[str, int | None] | None:
    """``usage`` as the four disjoint kinds of :func:`agenttrail.usage`, ``None`` for a kind
    not given (docs/log-format.md, Usage).

    Raises:
        InputError: a key that is not a kind (``prompt_tokens``: the provider's own object
            goes in ``usage_raw``), or a count that is not a whole number of tokens >= 0.
    """
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise InputError(f"{where}: usage must be a mapping of token counts, not {usage!r:.80}")
    for kind, count in usage.items():
        if kind not in USAGE_KINDS:
            raise InputError(
                f"{where}: usage key {kind!r} is not one of {', '.join(USAGE_KINDS)} "
                "(pass the provider's own usage object as usage_raw)"
            )
        if count is not None and (
            not isinstance(count, int) or isinstance(count, bool) or count < 0
        ):
            raise InputError(f"{where}: usage {kind} must be a token count >= 0, not {count!r}")
    return events.usage(**{kind: usage.get(kind) for kind in USAGE_KINDS})


def model_meta(
    *,
    model: str | None,
    provider: str | None,
    usage: Mapping[str, Any] | None,
    usage_raw: Mapping[str, Any] | None,
    duration_ms: float | None,
    location: str | None,
    where: str,
) -> dict[str, Any]:
    """The ``meta`` of a model's message: :func:`agenttrail.meta` with ``usage`` checked.

    ``usage_raw`` is kept verbatim beside the counts. An ``openai`` message that reports
    ``cache_read`` without it gets ``usage_raw: null``: its key says that ``input`` leaves the
    cache reads out, as ``usage`` always does here (docs/log-format.md, Usage; without it
    ``model.reading.usage_of`` reads the event as one written before that rule and takes the
    cache reads out of ``input`` a second time).

    Raises:
        InputError: as :func:`checked_usage`, or a ``location`` other than local/remote.
    """
    counts = checked_usage(usage, where)
    meta = events.meta(
        model=model,
        provider=provider,
        usage=counts,
        duration_ms=duration_ms,
        location=location,
        usage_raw=dict(usage_raw) if usage_raw is not None else None,
    )
    if provider == "openai" and counts is not None and counts["cache_read"] is not None:
        meta.setdefault("usage_raw", None)
    return meta


def assistant_events(
    text: str | None,
    calls: Sequence[CallSpec],
    *,
    meta: dict[str, Any],
    message_id: str | None,
    character: str | None,
    created_at: str | None,
) -> tuple[list[NewEvent], list[ToolCall]]:
    """The events of one assistant message and its calls (layout in the module docstring).

    Idempotency keys: ``assistant:<messageId>`` for the message and ``tool_call:<id>`` for
    each call (as :meth:`agenttrail.Turn.tool_call`), so recording the same message again
    with its ``message_id`` and call ids writes nothing.

    Returns:
        The events to append together, and the calls with their ids.

    Raises:
        InputError: neither text nor calls (an empty assistant message, which no provider
            takes back), a call given wrongly, or two calls with one id.
    """
    where = "Turn.assistant"
    checked = [_tool_call(spec, f"{where} tool_calls[{i}]") for i, spec in enumerate(calls)]
    if not text and not checked:
        raise InputError(f"{where}: a message needs text or tool calls; it has neither")
    ids = [c.id for c in checked]
    repeated = sorted({i for i in ids if ids.count(i) > 1 and i is not None})
    if repeated:
        raise InputError(f"{where}: call id {repeated[0]!r} is given twice in one message")
    message_id = message_id or f"msg_{uuid.uuid4().hex[:24]}"
    message = events.message(
        "assistant",
        text or "",
        actor=events.Actor.AGENT.value,
        meta=meta,
        character=character,
        messageId=message_id,
    )
    out = [NewEvent(message, created_at, f"assistant:{message_id}")]
    for call in checked:
        assert call.id is not None  # drawn by _tool_call
        payload = events.tool_call(
            call.id, call.name, call.input, actor=events.Actor.AGENT.value, messageId=message_id
        )
        out.append(NewEvent(payload, created_at, f"tool_call:{call.id}"))
    return out, checked
