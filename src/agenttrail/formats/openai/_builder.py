"""What reading Chat Completions and Responses exchanges shares: the session being built, the
conversation as sent so far, errors, and the content, argument and count rules of both APIs.

:class:`Builder` walks the exchanges of a recording (:func:`agenttrail.formats.openai.read`);
for each it picks the API part that reads its bodies (:mod:`._chat`, :mod:`._responses`),
which append their events through it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from agenttrail.errors import FormatError
from agenttrail.formats._common import (
    exchange_digest,
    import_warning,
    is_json,
    loads,
    recorded_again,
    timestamp_or_none,
    title_from,
)
from agenttrail.formats.http.recording import Exchange, fail, join, parse_json_body, type_name
from agenttrail.formats.openai._detect import endpoint, str_in
from agenttrail.formats.openai._stream import assemble
from agenttrail.model import NewEvent, events
from agenttrail.providers import openai

__all__ = ["PROVIDER", "Api", "Builder", "Key", "common_prefix", "comparable"]

PROVIDER = "openai"
"""``meta.provider`` of every response."""

Key = tuple[Any, ...]
"""How a message or item is compared across requests (role, text, tool call ids)."""


class Api(Protocol):
    """One API's part of the reading: its request and response bodies."""

    created_field: str
    """The response field with its time (Unix seconds)."""

    def request(self, exchange: Exchange, time: str | None) -> None:
        """Append the request's messages (or items) that are new to the conversation."""

    def response(self, exchange: Exchange, body: dict[str, Any], time: str | None) -> None:
        """Append the response: the assistant turn and its tool calls."""


class Builder:
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
        self.response_ids: dict[str, str] = {}
        """The ids of the responses read so far: a response recorded again is imported once."""
        self.legacy_call: tuple[str, str] | None = None
        """``(name, synthetic id)`` of the legacy ``function_call`` that the next role
        ``function`` message answers (:data:`agenttrail.providers.openai.LEGACY_PAIRING`)."""

    # -- plumbing

    def fail(self, message: str, where: str) -> FormatError:
        """The :class:`FormatError` for this file at the field path ``where``."""
        return fail(self.path, message, where)

    def warn(self, exchange: Exchange, message: str) -> None:
        """A warning about ``exchange``, printed after the import."""
        self.warnings.append(f"{self.path}: exchange {exchange.number}: {message}")

    def append(self, payload: dict[str, Any], key: str, time: str | None) -> None:
        """Append one event; the first user message gives the title."""
        self.events.append(NewEvent(payload, time, key))
        if self.title is None and payload.get("role") == "user":
            self.title = title_from(str(payload.get("content", "")))

    # -- one exchange

    def add(self, exchange: Exchange, apis: Mapping[str, Api]) -> None:
        """Append what ``exchange`` adds to the session: the request's new messages, then the
        response (or its error; both, the response first, when a body with an answer carries
        an error); ``apis`` reads each API's bodies (``chat``, ``responses``)."""
        name = self.api(exchange)
        if name is None:
            return
        part = apis[name]
        if self.agent is None:
            self.agent = exchange.user_agent
        request = exchange.request
        if self.model is None and request is not None and isinstance(request.get("model"), str):
            self.model = request["model"]
        body = self.response_body(exchange)
        time = exchange.date
        if isinstance(body, dict):
            time = timestamp_or_none(body.get(part.created_field)) or time
        error = body.get("error") if isinstance(body, dict) else None
        answered = isinstance(body, dict) and bool(body.get("choices") or body.get("output"))
        failed = (exchange.status is not None and exchange.status >= 400) or (
            error and not answered
        )
        response_id = body.get("id") if isinstance(body, dict) and not failed else None
        digest = exchange_digest(request, body)
        if isinstance(response_id, str) and self.response_ids.get(response_id) == digest:
            # a retried recording: its request and response are already in the session
            text = recorded_again(response_id)
            self.warn(exchange, text)
            note = import_warning(f"{self.path.name}: exchange {exchange.number}: {text}")
            self.append(note, f"x{exchange.number}:again", time)
            self.previous = exchange.number
            return
        part.request(exchange, time)
        if failed:
            self.error(exchange, error, time)
        elif isinstance(body, dict):
            part.response(exchange, body, time)
            if isinstance(response_id, str):
                self.response_ids.setdefault(response_id, digest)
            if error:  # a stream ended by an error: what arrived, then the error
                self.error(exchange, error, time, incomplete=True)
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
            value = parse_json_body(raw, self.path, where)
        except FormatError:
            if failed and not is_json(raw):  # an HTML or plain-text error page: its text
                return {"error": {"message": raw.strip()}}
            raise
        if not isinstance(value, dict):
            raise self.fail(f"expected a JSON object, not {type_name(value)}", where)
        return value

    def extend(self, exchange: Exchange, keys: list[Key], time: str | None) -> int:
        """How many leading messages of a request are already in the conversation; when the
        request does not extend it and sends more, a warning and, in place, an
        ``import_warning`` annotation (the transcript then says the rest was sent so)."""
        common = common_prefix(keys, self.conversation)
        if common < len(self.conversation):
            said = (
                f"the request does not extend the conversation of exchange {self.previous} "
                f"(its first {common} of {len(keys)} messages match); appended the rest as new"
            )
            self.warn(exchange, said)
            if common < len(keys):
                text = f"{self.path.name}: exchange {exchange.number}: {said}"
                self.append(import_warning(text), f"x{exchange.number}:diverged", time)
        return common

    def error(
        self, exchange: Exchange, error: Any, time: str | None, *, incomplete: bool = False
    ) -> None:
        """An ``error`` event for a failed exchange: the provider's message, ``code`` = the
        HTTP status (else the error's own code); ``incomplete``: it cut short the answer
        stored before it, marked ``incomplete: true`` as a cut stream's error is
        (docs/capture.md, What is recorded)."""
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
            incomplete=True if incomplete else None,
        )
        self.append(payload, f"x{exchange.number}:error", time)

    # -- what both APIs' messages share

    def arguments(self, value: Any, where: str, *, parse: bool = True) -> tuple[Any, Any]:
        """``(input, raw arguments)``: a JSON string parsed when it parses (strictly:
        :func:`~agenttrail.formats._common.loads`), kept raw beside; ``parse`` False: the
        type checked only, and the input of a string ``None`` (what a comparison key needs).
        """
        if isinstance(value, str):
            if not parse:
                return None, value
            try:
                return loads(value), value
            except ValueError:  # not JSON, NaN or 1e999 included: the input is the text
                return value, value
        if value is None or isinstance(value, dict | list):
            return value, None
        raise self.fail(f"expected a JSON string of arguments, not {type_name(value)}", where)

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
            if str_in(part.get("type"), openai.TEXT_PARTS) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        plain = not value or (len(value) == 1 and len(texts) == 1 and _plain_part(value[0]))
        return "\n".join(texts), None if plain else value

    def list_field(self, body: dict[str, Any], name: str, where: str) -> list[Any]:
        """``body[name]``, which must be a list (a response's ``choices`` or ``output``)."""
        value = body.get(name)
        if not isinstance(value, list):
            raise self.fail(f"expected a list, not {type_name(value)}", join(where, name))
        return value

    def usage(
        self, usage: Any, where: str, prompt: str, details: str, output: str
    ) -> tuple[dict[str, int | None] | None, dict[str, Any] | None]:
        """``(counts, raw)``: the token usage of a response in the log's disjoint kinds, and
        the provider's usage object as reported (``None``, ``None`` when not reported).

        OpenAI counts the cached prompt tokens (``<details>.cached_tokens``) inside
        ``<prompt>`` (https://platform.openai.com/docs/guides/prompt-caching;
        https://platform.openai.com/docs/api-reference/chat/object, ``usage``;
        https://platform.openai.com/docs/api-reference/responses/object, ``usage``), so
        ``input`` is ``<prompt>`` less them and ``cache_read`` is them. Cache writes are not
        reported (``None``). A ``cached_tokens`` above ``<prompt>`` leaves ``input`` unknown.

        Raises:
            FormatError: ``usage`` is not an object, or a count is not an integer.
        """
        if usage is None:
            return None, None
        if not isinstance(usage, dict):
            raise self.fail(f"expected an object, not {type_name(usage)}", where)
        detail = usage.get(details)
        total = self.count(usage.get(prompt), f"{where}.{prompt}")
        cached = self.count(
            detail.get("cached_tokens") if isinstance(detail, dict) else None,
            f"{where}.{details}.cached_tokens",
        )
        uncached = total
        if total is not None and cached is not None:
            uncached = total - cached if cached <= total else None
        counts = events.usage(
            input=uncached,
            output=self.count(usage.get(output), f"{where}.{output}"),
            cache_read=cached,
        )
        return counts, usage

    def count(self, value: Any, where: str) -> int | None:
        """A token count as reported (``None`` when not reported)."""
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise self.fail(f"expected a token count, not {type_name(value)}", where)


def _plain_part(part: dict[str, Any]) -> bool:
    """A text part with nothing else worth keeping (no annotations, logprobs, ...)."""
    return all(not part[k] for k in part.keys() - {"type", "text"})


def comparable(content: Any) -> str:
    """Content as compared across requests: ``None`` is ``""``; text parts are their text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict)
        and str_in(p.get("type"), openai.TEXT_PARTS)
        and isinstance(p.get("text"), str)
        for p in content
    ):
        return "\n".join(p["text"] for p in content)
    return json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)


def common_prefix(keys: list[Key], conversation: list[frozenset[Key]]) -> int:
    """How many leading ``keys`` the conversation accepts, in order."""
    common = 0
    for key, accepted in zip(keys, conversation, strict=False):
        if key not in accepted:
            break
        common += 1
    return common
