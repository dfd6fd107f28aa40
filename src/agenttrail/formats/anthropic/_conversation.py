"""One Anthropic Messages conversation read exchange by exchange: the code path that import
(:func:`agenttrail.formats.anthropic.read` of recorded exchanges) and live capture
(:mod:`agenttrail.ingest.capture`) share, so that a conversation captured live is the session
its recording imports as.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agenttrail.formats.anthropic._blocks import check_messages, fingerprint, recorded_body
from agenttrail.formats.anthropic._builder import Builder
from agenttrail.formats.anthropic._exchange import read_exchange
from agenttrail.formats.http.conversation import HandsOver
from agenttrail.formats.http.sse import last_event
from agenttrail.model import NewEvent

__all__ = ["Conversation"]

_MESSAGES = re.compile(r"/messages/?$")
"""The Messages API endpoint (``/v1/messages``); ``/v1/messages/count_tokens`` and batches are
not turns."""


class Conversation(HandsOver[Builder]):
    """A Messages API conversation in progress: its message fingerprints, the system prompt
    in force, the response ids seen, and the reading of each next request/response pair.

    Args:
        source: where the exchanges come from (a recording's path, or ``capture``).
    """

    provider = "anthropic"
    """``meta.provider`` of the responses; the session's ``format`` too."""

    def __init__(self, source: Path) -> None:
        self.builder = Builder(source)

    @staticmethod
    def accepts(url: str) -> bool:
        """True for the Messages API endpoint."""
        try:
            path = urlsplit(url).path
        except ValueError:
            return False
        return _MESSAGES.search(path) is not None

    @staticmethod
    def ended(body: str) -> bool:
        """True when a streamed body (server-sent events) holds the stream's last event,
        ``message_stop`` (or an ``error``): a client may close a stream there without reading
        on to the end of the body."""
        return last_event(body) in ("message_stop", "error")

    def add_record(self, record: dict[str, Any], number: int) -> list[NewEvent]:
        """The events one ``{request: {method, url, headers, body}, response: {status_code,
        headers, body}}`` record adds (exchange ``number``, 1-based, unique in the session: it
        names the events' keys): the request's new messages, then the response or its error
        (mapping: the docstring of :mod:`agenttrail.formats.anthropic`). The events are handed
        over, not kept.

        Raises:
            FormatError: a body of the wrong shape; names the field.
        """
        read_exchange(self.builder, record, "", number)
        return self.handed_over()

    def prints(self, record: dict[str, Any]) -> list[Hashable]:
        """What identifies each message of a record's request, as the reading compares them
        across requests (role, texts, tool ids, result content).

        Raises:
            FormatError: a body of the wrong shape.
        """
        request = record.get("request") or {}
        body = recorded_body(self.builder, request.get("body"), ".request.body")
        if not isinstance(body, dict):
            return []
        messages = check_messages(self.builder, body.get("messages"), ".request.body.messages")
        return [fingerprint(m) for m in messages]

    def state(self) -> list[frozenset[Hashable]]:
        """The conversation so far: for each message, the prints it may be sent back as."""
        return [frozenset([p]) for p in self.builder.conversation]

    def resume(self, prints: list[Hashable], request: dict[str, Any]) -> None:
        """Take up a conversation whose first ``prints`` are already in the log (read in an
        earlier process), with ``request``'s system prompt in force."""
        self.builder.conversation = list(prints)
        self.builder.system = request.get("system")

    def details(self) -> dict[str, Any]:
        """What the session's fields take from the conversation: ``title``, ``agent``,
        ``model`` (``None`` when unknown)."""
        meta = self.builder.meta
        return {"title": self.builder.title, "agent": meta.get("agent"), "model": meta.get("model")}
