"""Assemble an OpenAI stream (server-sent events) into the response body it streams.

The log keeps the final message, never the fragments (docs/specs.md, The log: partials are never
stored).

- Chat Completions (https://platform.openai.com/docs/api-reference/chat-streaming): each
  ``chat.completion.chunk`` carries ``choices[].delta``; text (``content``, ``refusal``) is
  concatenated, tool calls arrive in fragments keyed by ``index`` (id, type and name once,
  ``arguments`` in pieces), ``finish_reason`` comes last, and usage comes in a final chunk with
  empty ``choices`` only when ``stream_options.include_usage`` was set (otherwise ``None``).
  A fragment that names a new call ``id`` at an ``index`` already in use starts a new call
  there (some OpenAI-compatible servers stream every call at index 0); when the call it
  follows has arguments that are not yet JSON, the stream contradicts itself and both calls
  are warned about, each kept with the fragments that arrived for it. ``id``, ``model``,
  ``created`` and ``system_fingerprint`` are the first non-empty ones: Azure OpenAI's first
  chunk, which carries ``prompt_filter_results``, has ``id`` and ``model`` ``""``,
  ``created`` 0 and no choices (content filtering, streaming:
  https://learn.microsoft.com/en-us/azure/ai-foundry/openai/concepts/content-filter).
- Responses API (https://platform.openai.com/docs/api-reference/responses-streaming): the
  ``response.completed`` (or ``.incomplete`` / ``.failed``) event carries the whole response;
  a stream cut before it keeps its output items as far as they arrived (text and arguments
  joined from their deltas) and says so, and one ended by an ``error`` event keeps them too,
  with the error's fields as the body's ``error``: the answer the caller got is kept, then
  the error.
- A Chat Completions chunk carrying an ``error`` ends the stream (the openai SDK raises it):
  the choices as far as they arrived, with the error as the body's ``error``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenttrail.formats._common import is_json
from agenttrail.formats.http.recording import fail, parse_json_body
from agenttrail.formats.http.sse import sse_events

__all__ = ["assemble"]

Chunks = list[tuple[int, dict[str, Any]]]
"""``(body line, event data)`` of each event, in order."""


def assemble(text: str, path: Path, where: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The body a stream of server-sent events amounts to, and problems worth a warning.

    Args:
        text: the recorded response body (``data: {...}`` lines, ``data: [DONE]`` last).
        path: the file, for errors.
        where: the body's field path, for errors.

    Returns:
        ``(body, warnings)``: a ``chat.completion`` or ``response`` mapping (``None`` for an
        empty stream; with an ``error`` when an error ended the stream, beside what had
        arrived) and one line per problem (a stream that ends early without an error).

    Raises:
        FormatError: an event whose data is not a JSON object, or a chunk of the wrong shape;
            names the field and the body line.
    """
    chunks: Chunks = []
    for event in sse_events(text):
        line, data = event.line, event.data
        if data.strip() == "[DONE]":
            break
        chunk = parse_json_body(data, path, where, event_line=line)
        if not isinstance(chunk, dict):
            raise fail(
                path, f"server-sent event at body line {line}: expected a JSON object", where
            )
        chunks.append((line, chunk))
    if not chunks:
        return None, []
    if any(str(chunk.get("type", "")).startswith("response.") for _, chunk in chunks):
        return _response(chunks, path, where)
    return _chat_completion(chunks, path, where)


def _chat_completion(chunks: Chunks, path: Path, where: str) -> tuple[dict[str, Any], list[str]]:
    body: dict[str, Any] = {"object": "chat.completion", "usage": None}
    choices: dict[int, dict[str, Any]] = {}
    calls: dict[int, _Calls] = {}
    warnings: list[str] = []
    for line, chunk in chunks:
        at = f"{where} (server-sent event at body line {line})"
        if chunk.get("error"):  # ends the stream: the openai SDK raises it to the caller
            body["error"] = chunk["error"]
            break
        for name in ("id", "created", "model", "system_fingerprint"):
            if not body.get(name) and chunk.get(name):  # "" and 0 are no values (Azure's)
                body[name] = chunk[name]
        if chunk.get("usage") is not None:
            body["usage"] = chunk["usage"]
        deltas = chunk.get("choices") or []
        if not isinstance(deltas, list):
            raise fail(path, "expected a list of choices", at)
        for part in deltas:
            delta = part.get("delta") if isinstance(part, dict) else None
            index = part.get("index", 0) if isinstance(part, dict) else None
            if not isinstance(delta, dict) or not isinstance(index, int):
                raise fail(path, "expected a choice with an integer index and a delta object", at)
            choice = choices.setdefault(
                index, {"index": index, "message": {"role": "assistant"}, "finish_reason": None}
            )
            message = choice["message"]
            if isinstance(delta.get("role"), str):
                message["role"] = delta["role"]
            for name in ("content", "refusal"):
                if isinstance(delta.get(name), str):
                    message[name] = (message.get(name) or "") + delta[name]
            _call_fragments(delta, calls.setdefault(index, _Calls()), message, path, at, line)
            if part.get("finish_reason") is not None:
                choice["finish_reason"] = part["finish_reason"]
    for index, choice in choices.items():
        if index in calls and calls[index].calls:
            choice["message"]["tool_calls"] = calls[index].in_order()
            warnings.extend(f"choice {index}: {text}" for text in calls[index].warnings)
        if choice["finish_reason"] is None and "error" not in body:
            warnings.append(f"the stream of choice {index} ends without a finish_reason")
    body["choices"] = [choices[k] for k in sorted(choices)]
    return body, warnings


@dataclass
class _Calls:
    """The tool calls of one choice as they are assembled."""

    calls: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    """``(index, body line of its first fragment, call)`` in the order the calls started."""
    current: dict[int, int] = field(default_factory=dict)
    """``index`` → position in :attr:`calls` of the call its fragments now go to."""
    warnings: list[str] = field(default_factory=list)
    """Contradictions found (a new call while the one before had no whole arguments)."""

    def at(self, index: int, call_id: Any, line: int) -> dict[str, Any]:
        """The call a fragment at ``index`` carrying ``call_id`` (``None`` if none) joins."""
        position = self.current.get(index)
        if position is not None:
            _, started, call = self.calls[position]
            if not (isinstance(call_id, str) and call_id and call["id"] and call_id != call["id"]):
                return call
            if not is_json(call["function"]["arguments"]):
                self.warnings.append(
                    f"tool call {call_id!r} starts at index {index} (server-sent event at body "
                    f"line {line}) while call {call['id']!r} there (line {started}) has "
                    "arguments that are not JSON; the stream contradicts itself, and both "
                    "calls are kept as their fragments arrived"
                )
        new = {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        self.current[index] = len(self.calls)
        self.calls.append((index, line, new))
        return new

    def in_order(self) -> list[dict[str, Any]]:
        """The calls by index, and in the order they started within an index."""
        return [call for _, _, call in sorted(self.calls, key=lambda c: c[0])]


def _call_fragments(
    delta: dict[str, Any],
    calls: _Calls,
    message: dict[str, Any],
    path: Path,
    at: str,
    line: int,
) -> None:
    """Join tool call fragments: id, type and name come once, arguments in pieces; a new id
    at an index in use starts a new call (:meth:`_Calls.at`)."""
    fragments = delta.get("tool_calls") or []
    if not isinstance(fragments, list):
        raise fail(path, "expected a list of tool call fragments", at)
    for fragment in fragments:
        if not isinstance(fragment, dict) or not isinstance(fragment.get("index"), int):
            raise fail(path, "expected a tool call fragment with an integer index", at)
        function = fragment.get("function") or {}
        if not isinstance(function, dict):
            raise fail(path, "expected a function object in a tool call fragment", at)
        call = calls.at(fragment["index"], fragment.get("id"), line)
        for name in ("id", "type"):
            if isinstance(fragment.get(name), str) and fragment[name]:
                call[name] = fragment[name]
        if isinstance(function.get("name"), str) and function["name"]:
            call["function"]["name"] = function["name"]
        if isinstance(function.get("arguments"), str):
            call["function"]["arguments"] += function["arguments"]
    legacy = delta.get("function_call")  # deprecated single call, streamed the same way
    if isinstance(legacy, dict):
        joined = message.setdefault("function_call", {"name": "", "arguments": ""})
        for name in ("name", "arguments"):
            if isinstance(legacy.get(name), str):
                joined[name] += legacy[name]


_LIFECYCLE = ("response.created", "response.queued", "response.in_progress")
"""Events carrying the response as it starts (no output yet, ``status`` not final)."""

_ITEM_DELTAS = {
    "response.function_call_arguments.delta": "arguments",
    "response.custom_tool_call_input.delta": "input",
}
"""Events whose ``delta`` extends a field of the output item at ``output_index``."""

_PART_DELTAS = {"response.output_text.delta": "text", "response.refusal.delta": "refusal"}
"""Events whose ``delta`` extends a field of that item's content part at ``content_index``."""


def _response(chunks: Chunks, path: Path, where: str) -> tuple[dict[str, Any], list[str]]:
    """The ``response`` a Responses stream amounts to: the one its ``response.completed`` (or
    ``.incomplete`` / ``.failed``) event carries; without one, the ``response.created``
    response with the output items as far as they arrived, and the ``error`` event's fields
    as its ``error`` when one ended the stream.

    Items are assembled as the openai SDK's stream accumulator does
    (``openai/lib/streaming/responses/_responses.py``): ``response.output_item.added`` starts
    the item at ``output_index`` and ``.done`` replaces it whole, ``response.content_part.added``
    appends a part to its ``content``, and text, refusal, function-call argument and custom
    tool input deltas are concatenated
    (https://platform.openai.com/docs/api-reference/responses-streaming).

    Raises:
        FormatError: an item event without an integer ``output_index`` and an item object, or
            a delta for an item or part that was never added, or one that is not a string;
            names the body line.
    """
    base: Any = None
    items: dict[int, dict[str, Any]] = {}
    for line, event in chunks:
        kind = event.get("type")
        at = f"{where} (server-sent event at body line {line})"
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            if isinstance(event.get("response"), dict):
                return event["response"], []
        elif kind in _LIFECYCLE:
            base = event.get("response")
        elif kind in ("response.output_item.added", "response.output_item.done"):
            index, item = event.get("output_index"), event.get("item")
            if not isinstance(index, int) or not isinstance(item, dict):
                raise fail(path, "expected an integer output_index and an item object", at)
            items[index] = item
        elif kind == "response.content_part.added":
            content = _item(items, event, path, at).setdefault("content", [])
            if not isinstance(content, list):
                raise fail(path, "a content part for an item whose content is not a list", at)
            content.append(event.get("part"))
        elif kind in _PART_DELTAS:
            content = _item(items, event, path, at).get("content")
            parts = content if isinstance(content, list) else []
            index = event.get("content_index")
            part = parts[index] if isinstance(index, int) and 0 <= index < len(parts) else None
            if not isinstance(part, dict):
                raise fail(path, f"{kind} for content part {index!r}, which was never added", at)
            _extend(part, _PART_DELTAS[kind], event, path, at)
        elif kind in _ITEM_DELTAS:
            _extend(_item(items, event, path, at), _ITEM_DELTAS[kind], event, path, at)
        elif kind == "error":
            body = _partial(base, items)
            body["error"] = {k: v for k, v in event.items() if k != "type"}
            return body, []
    warning = (
        f"the stream ends before response.completed; kept its {len(items)} output items as "
        "far as they arrived"
    )
    return _partial(base, items), [warning]


def _partial(base: Any, items: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The response a stream that did not complete amounts to: ``base`` (the
    ``response.created`` response) with the items that arrived as its ``output``."""
    body = dict(base) if isinstance(base, dict) else {}
    body["output"] = [items[index] for index in sorted(items)]
    return body


def _item(
    items: dict[int, dict[str, Any]], event: dict[str, Any], path: Path, at: str
) -> dict[str, Any]:
    """The output item an event names by ``output_index``."""
    index = event.get("output_index")
    item = items.get(index) if isinstance(index, int) else None
    if item is None:
        raise fail(
            path, f"{event.get('type')} for output item {index!r}, which was never added", at
        )
    return item


def _extend(target: dict[str, Any], name: str, event: dict[str, Any], path: Path, at: str) -> None:
    """Append an event's ``delta`` to ``target[name]`` (absent or ``None``: empty)."""
    delta, so_far = event.get("delta"), target.get(name) or ""
    if not isinstance(delta, str) or not isinstance(so_far, str):
        raise fail(path, f"expected a string delta of a string {name!r}", at)
    target[name] = so_far + delta
