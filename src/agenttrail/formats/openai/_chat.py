"""Chat Completions exchanges: request messages and response choices, read into events.

A request carries the whole history, so its new messages are those after the longest common
prefix with the conversation so far (the previous request's messages and the previous
response; :meth:`agenttrail.formats.openai._builder.Builder.extend`). Shapes and mapping: the
docstring of :mod:`agenttrail.formats.openai`; the API:
https://platform.openai.com/docs/api-reference/chat/create.
"""

from __future__ import annotations

from typing import Any

from agenttrail.formats.http.recording import Exchange, join, type_name
from agenttrail.formats.openai._builder import PROVIDER, Builder, Key, comparable
from agenttrail.formats.openai._detect import decoded_message
from agenttrail.model import events
from agenttrail.providers import openai

__all__ = ["ChatCompletions"]

Call = tuple[str | None, str, Any, Any, str | None]
"""``(id, name, input, raw arguments, tool type)`` of one call in an assistant message; the id
is ``None`` for a legacy ``function_call``, which has none."""


class ChatCompletions:
    """Reads Chat Completions bodies into the session ``builder`` holds."""

    created_field = "created"
    """A ``chat.completion``'s time: Unix seconds."""

    def __init__(self, builder: Builder) -> None:
        self.builder = builder

    def request(self, exchange: Exchange, time: str | None) -> None:
        """Append the request's messages that are not yet in the conversation."""
        if exchange.request is None:
            return
        messages, where, keys = self.keyed_messages(exchange)
        start = self.builder.extend(exchange, keys, time)
        for index in range(start, len(messages)):
            self.message(messages[index], f"x{exchange.number}:m{index}", f"{where}[{index}]", time)
        self.builder.conversation = [frozenset([k]) for k in keys]

    def keyed_messages(self, exchange: Exchange) -> tuple[list[Any], str, list[Key]]:
        """The request's messages, the field path of their list, and each message's comparison
        key (:meth:`key`).

        Raises:
            FormatError: ``messages`` is not a list, or a message is malformed.
        """
        where = exchange.list_where
        if where is None:
            where = join(exchange.request_where, "messages")
        messages = (exchange.request or {}).get("messages")
        if not isinstance(messages, list):
            raise self.builder.fail(
                f"expected a list of messages, not {type_name(messages)}", where
            )
        messages = [decoded_message(m) for m in messages]
        return messages, where, [self.key(m, f"{where}[{i}]") for i, m in enumerate(messages)]

    def key(self, message: Any, where: str) -> Key:
        """Check a message's shape and give its comparison key (role, text, call ids)."""
        if not isinstance(message, dict):
            raise self.builder.fail(
                f"expected a message object (or one encoded as a JSON string), "
                f"not {type_name(message)}",
                where,
            )
        role = message.get("role")
        if not isinstance(role, str):
            problem = "missing" if role is None else f"expected a string, not {type_name(role)}"
            raise self.builder.fail(problem, f"{where}.role")
        for name in ("tool_call_id", "name"):
            value = message.get(name)
            if value is not None and not isinstance(value, str):
                raise self.builder.fail(
                    f"expected a string, not {type_name(value)}", f"{where}.{name}"
                )
        calls: tuple[tuple[str | None, str], ...] = ()
        if "tool_calls" in message or "function_call" in message:  # most messages make none
            calls = tuple((c[0], c[1]) for c in self.calls(message, where, parse=False))
        return (role, comparable(message.get("content")), calls, message.get("tool_call_id"))

    def calls(self, message: dict[str, Any], where: str, *, parse: bool = True) -> list[Call]:
        """``(id, name, input, raw arguments, tool type)`` of each call in an assistant message;
        ``parse`` False: the arguments' JSON not parsed (input ``None``), for :meth:`key`,
        which reads the ids and names only, for every message of every request."""
        found: list[Call] = []
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise self.builder.fail(
                f"expected a list, not {type_name(calls)}", f"{where}.tool_calls"
            )
        for j, call in enumerate(calls or []):
            at = f"{where}.tool_calls[{j}]"
            if not isinstance(call, dict):
                raise self.builder.fail(f"expected an object, not {type_name(call)}", at)
            call_id = call.get("id")
            if call_id is not None and not isinstance(call_id, str):
                raise self.builder.fail(f"expected a string, not {type_name(call_id)}", f"{at}.id")
            kind = call.get("type") if isinstance(call.get("type"), str) else "function"
            spec_name = kind if isinstance(call.get(kind), dict) else "function"
            spec = call.get(spec_name)
            if not isinstance(spec, dict):
                raise self.builder.fail(
                    f"expected an object, not {type_name(spec)}", f"{at}.{spec_name}"
                )
            name = self.name(spec, f"{at}.{spec_name}")
            if kind in openai.CUSTOM_TOOL_TYPES:  # free text (guides/function-calling)
                found.append((call_id or "", name, spec.get("input"), None, kind))
            else:
                parsed, raw = self.builder.arguments(
                    spec.get("arguments"), f"{at}.{spec_name}.arguments", parse=parse
                )
                found.append((call_id or "", name, parsed, raw, None))
        legacy = message.get("function_call")
        if legacy is not None:  # deprecated single call without an id
            at = f"{where}.function_call"
            if not isinstance(legacy, dict):
                raise self.builder.fail(f"expected an object, not {type_name(legacy)}", at)
            parsed, raw = self.builder.arguments(
                legacy.get("arguments"), f"{at}.arguments", parse=parse
            )
            found.append((None, self.name(legacy, at), parsed, raw, None))
        return found

    def name(self, spec: dict[str, Any], where: str) -> str:
        """A call's ``name``, which must be a string."""
        name = spec.get("name")
        if not isinstance(name, str):
            problem = "missing" if name is None else f"expected a string, not {type_name(name)}"
            raise self.builder.fail(problem, f"{where}.name")
        return name

    def message(self, message: dict[str, Any], key: str, where: str, time: str | None) -> None:
        """One request message: an assistant turn, a tool result, or a plain message."""
        role = message["role"]
        if role == "assistant":
            self.assistant(message, key, where, time)
        elif role == "tool":
            output = message.get("content")
            payload = events.tool_result(
                message.get("tool_call_id"), message.get("name"), output=output
            )
            self.builder.append(payload, key, time)
        elif role == "function":  # legacy result: a name, never an id
            name = message.get("name")
            pending = self.builder.legacy_call
            self.builder.legacy_call = None  # the next function message answers, or none does
            answered = pending if pending is not None and pending[0] == name else None
            payload = events.tool_result(
                answered[1] if answered else None,
                name,
                output=message.get("content"),
                pairedBy=openai.LEGACY_PAIRING if answered else None,
            )
            self.builder.append(payload, key, time)
        else:
            self.builder.plain_message(
                role,
                message.get("content"),
                key,
                f"{where}.content",
                time,
                name=message.get("name"),
            )

    def assistant(
        self,
        message: dict[str, Any],
        key: str,
        where: str,
        time: str | None,
        meta: dict[str, Any] | None = None,
        message_id: Any = None,
        **extra: Any,
    ) -> None:
        """An assistant message, then one ``tool_call`` per call in it."""
        text, blocks = self.builder.content(message.get("content"), f"{where}.content")
        calls = self.calls(message, where)
        payload = events.message(
            "assistant",
            text,
            meta=meta,
            blocks=blocks,
            messageId=message_id,
            refusal=message.get("refusal"),
            name=message.get("name"),
            audio=message.get("audio"),
            **extra,
        )
        self.builder.append(payload, key, time)
        self.builder.legacy_call = None  # a legacy call is answered before the model speaks again
        for j, (call_id, name, parsed, raw, kind) in enumerate(calls):
            paired_by = None
            if call_id is None:  # a legacy function_call: the id is the call's seq-to-be
                call_id = f"legacy_call_{len(self.builder.events) + 1}"
                paired_by = openai.LEGACY_PAIRING
                if extra.get("choice") is None:  # one of several choices answers ambiguously
                    self.builder.legacy_call = (name, call_id)
            call = events.tool_call(
                call_id,
                name,
                parsed,
                arguments=raw,
                messageId=message_id,
                toolType=kind,
                pairedBy=paired_by,
            )
            self.builder.append(call, f"{key}:c{j}", time)

    def response(self, exchange: Exchange, body: dict[str, Any], time: str | None) -> None:
        """Append each choice: an assistant message, then its tool calls."""
        where = exchange.response_where
        choices = self.builder.list_field(body, "choices", where)
        if not choices:
            self.builder.warn(exchange, "the response has no choices")
        usage, raw = self.builder.usage(
            body.get("usage"),
            join(where, "usage"),
            "prompt_tokens",
            "prompt_tokens_details",
            "completion_tokens",
        )
        model = body.get("model") if isinstance(body.get("model"), str) else None
        keys = set()
        for c, choice in enumerate(choices):
            at = join(where, f"choices[{c}]")
            if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
                raise self.builder.fail("expected a choice with a message object", at)
            message = {"role": "assistant", **choice["message"]}
            keys.add(self.key(message, f"{at}.message"))
            index = choice.get("index", c)
            meta = events.meta(
                model=model,
                provider=PROVIDER,
                usage=usage if c == 0 else None,
                usage_raw=raw if c == 0 else None,
                location="remote",
            )
            self.assistant(
                message,
                f"x{exchange.number}:r" if c == 0 else f"x{exchange.number}:r{c}",
                f"{at}.message",
                time,
                meta=meta,
                message_id=body.get("id"),
                finishReason=choice.get("finish_reason"),
                choice=index if len(choices) > 1 else None,
            )
        if keys:
            self.builder.conversation.append(frozenset(keys))
