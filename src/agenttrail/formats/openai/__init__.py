"""OpenAI recordings: Chat Completions and Responses API traffic, read into one session per file.

Inputs (recognised by :func:`sniff`, read by :func:`read`)::

    [{role, content, tool_calls?, tool_call_id?, name?, function_call?}, ...]   a message list
    [[message, ...], [message, ...], ...]      successive requests, no responses (ToolBench
                                               ``train_messages``)
    [{type: function_call | message | ...}, ...]   Responses API input items
    {model, messages: [...], ...}              a Chat Completions request body
    {model, input: str | [item, ...], ...}     a Responses request body
    {object: "chat.completion", choices, ...}  a response body alone (or ``object: "response"``)
    {request, response} or a list of them      recorded traffic: ``request`` is a body or
                                               ``{method, url, headers, body}``, ``response`` a
                                               body or ``{status_code, headers, body}``
    interactions: [{request: {body, uri, method, headers},      a VCR cassette (YAML or JSON;
                    response: {status: {code}, headers, body: {string}}}]   vcrpy's layout)

A response body may be JSON or the server-sent events of a stream; a stream is assembled into
the final message (:mod:`agenttrail.formats.openai._stream`; fragments are never stored).
Cassettes and ``{request, response}`` records are unpacked by
:mod:`agenttrail.formats.http.recording`. Exchanges with other endpoints (embeddings, ...) are
skipped with a warning.

Mapping (the importer conventions of docs/architecture.md):

- Every exchange appends the request's messages that are new, then the response. A Chat
  Completions request carries the whole history, so its new messages are those after the longest
  common prefix with the previous request's messages plus the previous response (compared by
  role, text and tool call ids); a request that does not extend the previous conversation has
  its differing tail appended and a warning naming the exchange. A Responses request with
  ``previous_response_id`` continues that response and all its input items are new; one without
  starts afresh (its input appended as given) unless it strictly extends the conversation so
  far, which is how a stateless client (``store: false``) resends history.
- ``system`` / ``developer`` messages → ``message`` role ``system``, actor ``system``
  (``sourceRole="developer"`` kept); Responses ``instructions`` likewise
  (``sourceField="instructions"``), once per conversation and again when they change.
  ``tool`` messages and ``*_call_output`` items → ``tool_result`` with the call id verbatim
  (``None`` when absent); legacy role ``function`` → ``tool_result`` with no id. The importer
  never invents or repairs an id: pairing is :func:`agenttrail.views.pairing.pair_tool_calls`,
  strictly by id.
- An assistant turn → one ``message`` (content ``""`` when it only called tools; ``meta`` with
  the responding model, provider ``openai``, usage, location ``remote``; ``messageId``,
  ``finishReason``; ``choice`` when the response has several) followed by one ``tool_call`` per
  call, in order, its arguments parsed into ``input`` and kept raw as ``arguments``. Responses
  items with a ``call_id`` (``function_call``, ``custom_tool_call``, ...) are the calls: id =
  ``call_id``, the item id kept as ``itemId``; ``reasoning`` and other items (server-side tool
  calls) stay on the message as ``blocks``, verbatim. A legacy ``function_call`` has id ``""``.
- Usage: Chat Completions ``prompt_tokens`` / ``completion_tokens`` /
  ``prompt_tokens_details.cached_tokens``; Responses ``input_tokens`` / ``output_tokens`` /
  ``input_tokens_details.cached_tokens``; cache writes are not reported (``None``); a response
  without ``usage`` has ``usage: None``, never zeros.
- HTTP status >= 400 → ``error`` with the provider's message and ``code`` = the status.
- ``created_at``: the response's ``created`` / ``created_at`` (Unix seconds), else its ``Date``
  header; a request's messages take their response's time.

Provider references: https://platform.openai.com/docs/api-reference/chat/create,
https://platform.openai.com/docs/api-reference/chat-streaming,
https://platform.openai.com/docs/api-reference/responses/create,
https://platform.openai.com/docs/api-reference/responses-streaming,
https://platform.openai.com/docs/guides/function-calling, and the cassette layout of vcrpy
(https://vcrpy.readthedocs.io/en/latest/advanced.html).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agenttrail.errors import FormatError
from agenttrail.formats._common import (
    ImportedSession,
    JSONValueError,
    decode_text,
    load_json,
    loads,
    timestamp_or_none,
    title_from,
)
from agenttrail.formats.http.recording import Exchange, fail, join, load_yaml, type_name
from agenttrail.formats.openai._detect import endpoint, exchanges, sniff, str_in
from agenttrail.formats.openai._stream import assemble
from agenttrail.model import NewEvent, NewSession, events

__all__ = ["NAME", "read", "sniff"]

NAME = "openai"

_PROVIDER = "openai"

_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
"""Content part types that carry readable ``text`` (Chat Completions and Responses)."""

Key = tuple[Any, ...]
"""How a message or item is compared across requests (role, text, tool call ids)."""


# --- reading -------------------------------------------------------------------------------


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read an OpenAI recording into one session (shapes and mapping in the module docstring).

    Args:
        path: the file, named in errors, warnings and the session's ``metadata.source``.
        data: its bytes.

    Returns:
        One :class:`ImportedSession` with ``id`` ``None`` (the registry derives one from the
        bytes), warnings for requests that do not extend the conversation, skipped non-chat
        endpoints and truncated streams.

    Raises:
        FormatError: not UTF-8, not JSON/YAML, not an OpenAI shape, nothing to import, or a
            field of the wrong type (a ``role`` that is not a string, ...); names the file and
            the line or field.
    """
    text = decode_text(path, data)
    if text.lstrip()[:1] in ("[", "{"):
        doc = load_json(path, data)
    else:
        doc = load_yaml(path, text)
        if not isinstance(doc, dict) or "interactions" not in doc:
            raise fail(path, "not a VCR cassette: expected a top-level 'interactions' list")
    builder = _Builder(path)
    for exchange in exchanges(doc, path):
        builder.add(exchange)
    if not builder.events:
        skipped = f" ({len(builder.warnings)} exchanges skipped)" if builder.warnings else ""
        raise fail(path, f"no messages or responses to import{skipped}")
    return [builder.session()]


class _Builder:
    """Turns exchanges into one session's events, tracking the conversation as sent."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[NewEvent] = []
        self.warnings: list[str] = []
        self.title: str | None = None
        self.model: str | None = None
        self.agent: str | None = None
        self.conversation: list[frozenset[Key]] = []
        """One set of acceptable keys per message so far (a response with several choices
        accepts any of them)."""
        self.previous: int | None = None
        """Number of the last exchange read."""
        self.by_response: dict[str, tuple[int, list[frozenset[Key]]]] = {}
        """Responses API response id → (exchange, conversation after it)."""
        self.last_response_id: str | None = None
        self.instructions: str | None = None

    # -- plumbing

    def fail(self, message: str, where: str) -> FormatError:
        return fail(self.path, message, where)

    def warn(self, exchange: Exchange, message: str) -> None:
        self.warnings.append(f"{self.path}: exchange {exchange.number}: {message}")

    def append(self, payload: dict[str, Any], key: str, time: str | None) -> None:
        self.events.append(NewEvent(payload, time, key))
        if self.title is None and payload.get("role") == "user":
            self.title = title_from(str(payload.get("content", "")))

    def session(self) -> ImportedSession:
        started = next((e.created_at for e in self.events if e.created_at), None)
        metadata: dict[str, Any] = {"format": NAME, "source": self.path.name}
        if self.model is not None:
            metadata["model"] = self.model
        new = NewSession(
            id=None, title=self.title, agent=self.agent, started=started, metadata=metadata
        )
        return ImportedSession(new, self.events, self.warnings)

    # -- one exchange

    def add(self, exchange: Exchange) -> None:
        api = self.api(exchange)
        if api is None:
            return
        if self.agent is None:
            self.agent = exchange.user_agent
        request = exchange.request
        if self.model is None and request is not None and isinstance(request.get("model"), str):
            self.model = request["model"]
        body = self.response_body(exchange)
        time = exchange.date
        if isinstance(body, dict):
            time = timestamp_or_none(body.get("created" if api == "chat" else "created_at")) or time
        if api == "chat":
            self.chat_request(exchange, time)
        else:
            self.responses_request(exchange, time)
        error = body.get("error") if isinstance(body, dict) else None
        answered = isinstance(body, dict) and bool(body.get("choices") or body.get("output"))
        if (exchange.status is not None and exchange.status >= 400) or (error and not answered):
            self.error(exchange, error, time)
        elif isinstance(body, dict) and api == "chat":
            self.chat_response(exchange, body, time)
        elif isinstance(body, dict):
            self.responses_response(exchange, body, time)
        self.previous = exchange.number

    def api(self, exchange: Exchange) -> str | None:
        """``chat`` or ``responses``; ``None`` (and a warning) for another endpoint."""
        if exchange.uri is not None:
            api = endpoint(exchange.uri)
            if api is None:
                method = f"{exchange.method} " if exchange.method else ""
                path = urlsplit(exchange.uri).path
                self.warn(exchange, f"{method}{path} is not a conversation endpoint; skipped")
            return api
        request = exchange.request or {}
        if "messages" in request:
            return "chat"
        if "input" in request:
            return "responses"
        response = exchange.response
        if isinstance(response, dict):
            if "choices" in response:
                return "chat"
            if "output" in response:
                return "responses"
        if isinstance(response, str):
            if '"chat.completion' in response:
                return "chat"
            if '"response.' in response or '"object": "response"' in response:
                return "responses"
        raise self.fail(
            "expected a Chat Completions (messages) or Responses (input) request",
            exchange.request_where or exchange.where,
        )

    def response_body(self, exchange: Exchange) -> dict[str, Any] | None:
        """The response as one mapping: JSON parsed, a stream assembled, an error page kept."""
        raw, where = exchange.response, exchange.response_where
        failed = exchange.status is not None and exchange.status >= 400
        if raw is None or isinstance(raw, dict):
            return raw
        if not isinstance(raw, str):
            raise self.fail(f"expected a JSON object or text, not {type_name(raw)}", where)
        if not raw.strip():
            return None
        if raw.lstrip().startswith(("data:", "event:", ":")):
            body, problems = assemble(raw, self.path, where)
            for problem in problems:
                self.warn(exchange, problem)
            return body
        try:
            value = loads(raw)
        except json.JSONDecodeError as e:
            if failed:  # an HTML or plain-text error page: keep its text as the message
                return {"error": {"message": raw.strip()}}
            raise self.fail(
                f"invalid JSON: {e.msg} (body line {e.lineno}, column {e.colno})", where
            ) from None
        except JSONValueError as e:
            raise self.fail(str(e), e.within(where)) from None
        if not isinstance(value, dict):
            raise self.fail(f"expected a JSON object, not {type_name(value)}", where)
        return value

    def extend(self, exchange: Exchange, keys: list[Key]) -> int:
        """How many leading messages of a request are already in the conversation."""
        common = _common_prefix(keys, self.conversation)
        if common < len(self.conversation):
            self.warn(
                exchange,
                f"the request does not extend the conversation of exchange {self.previous} "
                f"(its first {common} of {len(keys)} messages match); appended the rest as new",
            )
        return common

    def error(self, exchange: Exchange, error: Any, time: str | None) -> None:
        message = None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            message = error["message"]
        elif isinstance(error, str):
            message = error
        status = exchange.status
        code = status if status is not None and status >= 400 else None
        if code is None and isinstance(error, dict):
            code = error.get("code")
        payload = events.error(
            message or f"HTTP {status}",
            code=code,
            detail=error if isinstance(error, dict) else None,
        )
        self.append(payload, f"x{exchange.number}:error", time)

    # -- Chat Completions

    def chat_request(self, exchange: Exchange, time: str | None) -> None:
        if exchange.request is None:
            return
        where = exchange.list_where
        if where is None:
            where = join(exchange.request_where, "messages")
        messages = exchange.request.get("messages")
        if not isinstance(messages, list):
            raise self.fail(f"expected a list of messages, not {type_name(messages)}", where)
        keys = [self.chat_key(m, f"{where}[{i}]") for i, m in enumerate(messages)]
        start = self.extend(exchange, keys)
        for index in range(start, len(messages)):
            self.chat_message(
                messages[index], f"x{exchange.number}:m{index}", f"{where}[{index}]", time
            )
        self.conversation = [frozenset([k]) for k in keys]

    def chat_key(self, message: Any, where: str) -> Key:
        """Check a message's shape and give its comparison key (role, text, call ids)."""
        if not isinstance(message, dict):
            raise self.fail(f"expected a message object, not {type_name(message)}", where)
        role = message.get("role")
        if not isinstance(role, str):
            problem = "missing" if role is None else f"expected a string, not {type_name(role)}"
            raise self.fail(problem, f"{where}.role")
        for name in ("tool_call_id", "name"):
            value = message.get(name)
            if value is not None and not isinstance(value, str):
                raise self.fail(f"expected a string, not {type_name(value)}", f"{where}.{name}")
        calls = tuple((c[0], c[1]) for c in self.chat_calls(message, where))
        return (role, _comparable(message.get("content")), calls, message.get("tool_call_id"))

    def chat_calls(
        self, message: dict[str, Any], where: str
    ) -> list[tuple[str, str, Any, Any, str | None]]:
        """``(id, name, input, raw arguments, tool type)`` of each call in an assistant message."""
        found = []
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise self.fail(f"expected a list, not {type_name(calls)}", f"{where}.tool_calls")
        for j, call in enumerate(calls or []):
            at = f"{where}.tool_calls[{j}]"
            if not isinstance(call, dict):
                raise self.fail(f"expected an object, not {type_name(call)}", at)
            call_id = call.get("id")
            if call_id is not None and not isinstance(call_id, str):
                raise self.fail(f"expected a string, not {type_name(call_id)}", f"{at}.id")
            kind = call.get("type") if isinstance(call.get("type"), str) else "function"
            spec_name = kind if isinstance(call.get(kind), dict) else "function"
            spec = call.get(spec_name)
            if not isinstance(spec, dict):
                raise self.fail(f"expected an object, not {type_name(spec)}", f"{at}.{spec_name}")
            name = self.name(spec, f"{at}.{spec_name}")
            if kind == "custom":  # custom tools take free text (guides/function-calling)
                found.append((call_id or "", name, spec.get("input"), None, kind))
            else:
                parsed, raw = self.arguments(spec.get("arguments"), f"{at}.{spec_name}.arguments")
                found.append((call_id or "", name, parsed, raw, None))
        legacy = message.get("function_call")
        if legacy is not None:  # deprecated single call without an id
            at = f"{where}.function_call"
            if not isinstance(legacy, dict):
                raise self.fail(f"expected an object, not {type_name(legacy)}", at)
            parsed, raw = self.arguments(legacy.get("arguments"), f"{at}.arguments")
            found.append(("", self.name(legacy, at), parsed, raw, None))
        return found

    def name(self, spec: dict[str, Any], where: str) -> str:
        name = spec.get("name")
        if not isinstance(name, str):
            problem = "missing" if name is None else f"expected a string, not {type_name(name)}"
            raise self.fail(problem, f"{where}.name")
        return name

    def arguments(self, value: Any, where: str) -> tuple[Any, Any]:
        """``(input, raw arguments)``: a JSON string parsed when it parses (strictly:
        :func:`~agenttrail.formats._common.loads`), kept raw beside."""
        if isinstance(value, str):
            try:
                return loads(value), value
            except ValueError:  # not JSON, NaN or 1e999 included: the input is the text
                return value, value
        if value is None or isinstance(value, dict | list):
            return value, None
        raise self.fail(f"expected a JSON string of arguments, not {type_name(value)}", where)

    def chat_message(self, message: dict[str, Any], key: str, where: str, time: str | None) -> None:
        role = message["role"]
        if role == "assistant":
            self.chat_assistant(message, key, where, time)
        elif role == "tool":
            output = message.get("content")
            payload = events.tool_result(
                message.get("tool_call_id"), message.get("name"), output=output
            )
            self.append(payload, key, time)
        elif role == "function":  # legacy result: a name, never an id
            payload = events.tool_result(None, message.get("name"), output=message.get("content"))
            self.append(payload, key, time)
        else:
            self.plain_message(
                role,
                message.get("content"),
                key,
                f"{where}.content",
                time,
                name=message.get("name"),
            )

    def plain_message(
        self, role: str, content: Any, key: str, where: str, time: str | None, **extra: Any
    ) -> None:
        """A user, system, developer or unknown-role message."""
        text, blocks = self.content(content, where)
        actor = None
        if role in ("system", "developer"):
            extra["sourceRole"] = role if role == "developer" else None
            role, actor = "system", "system"
        elif role != "user":
            self.warnings.append(f"{self.path}: {where}: unknown role {role!r}, kept as given")
        self.append(events.message(role, text, actor=actor, blocks=blocks, **extra), key, time)

    def content(self, value: Any, where: str) -> tuple[str, list[Any] | None]:
        """``(text, blocks)``: texts joined; the part list kept when it holds more than one
        plain text part."""
        if value is None:
            return "", None
        if isinstance(value, str):
            return value, None
        if not isinstance(value, list):
            raise self.fail(
                f"expected a string, a list of content parts or null, not {type_name(value)}",
                where,
            )
        texts = []
        for i, part in enumerate(value):
            if not isinstance(part, dict):
                raise self.fail(
                    f"expected a content part object, not {type_name(part)}", f"{where}[{i}]"
                )
            kind = part.get("type")
            if kind is not None and not isinstance(kind, str):
                raise self.fail(f"expected a string, not {type_name(kind)}", f"{where}[{i}].type")
            if str_in(part.get("type"), _TEXT_PARTS) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        plain = not value or (len(value) == 1 and len(texts) == 1 and _plain_part(value[0]))
        return "\n".join(texts), None if plain else value

    def chat_assistant(
        self,
        message: dict[str, Any],
        key: str,
        where: str,
        time: str | None,
        meta: dict[str, Any] | None = None,
        message_id: Any = None,
        **extra: Any,
    ) -> None:
        text, blocks = self.content(message.get("content"), f"{where}.content")
        calls = self.chat_calls(message, where)
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
        self.append(payload, key, time)
        for j, (call_id, name, parsed, raw, kind) in enumerate(calls):
            call = events.tool_call(
                call_id, name, parsed, arguments=raw, messageId=message_id, toolType=kind
            )
            self.append(call, f"{key}:c{j}", time)

    def chat_response(self, exchange: Exchange, body: dict[str, Any], time: str | None) -> None:
        where = exchange.response_where
        choices = body.get("choices")
        if not isinstance(choices, list):
            raise self.fail(f"expected a list, not {type_name(choices)}", join(where, "choices"))
        if not choices:
            self.warn(exchange, "the response has no choices")
        usage = self.chat_usage(body.get("usage"), join(where, "usage"))
        model = body.get("model") if isinstance(body.get("model"), str) else None
        keys = set()
        for c, choice in enumerate(choices):
            at = join(where, f"choices[{c}]")
            if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
                raise self.fail("expected a choice with a message object", at)
            message = {"role": "assistant", **choice["message"]}
            keys.add(self.chat_key(message, f"{at}.message"))
            index = choice.get("index", c)
            meta = events.meta(
                model=model, provider=_PROVIDER, usage=usage if c == 0 else None, location="remote"
            )
            self.chat_assistant(
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
            self.conversation.append(frozenset(keys))

    def chat_usage(self, usage: Any, where: str) -> dict[str, int | None] | None:
        if usage is None:
            return None
        if not isinstance(usage, dict):
            raise self.fail(f"expected an object, not {type_name(usage)}", where)
        details = usage.get("prompt_tokens_details")
        return events.usage(
            input=self.count(usage.get("prompt_tokens"), f"{where}.prompt_tokens"),
            output=self.count(usage.get("completion_tokens"), f"{where}.completion_tokens"),
            cache_read=self.count(
                details.get("cached_tokens") if isinstance(details, dict) else None,
                f"{where}.prompt_tokens_details.cached_tokens",
            ),
        )

    def count(self, value: Any, where: str) -> int | None:
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise self.fail(f"expected a token count, not {type_name(value)}", where)

    # -- Responses API

    def responses_request(self, exchange: Exchange, time: str | None) -> None:
        request = exchange.request
        if request is None:
            return
        where = exchange.list_where
        if where is None:
            where = join(exchange.request_where, "input")
        raw = request.get("input")
        if isinstance(raw, str):
            items: list[Any] = [{"role": "user", "content": raw}]
        elif raw is None:
            items = []
        elif isinstance(raw, list):
            items = raw
        else:
            raise self.fail(f"expected a string or a list of items, not {type_name(raw)}", where)
        at = [where if isinstance(raw, str) else f"{where}[{i}]" for i in range(len(items))]
        keys = [self.item_key(item, at[i]) for i, item in enumerate(items)]
        previous = request.get("previous_response_id")
        sent = [frozenset([k]) for k in keys]
        start = 0
        if previous is not None:
            if not isinstance(previous, str):
                problem = f"expected a string, not {type_name(previous)}"
                raise self.fail(problem, join(exchange.request_where, "previous_response_id"))
            sent = self.continued(exchange, previous) + sent
        elif len(keys) > len(self.conversation) > 0 and _common_prefix(
            keys, self.conversation
        ) == len(self.conversation):
            start = len(self.conversation)  # the whole history resent (store: false)
        instructions = request.get("instructions")
        if (
            isinstance(instructions, str)
            and instructions
            and (instructions != self.instructions or (previous is None and start == 0))
        ):
            payload = events.message(
                "system", instructions, actor="system", sourceField="instructions"
            )
            self.append(payload, f"x{exchange.number}:instructions", time)
        self.instructions = instructions if isinstance(instructions, str) else None
        self.input_items(exchange, items, at, start, time)
        self.conversation = sent

    def continued(self, exchange: Exchange, previous: str) -> list[frozenset[Key]]:
        """The conversation a ``previous_response_id`` continues."""
        found = self.by_response.get(previous)
        if found is None:
            self.warn(exchange, f"previous_response_id {previous} is not in this file")
            return []
        number, conversation = found
        if previous != self.last_response_id:
            self.warn(
                exchange,
                f"continues the response of exchange {number}, not the previous exchange",
            )
        return list(conversation)

    def item_key(self, item: Any, where: str) -> Key:
        """Check a Responses item's shape and give its comparison key."""
        if not isinstance(item, dict):
            raise self.fail(f"expected an item object, not {type_name(item)}", where)
        kind = item.get("type")
        if kind is not None and not isinstance(kind, str):
            raise self.fail(f"expected a string, not {type_name(kind)}", f"{where}.type")
        item_id = item.get("id")
        if item_id is not None and not isinstance(item_id, str):
            raise self.fail(f"expected a string, not {type_name(item_id)}", f"{where}.id")
        if kind is None or kind == "message":
            role = item.get("role")
            if not isinstance(role, str):
                problem = "missing" if role is None else f"expected a string, not {type_name(role)}"
                raise self.fail(problem, f"{where}.role")
            return ("message", role, _comparable(item.get("content")))
        call_id = item.get("call_id")
        if "call_id" in item and not isinstance(call_id, str):
            raise self.fail(f"expected a string, not {type_name(call_id)}", f"{where}.call_id")
        if call_id is not None:
            return ("output" if kind.endswith("_output") else "call", call_id)
        return ("item", kind, item_id or json.dumps(item, sort_keys=True, default=str))

    def input_items(
        self,
        exchange: Exchange,
        items: list[dict[str, Any]],
        at: list[str],
        start: int,
        time: str | None,
    ) -> None:
        """Request items from ``start`` on; runs of assistant-side items become one turn."""
        group: list[tuple[int, dict[str, Any]]] = []
        prefix = f"x{exchange.number}:i"

        def flush() -> None:
            if group:
                self.assistant_items(group, f"{prefix}{group[0][0]}", at, time)
                group.clear()

        for i in range(start, len(items)):
            item = items[i]
            kind = item.get("type")
            if isinstance(kind, str) and kind.endswith("_output") and "call_id" in item:
                flush()
                result = events.tool_result(
                    item.get("call_id"),
                    output=item.get("output"),
                    itemId=item.get("id"),
                    toolType=None if kind == "function_call_output" else kind,
                )
                self.append(result, f"{prefix}{i}", time)
            elif kind in (None, "message") and item.get("role") != "assistant":
                flush()
                self.plain_message(
                    item["role"],
                    item.get("content"),
                    f"{prefix}{i}",
                    join(at[i], "content"),
                    time,
                    itemId=item.get("id"),
                )
            else:
                group.append((i, item))
        flush()

    def assistant_items(
        self,
        group: list[tuple[int, dict[str, Any]]],
        key: str,
        at: list[str],
        time: str | None,
        meta: dict[str, Any] | None = None,
        response_id: Any = None,
        **extra: Any,
    ) -> None:
        """One assistant turn from Responses items: text from ``message`` items, other
        non-call items kept as ``blocks``, then one ``tool_call`` per item with a ``call_id``."""
        texts, blocks, calls = [], [], []
        message_id, plain = None, True
        for i, item in group:
            kind = item.get("type")
            if kind in (None, "message"):
                text, parts = self.content(item.get("content"), join(at[i], "content"))
                texts += [text] if text else []
                plain = plain and parts is None
                message_id = message_id or item.get("id")
                blocks.append(item)
            elif "call_id" in item:
                calls.append((i, item))
            else:
                blocks.append(item)
        plain = (
            plain and len(blocks) <= 1 and all(b.get("type") in (None, "message") for b in blocks)
        )
        payload = events.message(
            "assistant",
            "\n".join(texts),
            meta=meta,
            blocks=None if plain else blocks,
            messageId=message_id,
            responseId=response_id,
            **extra,
        )
        self.append(payload, key, time)
        for i, item in calls:
            kind = item.get("type")
            name = item.get("name")
            if not isinstance(name, str):
                name = kind.removesuffix("_call") if isinstance(kind, str) else ""
            raw = None
            if kind == "function_call":
                parsed, raw = self.arguments(item.get("arguments"), join(at[i], "arguments"))
            elif "input" in item:  # custom_tool_call: free text
                parsed = item["input"]
            else:  # computer_call, local_shell_call, ...: the action requested
                parsed = item.get("action")
            call = events.tool_call(
                item["call_id"],
                name,
                parsed,
                arguments=raw,
                itemId=item.get("id"),
                responseId=response_id,
                toolType=None if kind == "function_call" else kind,
            )
            self.append(call, f"{key}:c{i}", time)

    def responses_response(
        self, exchange: Exchange, body: dict[str, Any], time: str | None
    ) -> None:
        where = exchange.response_where
        output = body.get("output")
        if not isinstance(output, list):
            raise self.fail(f"expected a list, not {type_name(output)}", join(where, "output"))
        at = [join(where, f"output[{i}]") for i in range(len(output))]
        keys = [self.item_key(item, at[i]) for i, item in enumerate(output)]
        usage = body.get("usage")
        if usage is not None and not isinstance(usage, dict):
            raise self.fail(f"expected an object, not {type_name(usage)}", join(where, "usage"))
        counts = None
        if isinstance(usage, dict):
            details = usage.get("input_tokens_details")
            counts = events.usage(
                input=self.count(usage.get("input_tokens"), join(where, "usage.input_tokens")),
                output=self.count(usage.get("output_tokens"), join(where, "usage.output_tokens")),
                cache_read=self.count(
                    details.get("cached_tokens") if isinstance(details, dict) else None,
                    join(where, "usage.input_tokens_details.cached_tokens"),
                ),
            )
        model = body.get("model") if isinstance(body.get("model"), str) else None
        meta = events.meta(model=model, provider=_PROVIDER, usage=counts, location="remote")
        status = body.get("status")
        self.assistant_items(
            list(enumerate(output)),
            f"x{exchange.number}:r",
            at,
            time,
            meta=meta,
            response_id=body.get("id"),
            status=status if status != "completed" else None,
            incompleteDetails=body.get("incomplete_details"),
        )
        self.conversation = self.conversation + [frozenset([k]) for k in keys]
        response_id = body.get("id")
        if isinstance(response_id, str):
            self.by_response[response_id] = (exchange.number, list(self.conversation))
            self.last_response_id = response_id


def _plain_part(part: dict[str, Any]) -> bool:
    """A text part with nothing else worth keeping (no annotations, logprobs, ...)."""
    return all(not part[k] for k in part.keys() - {"type", "text"})


def _comparable(content: Any) -> str:
    """Content as compared across requests: ``None`` is ``""``; text parts are their text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict)
        and str_in(p.get("type"), _TEXT_PARTS)
        and isinstance(p.get("text"), str)
        for p in content
    ):
        return "\n".join(p["text"] for p in content)
    return json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)


def _common_prefix(keys: list[Key], conversation: list[frozenset[Key]]) -> int:
    common = 0
    for key, accepted in zip(keys, conversation, strict=False):
        if key not in accepted:
            break
        common += 1
    return common
