"""One OpenAI conversation read exchange by exchange: the code path that import (a recorded
file, :func:`agenttrail.formats.openai.read`) and live capture (:mod:`agenttrail.ingest.capture`)
share, so that a conversation captured live is the session its recording imports as.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any, cast

from agenttrail.formats.http.conversation import HandsOver
from agenttrail.formats.http.recording import Exchange, from_record
from agenttrail.formats.http.sse import last_event
from agenttrail.formats.openai._builder import Api, Builder, Key
from agenttrail.formats.openai._chat import ChatCompletions
from agenttrail.formats.openai._detect import endpoint
from agenttrail.formats.openai._responses import Responses, compared
from agenttrail.model import NewEvent

__all__ = ["Conversation"]

_LAST_EVENTS = frozenset(
    {"[DONE]", "error", "response.completed", "response.incomplete", "response.failed"}
)
"""What a stream's last event is (its data, or its ``type``) when the stream is whole
(https://platform.openai.com/docs/api-reference/chat-streaming,
https://platform.openai.com/docs/api-reference/responses-streaming)."""


class Conversation(HandsOver[Builder]):
    """A Chat Completions or Responses conversation as it goes: the messages (or input
    items) so far, the instructions in force and the responses read, then its next exchange.

    Args:
        source: the file or stream it is read from (``capture``), named in warnings.
    """

    provider = "openai"
    """Who serves it (``meta.provider``), also the ``format`` of its sessions."""

    def __init__(self, source: Path) -> None:
        self.builder = Builder(source)
        self.chat = ChatCompletions(self.builder)
        self.responses = Responses(self.builder)
        self.apis: dict[str, Api] = {"chat": self.chat, "responses": self.responses}

    @staticmethod
    def accepts(url: str) -> bool:
        """True for a conversation endpoint: Chat Completions or Responses."""
        return endpoint(url) is not None

    @staticmethod
    def ended(body: str) -> bool:
        """True when a streamed body (server-sent events) holds the stream's last event:
        ``data: [DONE]`` (Chat Completions) or ``response.completed`` / ``.incomplete`` /
        ``.failed`` (Responses), or an error (a Responses ``error`` event, a Chat Completions
        chunk carrying ``error``, on which the openai SDK raises). A client may close a
        stream there without reading on to the end of the body (the official clients do at
        ``[DONE]``)."""
        return last_event(body) in _LAST_EVENTS

    def add(self, exchange: Exchange) -> list[NewEvent]:
        """The events ``exchange`` adds: the request's messages that are new, then the
        response or its error (mapping: the docstring of :mod:`agenttrail.formats.openai`).

        Raises:
            FormatError: a body of the wrong shape; names the field.
        """
        start = len(self.builder.events)
        self.builder.add(exchange, self.apis)
        return self.builder.events[start:]

    def add_record(self, record: dict[str, Any], number: int) -> list[NewEvent]:
        """:meth:`add` for one ``{request: {method, url, headers, body}, response:
        {status_code, headers, body}}`` record (bodies as text), exchange ``number`` (1-based,
        unique in the session: it names the events' keys); the events are handed over (not
        kept), so a long conversation does not grow in memory."""
        start = len(self.builder.events)
        self.builder.add(from_record(record, number, "", self.builder.path), self.apis)
        return self.handed_over(start)

    def prints(self, record: dict[str, Any]) -> list[Hashable]:
        """What identifies each message (or input item) of a record's request, as the reading
        compares them across requests (role, text, tool call ids).

        Raises:
            FormatError: a body of the wrong shape.
        """
        request = record.get("request") or {}
        body, url = request.get("body"), request.get("url")
        if isinstance(body, dict) and isinstance(url, str):  # parsed already: only the request
            exchange = Exchange(0, "", request=body, request_where="request.body", uri=url)
        else:
            exchange = from_record(record, 0, "", self.builder.path)
        api = endpoint(exchange.uri or "")
        if api == "chat":
            return list(self.chat.keyed_messages(exchange)[2])
        if api == "responses":
            keys = self.responses.keyed_items(exchange)[2]
            return [keys[i] for i in compared(keys)]
        return []

    def state(self) -> list[frozenset[Hashable]]:
        """The conversation so far: for each message, the prints it may be sent back as (more
        than one for a response with several choices)."""
        return list(self.builder.conversation)

    def resume(self, prints: list[Hashable], request: dict[str, Any]) -> None:
        """Take up a conversation whose first ``prints`` are already in the log (read in an
        earlier process), with ``request``'s instructions in force."""
        self.builder.conversation = [frozenset([cast(Key, p)]) for p in prints]
        instructions = request.get("instructions")
        self.responses.instructions = instructions if isinstance(instructions, str) else None

    def details(self) -> dict[str, Any]:
        """What the session's fields take from the conversation: ``title``, ``agent``,
        ``model`` (``None`` when unknown)."""
        b = self.builder
        return {"title": b.title, "agent": b.agent, "model": b.model}
