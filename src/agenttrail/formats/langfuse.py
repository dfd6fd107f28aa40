"""Langfuse trace exports: a trace and its observations, read as one session.

Langfuse (langfuse/langfuse; its API's ``GET /api/public/traces/{id}`` and the UI's export)
writes a trace as ``{"trace": {id, name, timestamp, sessionId?, userId?, input, output,
metadata, scores: [score], ...}, "observations": [observation]}``; a file may also hold a list
of such objects. An observation is ``{id, traceId, type: GENERATION|SPAN|TOOL|AGENT|EVENT|...,
name, startTime, endTime?, parentObservationId?, input, output, model?, usageDetails,
costDetails, level, statusMessage?, metadata, ...}``. Observations are not stored in time
order; they are read by ``startTime``.

The messages inside a generation's ``input`` and ``output`` take the shape of the framework that
logged them; these are read (docs/log-format.md, Imported formats):

- Chat Completions messages ``{role, content, tool_calls?, tool_call_id?}``, with LangChain's
  calls in ``additional_kwargs.tool_calls`` or ``tool_calls: [{id, name, args}]``;
- Responses items: ``{type: message, content: [{type: output_text, text}]}``, ``{type:
  function_call, call_id, name, arguments}``, ``{type: function_call_output, call_id,
  output}``, and a whole ``response`` object (its ``output`` items);
- OpenTelemetry GenAI messages ``{role, parts: [{type: text, content} | {type: tool_call, id,
  name, arguments} | {type: tool_call_response, id, result}]}``.

How they map:

- one session per trace, or per ``sessionId`` when the trace has one (its traces in time
  order); the trace itself is kept as a ``langfuse_trace`` event, its scores as ``annotation``
  events of kind ``score``;
- a ``GENERATION`` is an assistant ``message`` with its calls as ``tool_call`` events; its
  ``meta`` holds the model, the usage (``usageDetails``: Langfuse's usage types are disjoint
  and it sums them to a total, https://langfuse.com/docs/observability/features/
  token-and-cost-tracking; ``usage_raw`` keeps them as recorded) and ``cost``, the
  ``costDetails`` as recorded (USD per usage type); a system prompt sent beside the input
  messages (the OpenAI Agents SDK's ``instructions``), which OpenInference records among its
  ``llm.input_messages`` attributes, is the session's ``system`` message. The observation,
  without its input, is kept
  on the message as ``langfuse``. Input messages not in the session yet (the first prompt, a
  new user turn, a tool result) are written before it; one that maps to nothing (LangGraph
  logs each tool's definition as a ``role: tool`` message) is an ``annotation`` of kind
  ``langfuse_input``, once;
- a ``TOOL`` or ``SPAN`` that answers a call (by ``output.tool_call_id``, the OpenTelemetry
  attribute ``gen_ai.tool.call.id``, else by the tool's name) is that call's ``tool_result``;
- every other observation is kept verbatim as a ``langfuse_observation`` event, and one of
  level ``ERROR`` is also an ``error`` event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agenttrail.formats._common import (
    ImportedSession,
    as_object,
    content_session_id,
    json_prefix,
    lead_bytes,
    load_json,
    timestamp_or_none,
    title_from,
)
from agenttrail.formats.http.recording import fail, type_name
from agenttrail.model import NewEvent, NewSession, events

__all__ = ["NAME", "read", "sniff"]

NAME = "langfuse"

_SNIFF_BYTES = 64 * 1024
"""Bytes :func:`sniff` parses: an export starts with its ``trace`` object."""

_ROLES = {"user": "user", "human": "user", "system": "system", "developer": "system"}
_ROLES |= {"assistant": "assistant", "ai": "assistant", "model": "assistant"}

_TOOL_PREFIX = "running tool: "
"""Pydantic AI names a tool's span ``running tool: <name>``."""


def sniff(path: Path, data: bytes) -> bool:
    """True for a JSON object (or a list of them) with a ``trace`` object that has an ``id``
    and an ``observations`` list."""
    if lead_bytes(data) not in (b"{", b"[") or b'"observations"' not in data:
        return False
    head = json_prefix(data, _SNIFF_BYTES)
    first = head[0] if isinstance(head, list) and head else head
    trace = first.get("trace") if isinstance(first, dict) else None
    return isinstance(trace, dict) and "id" in trace


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read a Langfuse export into one session per trace (or per ``sessionId``).

    Returns:
        Sessions in order of their first trace; ``metadata`` is ``{format, traceIds,
        langfuseSessionId?}``.

    Raises:
        FormatError: not JSON, no ``trace`` object with an ``id``, ``observations`` not a
            list of objects with an ``id``; names the file and the field.
    """
    doc = load_json(path, data)
    exports = doc if isinstance(doc, list) else [doc]
    groups: dict[str, list[tuple[dict[str, Any], list[dict[str, Any]]]]] = {}
    for i, export in enumerate(exports):
        where = f"[{i}]" if isinstance(doc, list) else ""
        trace, observations = _export(path, export, where)
        key = trace.get("sessionId") or trace["id"]
        groups.setdefault(str(key), []).append((trace, observations))
    return [_Session(path, key, traces).read() for key, traces in groups.items()]


def _export(path: Path, export: Any, where: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    trace = export.get("trace") if isinstance(export, dict) else None
    if not isinstance(trace, dict) or not isinstance(trace.get("id"), str):
        raise fail(
            path,
            "not a Langfuse export: expected a trace object with an id",
            where + ".trace" if where else "trace",
        )
    observations = export.get("observations")
    field_name = f"{where}.observations" if where else "observations"
    if not isinstance(observations, list):
        raise fail(path, f"expected a list, not {type_name(observations)}", field_name)
    for i, obs in enumerate(observations):
        if not isinstance(obs, dict) or not isinstance(obs.get("id"), str):
            raise fail(path, "expected an observation object with an id", f"{field_name}[{i}]")
    return trace, observations


@dataclass
class _Item:
    """One message or message part of a generation's input or output, in neutral form."""

    kind: str
    """``message``, ``result`` or ``unmapped``."""
    role: str = ""
    text: str = ""
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    """``(id, name, arguments)`` of the calls an assistant message makes."""
    call_id: str | None = None
    output: Any = None
    raw: Any = None


class _Session:
    """Reads the traces of one session (the rules are in the module docstring)."""

    def __init__(self, path: Path, key: str, traces: list[tuple[dict[str, Any], Any]]) -> None:
        self.path = path
        self.key = key
        self.traces = sorted(traces, key=lambda t: str(t[0].get("timestamp") or ""))
        self.events: list[NewEvent] = []
        self.seen: set[str] = set()
        """Fingerprints of the messages and unmapped inputs written."""
        self.calls: dict[str, str] = {}
        """Call id → tool name, for every call written."""
        self.answered: set[str] = set()

    def add(self, payload: dict[str, Any], time: Any, key: str) -> None:
        # the position makes the key unique even if an export repeats an observation's id
        number = len(self.events)
        self.events.append(
            NewEvent(payload, timestamp_or_none(time), key=f"langfuse:{number}:{key}")
        )

    def read(self) -> ImportedSession:
        for trace, observations in self.traces:
            kept = {k: v for k, v in trace.items() if k != "scores"}
            self.add({"type": "langfuse_trace", "trace": kept}, trace.get("timestamp"), trace["id"])
            ordered = sorted(observations, key=lambda o: (str(o.get("startTime") or ""), o["id"]))
            for obs in ordered:
                self.observation(obs)
            scores = trace.get("scores") or []
            for score in scores if isinstance(scores, list) else [scores]:
                named = as_object(score)
                text = f"{named.get('name')}: {named.get('stringValue') or named.get('value')}"
                payload = {"type": "annotation", "kind": "score", "text": text, "data": score}
                self.add(payload, named.get("timestamp"), f"score:{named.get('id')}")
        first = self.traces[0][0]
        metadata: dict[str, Any] = {"format": NAME, "traceIds": [t["id"] for t, _ in self.traces]}
        if first.get("sessionId"):
            metadata["langfuseSessionId"] = first["sessionId"]
        prompt = next(
            (e.payload["content"] for e in self.events if e.payload.get("role") == "user"), None
        )
        session = NewSession(
            id=content_session_id(NAME, self.key.encode("utf-8", "surrogatepass")),
            title=first.get("name")
            if isinstance(first.get("name"), str)
            else title_from(prompt or ""),
            user=first.get("userId") if isinstance(first.get("userId"), str) else None,
            started=timestamp_or_none(first.get("timestamp")),
            metadata=metadata,
        )
        return ImportedSession(session, self.events)

    def observation(self, obs: dict[str, Any]) -> None:
        kind = obs.get("type")
        if kind == "GENERATION":
            self.generation(obs)
        elif not (kind in ("TOOL", "SPAN") and self.tool_result(obs)):
            self.add(
                {"type": "langfuse_observation", "observation": obs},
                obs.get("startTime"),
                obs["id"],
            )
        if obs.get("level") == "ERROR":
            message = obs.get("statusMessage") or f"{kind} {obs.get('name')} failed"
            self.add(
                events.error(str(message), source="langfuse", observationId=obs["id"]),
                obs.get("endTime") or obs.get("startTime"),
                f"{obs['id']}:error",
            )

    def generation(self, obs: dict[str, Any]) -> None:
        start, end = obs.get("startTime"), obs.get("endTime") or obs.get("startTime")
        given = _items(obs.get("input"), "user")
        if not any(item.role == "system" for item in given):  # passed beside the messages
            for i, text in enumerate(_instructions(obs)):
                self.input_item(_Item("message", "system", text), start, f"{obs['id']}:sys{i}")
        for i, item in enumerate(given):
            self.input_item(item, start, f"{obs['id']}:in{i}")
        outputs = [i for i in _items(obs.get("output"), "assistant") if i.kind == "message"]
        text = "\n".join(i.text for i in outputs if i.text)
        calls = [call for i in outputs for call in i.calls]
        kept = {k: v for k, v in obs.items() if k != "input"}
        message = events.message("assistant", text, meta=_meta(obs), langfuse=kept)
        self.seen.add(_fingerprint(_Item("message", "assistant", text, calls)))
        self.add(message, end, f"{obs['id']}:out")
        self.write_calls(calls, end, f"{obs['id']}:out")

    def input_item(self, item: _Item, time: Any, key: str) -> None:
        if item.kind == "result":
            if item.call_id is not None and item.call_id in self.answered:
                return
            self.answered.add(item.call_id or key)
            name = self.calls.get(item.call_id or "")
            self.add(events.tool_result(item.call_id, name, output=item.output), time, key)
            return
        print_ = _fingerprint(item)
        new_calls = [c for c in item.calls if c[0] not in self.calls]
        if print_ in self.seen and not new_calls:
            return
        self.seen.add(print_)
        if item.kind == "unmapped":
            payload = {
                "type": "annotation",
                "kind": "langfuse_input",
                "text": "input not mapped",
                "data": item.raw,
            }
            self.add(payload, time, key)
            return
        if item.text or not item.calls:
            self.add(events.message(item.role, item.text), time, key)
        self.write_calls(new_calls, time, key)

    def write_calls(self, calls: list[tuple[str, str, Any]], time: Any, key: str) -> None:
        for n, (call_id, name, arguments) in enumerate(calls):
            if call_id in self.calls:
                continue
            self.calls[call_id] = name
            self.add(events.tool_call(call_id, name, arguments), time, f"{key}:call{n}")

    def tool_result(self, obs: dict[str, Any]) -> bool:
        """Write a tool or span observation as the result of the call it answers, if any."""
        output = obs.get("output")
        attributes = as_object(as_object(obs.get("metadata")).get("attributes"))
        call_id = output.get("tool_call_id") if isinstance(output, dict) else None
        call_id = call_id or attributes.get("gen_ai.tool.call.id")
        if not (isinstance(call_id, str) and call_id in self.calls):
            name = str(attributes.get("gen_ai.tool.name") or obs.get("name") or "")
            name = name.removeprefix(_TOOL_PREFIX)
            call_id = next(
                (c for c, n in self.calls.items() if n == name and c not in self.answered), None
            )
        if call_id is None or call_id in self.answered:
            return False
        self.answered.add(call_id)
        if isinstance(output, dict) and "content" in output and output.get("type") == "tool":
            output = output["content"]  # a LangChain ToolMessage
        kept = {k: v for k, v in obs.items() if k != "output"}
        result = events.tool_result(call_id, self.calls[call_id], output=output, langfuse=kept)
        if obs.get("level") == "ERROR":
            result.update(is_error=True, error=str(obs.get("statusMessage") or "error"))
        self.add(result, obs.get("endTime") or obs.get("startTime"), obs["id"])
        return True


def _meta(obs: dict[str, Any]) -> dict[str, Any]:
    raw = obs.get("usageDetails")
    usage = None
    if isinstance(raw, dict) and raw:

        def total(*parts: str) -> int | None:
            counts = [v for k, v in raw.items() if type(v) is int and any(p in k for p in parts)]
            return sum(counts) if counts else None

        usage = events.usage(
            raw.get("input") if type(raw.get("input")) is int else None,
            raw.get("output") if type(raw.get("output")) is int else None,
            total("cache_read"),
            total("cache_creation", "cache_write"),
        )
    model = obs.get("model")
    attributes = as_object(as_object(obs.get("metadata")).get("attributes"))
    # OpenTelemetry GenAI names the provider gen_ai.provider.name (gen_ai.system before
    # semantic conventions 1.37); OpenInference names it llm.system.
    provider = next(
        (
            attributes[k]
            for k in ("gen_ai.provider.name", "gen_ai.system", "llm.system")
            if isinstance(attributes.get(k), str)
        ),
        None,
    )
    start, end = timestamp_or_none(obs.get("startTime")), timestamp_or_none(obs.get("endTime"))
    meta = events.meta(
        model=model if isinstance(model, str) else None,
        provider=provider,
        usage=usage,
        usage_raw=raw if isinstance(raw, dict) and raw else None,
        duration_ms=_milliseconds(start, end),
    )
    if obs.get("costDetails"):
        meta["cost"] = obs["costDetails"]
    return meta


def _instructions(obs: dict[str, Any]) -> list[str]:
    """The system messages a generation was sent beside its ``input`` (the OpenAI Agents SDK
    passes its agent's ``instructions`` apart from the messages), as OpenInference's
    ``llm.input_messages.<i>.message.role`` / ``.content`` attributes record every message
    sent (openinference semantic_conventions.md, LLM inputs), in their order."""
    attributes = as_object(as_object(obs.get("metadata")).get("attributes"))
    found = []
    for i in range(len(attributes)):
        role = attributes.get(f"llm.input_messages.{i}.message.role")
        if role is None:
            break
        text = attributes.get(f"llm.input_messages.{i}.message.content")
        if _ROLES.get(str(role)) == "system" and isinstance(text, str) and text:
            found.append(text)
    return found


def _milliseconds(start: str | None, end: str | None) -> float | None:
    """Milliseconds from ``start`` to ``end`` (``created_at`` timestamps), if both are known."""
    if start is None or end is None:
        return None
    span = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    return span.total_seconds() * 1000


def _items(value: Any, default_role: str) -> list[_Item]:
    """The messages a generation's ``input`` or ``output`` holds, in neutral form."""
    if value is None:
        return []
    if isinstance(value, str):
        return [_Item("message", default_role, value, raw=value)]
    if isinstance(value, list):
        return [item for v in value for item in _items(v, default_role)]
    if not isinstance(value, dict):
        return [_Item("unmapped", raw=value)]
    if isinstance(value.get("messages"), list):
        return _items(value["messages"], default_role)
    if value.get("object") == "response" and isinstance(value.get("output"), list):
        return _items(value["output"], "assistant")
    kind = value.get("type")
    if kind == "function_call":
        call = (
            str(value.get("call_id") or value.get("id")),
            str(value.get("name")),
            _args(value.get("arguments")),
        )
        return [_Item("message", "assistant", calls=[call], raw=value)]
    if kind == "function_call_output":
        return [
            _Item(
                "result",
                call_id=_call_id(value.get("call_id")),
                output=value.get("output"),
                raw=value,
            )
        ]
    role = _ROLES.get(str(value.get("role") or ("assistant" if kind == "message" else "")))
    if isinstance(value.get("parts"), list):
        return _parts(value, role)
    if value.get("role") == "tool" and isinstance(value.get("tool_call_id"), str):
        return [
            _Item("result", call_id=value["tool_call_id"], output=value.get("content"), raw=value)
        ]
    text = _text(value.get("content"))
    if role is None or text is None:
        return [_Item("unmapped", raw=value)]
    return [_Item("message", role, text, calls=_calls(value), raw=value)]


def _parts(value: dict[str, Any], role: str | None) -> list[_Item]:
    """An OpenTelemetry GenAI message: its text, calls and tool results."""
    items: list[_Item] = []
    texts: list[str] = []
    calls: list[tuple[str, str, Any]] = []
    for part in value["parts"]:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("content"), str):
            texts.append(part["content"])
        elif kind == "tool_call":
            calls.append((str(part.get("id")), str(part.get("name")), _args(part.get("arguments"))))
        elif kind == "tool_call_response":
            items.append(
                _Item(
                    "result", call_id=_call_id(part.get("id")), output=part.get("result"), raw=part
                )
            )
        else:
            items.append(_Item("unmapped", raw=part))
    if texts or calls:
        if role is None:
            return [_Item("unmapped", raw=value)]
        items.insert(0, _Item("message", role, "\n".join(texts), calls=calls, raw=value))
    return items


def _text(content: Any) -> str | None:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        if all(isinstance(t, str) for t in texts) and len(texts) == len(content):
            return "\n".join(t for t in texts if isinstance(t, str))
    return None


def _calls(message: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """Calls of a Chat Completions or LangChain assistant message."""
    listed = message.get("tool_calls") or as_object(message.get("additional_kwargs")).get(
        "tool_calls"
    )
    calls = []
    for call in listed if isinstance(listed, list) else []:
        if not isinstance(call, dict):
            continue
        function = as_object(call.get("function"))
        name = function.get("name") or call.get("name")
        arguments = function.get("arguments") if function else call.get("args")
        calls.append((str(call.get("id")), str(name), _args(arguments)))
    return calls


def _call_id(value: Any) -> str | None:
    """A call id as given, if it is text."""
    return value if isinstance(value, str) else None


def _fingerprint(item: _Item) -> str:
    """What tells two messages apart: role, text and call ids (an unmapped input: its JSON)."""
    value = (
        item.raw if item.kind == "unmapped" else [item.role, item.text, [c[0] for c in item.calls]]
    )
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


def _args(value: Any) -> Any:
    """Arguments as the model gave them: JSON text parsed, a parsed object as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
