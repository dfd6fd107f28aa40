"""Conversation recognition: which captured conversation a request continues.

The rule (docs/capture.md, How conversations are recognised): a conversation's *tip* is a
digest of its messages so far, as the readers compare them (role, text, tool ids: the
``prints`` of :class:`LiveConversation`), after its last exchange. A request continues the
conversation whose tip is the digest of the longest prefix of its own messages; when none is,
it starts a new conversation. A Responses API request with ``previous_response_id`` continues
the conversation that response belongs to. Only a conversation's latest tip counts: a request
that branches from an earlier point starts a new conversation.

Tips are kept in memory for the :data:`CONVERSATIONS_ENV` most recently used conversations, and
written into the idempotency key of each exchange's last event (``<reader key>@<nonce>#<tip>``), so
that after a restart the latest tip of each of that many recent captured sessions is read back
from the log (:meth:`Index.recover`), once, at the first request that continues nothing known.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agenttrail.formats._common import PrefixTips, conversation_step
from agenttrail.limits import count_limit
from agenttrail.log.store import EventLog
from agenttrail.model import NewEvent

__all__ = [
    "CONVERSATIONS_ENV",
    "DEFAULT_CONVERSATIONS",
    "Followed",
    "Index",
    "LiveConversation",
    "Resumable",
    "conversations_limit",
    "event_key",
    "last_number",
]

CONVERSATIONS_ENV = "AGENTTRAIL_CAPTURE_CONVERSATIONS"
"""The environment variable of :func:`conversations_limit`."""

DEFAULT_CONVERSATIONS = 1000
"""How many conversations capture follows at once (and how many recent captured sessions it
reads back after a restart): an agent process runs a handful at a time, a proxy in front of
many agents a few hundred; each costs a few kilobytes of prints."""

_KEY = re.compile(r"^x(\d+):.*@[0-9a-f]+#([0-9a-f]{32})$")
"""An idempotency key written by capture: the exchange number and the tip after it."""


def conversations_limit(value: int | None = None) -> int:
    """How many conversations capture follows: ``value``, else :data:`CONVERSATIONS_ENV`,
    else :data:`DEFAULT_CONVERSATIONS`.

    Raises:
        InputError: not a positive integer; names the variable.
    """
    return count_limit(
        value,
        CONVERSATIONS_ENV,
        DEFAULT_CONVERSATIONS,
        f"capture's conversation limit ({CONVERSATIONS_ENV})",
        unit="conversations",
    )


class LiveConversation(Protocol):
    """A format's reading of one conversation, exchange by exchange
    (:class:`agenttrail.formats.openai.Conversation`,
    :class:`agenttrail.formats.anthropic.Conversation`)."""

    provider: str

    def __init__(self, source: Path) -> None: ...

    @staticmethod
    def accepts(url: str) -> bool: ...

    @staticmethod
    def ended(body: str) -> bool: ...

    def add_record(self, record: dict[str, Any], number: int) -> list[NewEvent]: ...

    def prints(self, record: dict[str, Any]) -> list[Hashable]: ...

    def state(self) -> list[frozenset[Hashable]]: ...

    def resume(self, prints: list[Hashable], request: dict[str, Any]) -> None: ...

    def details(self) -> dict[str, Any]: ...

    def take_warnings(self) -> list[str]: ...


@dataclass(eq=False)
class Followed:
    """A conversation followed in memory, and the session it is written to."""

    conversation: LiveConversation
    session_id: str
    scope: str | None
    """The session given explicitly (``None``: recognised by content)."""
    tips: list[str] = field(default_factory=list)
    response_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Resumable:
    """A conversation read back from the log after a restart: its session and last exchange."""

    session_id: str
    number: int


def state_tips(state: list[frozenset[Hashable]], prefixes: PrefixTips) -> list[str]:
    """The tips a conversation's state may be continued from: one per print its last message
    may be sent back as (a response with several choices has several); the first is the one
    written into keys. ``prefixes``: its provider's, which the request just read went through
    (:meth:`Index.find`), so that only the messages it did not have are hashed."""
    if not state:
        return []
    history = [next(iter(a)) if len(a) == 1 else min(a, key=repr) for a in state[:-1]]
    before = prefixes.digests(history)
    digest = before[-1] if before else prefixes.start
    return [conversation_step(digest, p).hex()[:32] for p in sorted(state[-1], key=repr)]


def event_key(key: str | None, nonce: str, tip: str) -> str:
    """The idempotency key an exchange's last event is stored under: the reader's key (which
    names the exchange's number), a nonce unique to the exchange (two processes writing one
    session never share a key), and the conversation's tip after the exchange."""
    return f"{key or 'x0:event'}@{nonce}#{tip}"


class Index:
    """The conversations followed, by tip, in least-recently-used order (at most ``limit``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.tips: dict[tuple[str | None, str], Followed | Resumable] = {}
        self.by_response: dict[str, Followed] = {}
        self.recent: OrderedDict[int, Followed] = OrderedDict()
        self.recovered = False
        self._prefixes: dict[str, PrefixTips] = {}
        """Each provider's prefix digests of the last history seen: a tool loop's next request
        repeats it, and only what it adds is hashed."""

    def find(
        self, scope: str | None, provider: str, prints: list[Hashable]
    ) -> tuple[Followed | Resumable | None, int]:
        """The conversation a request with ``prints`` continues and how many of its prints are
        already in it; ``(None, 0)`` when it continues none."""
        tips = self._prefix_tips(provider)(prints)
        for k in range(len(tips), 0, -1):
            found = self.tips.get((scope, tips[k - 1]))
            if found is not None:
                return found, k
        return None, 0

    def follow(
        self,
        followed: Followed,
        provider: str,
        response_ids: Iterable[str],
        retried: list[Hashable] | None = None,
    ) -> str:
        """Register ``followed``'s state after an exchange (its earlier tips dropped) and the
        responses it read; returns the tip its events' keys carry. ``retried``: the prints
        of the exchange's request when its answer was cut short (a stream broken off or ended
        by an error): the same request sent again continues the conversation too, as a
        retry after a 500 or a timeout does (its state never got past the request)."""
        for tip in followed.tips:
            self.tips.pop((followed.scope, tip), None)
        prefixes = self._prefix_tips(provider)
        followed.tips = state_tips(followed.conversation.state(), prefixes)
        if retried:
            followed.tips.append(prefixes(retried)[-1])
        for tip in followed.tips:
            self.tips[(followed.scope, tip)] = followed
        for response_id in response_ids:
            self.by_response[response_id] = followed
            followed.response_ids.append(response_id)
        self.recent[id(followed)] = followed
        self.recent.move_to_end(id(followed))
        while len(self.recent) > self.limit:
            _, oldest = self.recent.popitem(last=False)
            self.forget(oldest)
        return followed.tips[0] if followed.tips else "0" * 32

    def _prefix_tips(self, provider: str) -> PrefixTips:
        prefixes = self._prefixes.get(provider)
        if prefixes is None:
            prefixes = self._prefixes[provider] = PrefixTips(provider)
        return prefixes

    def forget(self, followed: Followed) -> None:
        """Stop following ``followed`` (evicted, or its state no longer matches the log)."""
        for tip in followed.tips:
            if self.tips.get((followed.scope, tip)) is followed:
                del self.tips[(followed.scope, tip)]
        for response_id in followed.response_ids:
            if self.by_response.get(response_id) is followed:
                del self.by_response[response_id]
        self.recent.pop(id(followed), None)

    def recover(self, store: EventLog) -> dict[str, int]:
        """Read back the latest tip of the most recent captured sessions (at most ``limit``),
        once; returns the last exchange number of each session read.

        Their tips are registered both for content recognition and for the session given
        explicitly, as a restarted agent may do either.
        """
        self.recovered = True
        numbers: dict[str, int] = {}
        captured = [s for s in store.sessions() if s.metadata.get("source") == "capture"]
        for session in captured[-self.limit :]:
            keys = store.event_keys(session.id)
            for key, _ in reversed(keys):
                match = _KEY.match(key)
                if match is None:
                    continue
                number, tip = int(match.group(1)), match.group(2)
                numbers[session.id] = number
                resumable = Resumable(session.id, number)
                self.tips.setdefault((None, tip), resumable)
                self.tips.setdefault((session.id, tip), resumable)
                break
        return numbers


def last_number(keys: list[tuple[str, int]]) -> int:
    """The highest exchange number in a captured session's keys (0 when none)."""
    numbers = [int(m.group(1)) for key, _ in keys if (m := _KEY.match(key))]
    return max(numbers, default=0)
