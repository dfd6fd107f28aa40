"""Usage and cost: tokens by kind and money, per model call, per turn, per session, and grouped
over many sessions (``agenttrail usage``, ``show``'s header, ``sessions``, the viewer).

A model call is an event whose ``meta`` reports usage, read by the one usage rule
(:func:`agenttrail.model.usage_of`, docs/log-format.md, Usage) after the logical-session rule
(:func:`agenttrail.model.parts.whole_messages`), so that an API message stored in growing
parts is counted once. Its cost is, in order:

1. the cost the source recorded (``meta.cost``, e.g. a Langfuse export's cost details), kept
   as recorded, in its currency;
2. else the price of its tokens in the offline price table
   (:func:`agenttrail.providers.prices.price_of`) at the call's date, in US dollars;
3. else unknown: a call of a model the table does not price, or with no model named. A total
   with an unknown part says so; it is never shown as 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from functools import cache
from types import ModuleType
from typing import Any, Literal

from agenttrail.model import Event, Session, usage_of
from agenttrail.model.parts import whole_messages
from agenttrail.model.reading import USAGE_KINDS

__all__ = [
    "GROUPS",
    "NO_DAY",
    "PARTIAL_NOTE",
    "RECORDED",
    "UNPRICED",
    "Call",
    "Cost",
    "Totals",
    "calls_in",
    "calls_of",
    "recorded_cost",
    "totals_by",
    "totals_in",
    "totals_of",
    "usage_totals_of",
]

Group = Literal["session", "model", "agent", "day", "turn"]
GROUPS: tuple[Group, ...] = ("session", "model", "agent", "day", "turn")
"""What ``agenttrail usage --by`` groups calls by."""


UNPRICED = "unpriced"
"""The :attr:`Cost.source` of a cost no one knows: not recorded, and not in the price table."""

RECORDED = "recorded"
"""The :attr:`Cost.source` of a cost recorded without the name of who recorded it (a
Langfuse export's ``costDetails``)."""


@dataclass(frozen=True)
class Cost:
    """What one model call cost."""

    amount: Decimal | None
    """The amount in ``currency``; ``None`` when unknown."""
    currency: str
    """ISO 4217 code, ``USD`` for the price table."""
    source: str
    """Where the figure comes from: the recorder that wrote it (``meta.cost.source``, e.g.
    ``langfuse``) or the price table (:data:`agenttrail.providers.prices.PRICE_SOURCE`);
    :data:`UNPRICED` when unknown."""


def recorded_cost(meta: Any) -> Cost | None:
    """The cost a source recorded on an event, read from ``meta.cost``; ``None`` when there is
    none or it is not a number.

    Shape read: ``{"total": number, "currency": "USD", "source": "langfuse"}``; ``currency``
    defaults to ``USD`` and ``source`` to :data:`RECORDED`. The figure is kept as recorded.
    """
    cost = meta.get("cost") if isinstance(meta, dict) else None
    if not isinstance(cost, dict):
        return None
    total = cost.get("total")
    if not isinstance(total, int | float) or isinstance(total, bool):
        return None
    currency = cost.get("currency") if isinstance(cost.get("currency"), str) else "USD"
    source = cost.get("source") if isinstance(cost.get("source"), str) else RECORDED
    return Cost(Decimal(str(total)), str(currency), str(source))


@dataclass(frozen=True)
class Call:
    """One model call: an event whose meta reports usage."""

    session_id: str
    seq: int
    created_at: str
    """The event's ``created_at`` (RFC 3339 UTC)."""
    turn: int
    """The seq of the user message that opened the call's turn; 0 before the first."""
    agent: str | None
    """The session's agent."""
    model: str | None
    """``meta.model``, as the provider reported it."""
    tokens: dict[str, int | None]
    """``{input, output, cache_read, cache_write}`` (:func:`agenttrail.model.usage_of`)."""
    cost: Cost
    dated: bool = True
    """False when the session's source gives no times (``Session.dated``): ``created_at``
    is when the call was imported, so the call has no day."""


def _model_of(meta: dict[str, Any]) -> str | None:
    """``meta.model``, as the provider reported it; ``None`` when it names none."""
    model = meta.get("model")
    return model if isinstance(model, str) and model else None


def _call_cost(meta: dict[str, Any], tokens: dict[str, int | None], created_at: str) -> Cost:
    recorded = recorded_cost(meta)
    if recorded is not None:
        return recorded
    model = _model_of(meta)
    if model is None:
        return Cost(None, "USD", UNPRICED)
    try:
        at = datetime.fromisoformat(created_at)
    except ValueError:  # a time changed by hand (the chain names the row): no price then
        return Cost(None, "USD", UNPRICED)
    prices = _prices()
    provider = meta.get("provider")
    amount = prices.price_of(
        model,
        provider if isinstance(provider, str) else None,
        input=tokens["input"] or 0,  # a kind not reported is billed 0
        output=tokens["output"] or 0,
        cache_read=tokens["cache_read"] or 0,
        cache_write=tokens["cache_write"] or 0,
        cache_write_1h=prices.long_cache_writes(meta.get("usage_raw")),
        at=at,
    )
    return Cost(amount, "USD", prices.PRICE_SOURCE if amount is not None else UNPRICED)


@cache
def _prices() -> ModuleType:
    """:mod:`agenttrail.providers.prices`, imported on the first priced call (`sessions` and
    the CLI's start-up import this module without pricing anything) and kept: an import
    statement here cost 2 µs a call, a tenth of a second over a long session's calls."""
    from agenttrail.providers import prices

    return prices


def calls_of(session: Session, events: Iterable[Event]) -> list[Call]:
    """The model calls of one session, in reading order.

    Args:
        session: the session row (its id and agent).
        events: its events in seq order.
    """
    return list(calls_in(session, whole_messages(events)))


def calls_in(session: Session, events: Iterable[Event]) -> Iterator[Call]:
    """The model calls of events already read whole (:func:`whole_messages`, or a session
    none of whose messages is stored in parts), as they come: nothing is held.

    Args:
        session: the session row (its id and agent).
        events: its events in reading order.
    """
    turn = 0
    for event in events:
        payload = event.payload
        if event.type == "message" and event.actor == "user":
            turn = event.seq
        meta = payload.get("meta")
        tokens = usage_of(meta)
        if tokens is None or not isinstance(meta, dict):
            continue
        yield Call(
            session.id,
            event.seq,
            event.created_at,
            turn,
            session.agent,
            _model_of(meta),
            tokens,
            _call_cost(meta, tokens, event.created_at),
            session.dated,
        )


PARTIAL_NOTE = "+ ?: not every call reported it; the sum is of those that did"
"""What a ``+ ?`` after a sum of tokens means, said where one is shown."""


@dataclass
class Totals:
    """Tokens and cost summed over model calls."""

    calls: int = 0
    tokens: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(USAGE_KINDS))
    """Per kind; ``None`` for a kind no call reported (never a made-up 0)."""
    unreported: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KINDS, 0))
    """Per kind, the calls that did not report it: a sum of the others is not the whole."""
    cost: dict[str, Decimal] = field(default_factory=dict)
    """Known cost per currency."""
    unpriced: int = 0
    """Calls whose cost is unknown."""
    unpriced_models: set[str] = field(default_factory=set)
    """Models of those calls (``(no model)`` when a call names none)."""
    sources: set[str] = field(default_factory=set)
    """Where the known costs come from."""

    def add(self, call: Call) -> None:
        """Count one call."""
        self._tally(call.tokens, call.cost, call.model)

    def count(self, meta: dict[str, Any], tokens: dict[str, int | None], created_at: str) -> None:
        """Count one call from its event's ``meta``, its ``tokens`` (:func:`usage_of` of the
        meta) and ``created_at``: what :meth:`add` counts of the :class:`Call` that
        :func:`calls_in` makes of it, without making one."""
        self._tally(tokens, _call_cost(meta, tokens, created_at), _model_of(meta))

    def _tally(self, tokens: dict[str, int | None], cost: Cost, model: str | None) -> None:
        self.calls += 1
        for kind, count in tokens.items():
            if count is not None:
                self.tokens[kind] = (self.tokens[kind] or 0) + count
            else:
                self.unreported[kind] += 1
        if cost.amount is None:
            self.unpriced += 1
            self.unpriced_models.add(model or "(no model)")
            return
        self.cost[cost.currency] = self.cost.get(cost.currency, Decimal(0)) + cost.amount
        self.sources.add(cost.source)

    def token_total(self) -> int | None:
        """Every token of every kind, ``None`` when no call reported any."""
        known = [count for count in self.tokens.values() if count is not None]
        return sum(known) if known else None

    def cost_text(self) -> str:
        """``$0.0123``, ``$0.0123 + unknown`` when some calls are unpriced, ``unknown`` when
        none is priced, ``-`` when there are no calls."""
        if not self.calls:
            return "-"
        known = " + ".join(
            f"${_amount(amount)}" if currency == "USD" else f"{_amount(amount)} {currency}"
            for currency, amount in sorted(self.cost.items())
        )
        if not self.unpriced:
            return known
        return f"{known} + unknown" if known else "unknown"

    def cost_line(self) -> str:
        """:meth:`cost_text`, then where the known costs come from after a ``·``
        (``$0.0123 · genai-prices 0.2.3 (published 2026-11)``): a source names its date in
        parentheses, so the sources are not put in a second pair."""
        sources = ", ".join(sorted(self.sources))
        return f"{self.cost_text()} · {sources}" if sources else self.cost_text()

    def count_text(self, kind: str) -> str:
        """The tokens of ``kind`` as a cell shows them: ``12,345``; ``12,345 + ?`` when some
        calls did not report the kind (the sum is of those that did), as a cost says
        ``+ unknown``; ``-`` when none did."""
        count = self.tokens[kind]
        if count is None:
            return "-"
        return f"{count:,} + ?" if self.unreported[kind] else f"{count:,}"

    def partial(self) -> bool:
        """Whether a kind some calls reported was not reported by every call (a ``+ ?``)."""
        return any(self.unreported[k] for k, count in self.tokens.items() if count is not None)

    def tokens_text(self) -> str:
        """``12,345 in · 678 out · 9,000 cache read · 1,000 + ? cache write`` (kinds reported,
        :meth:`count_text`), then what ``+ ?`` means when one is there."""
        names = {"input": "in", "output": "out", "cache_read": "cache read"}
        parts = [
            f"{self.count_text(kind)} {names.get(kind, kind.replace('_', ' '))}"
            for kind, count in self.tokens.items()
            if count is not None
        ]
        said = " · ".join(parts) or "no usage reported"
        return f"{said} ({PARTIAL_NOTE})" if self.partial() else said

    def record(self) -> dict[str, Any]:
        """JSON form: ``{calls, tokens: {kind: n|null}, tokens_unknown_calls: {kind: n},
        cost: {currency: amount}|null, cost_text, cost_unknown_calls, unpriced_models,
        cost_sources}``; ``tokens_unknown_calls`` counts the calls that did not report each
        kind (its ``tokens`` sum is of the others), ``cost`` is ``null`` when no call's cost
        is known (never 0), amounts are numbers in the currency's unit, ``cost_text`` is
        :meth:`cost_text`."""
        return {
            "calls": self.calls,
            "tokens": dict(self.tokens),
            "tokens_unknown_calls": dict(self.unreported),
            "cost": {c: float(a) for c, a in sorted(self.cost.items())} or None,
            "cost_text": self.cost_text(),
            "cost_unknown_calls": self.unpriced,
            "unpriced_models": sorted(self.unpriced_models),
            "cost_sources": sorted(self.sources),
        }


def _amount(amount: Decimal) -> str:
    """An amount to six decimal places, trailing zeros dropped but two kept (``0.086664``,
    ``0.50``): a call costs fractions of a cent, which two places would show as 0."""
    whole, _, cents = f"{amount:.6f}".partition(".")
    return f"{whole}.{cents.rstrip('0').ljust(2, '0')}"


def usage_totals_of(events: Iterable[Event]) -> Totals:
    """Tokens and cost of one session (its events in seq order)."""
    return totals_in(whole_messages(events))


def totals_in(events: Iterable[Event]) -> Totals:
    """Tokens and cost of events already read whole (as :func:`calls_in` takes them), summed
    as :func:`totals_of` sums their calls, without a :class:`Call` each: a session's header
    or summary reads no call's turn or session (half the usage sum's time at 100k events)."""
    totals = Totals()
    for event in events:
        meta = event.payload.get("meta")
        if meta is not None and (tokens := usage_of(meta)) is not None:
            totals.count(meta, tokens, event.created_at)
    return totals


def totals_of(calls: Iterable[Call]) -> Totals:
    """Tokens and cost of ``calls`` summed (:func:`calls_in` streams them)."""
    totals = Totals()
    for call in calls:
        totals.add(call)
    return totals


def _key(call: Call, by: Group) -> str:
    if by == "session":
        return call.session_id
    if by == "model":
        return call.model or "(no model)"
    if by == "agent":
        return call.agent or "(no agent)"
    if by == "day":
        return call.created_at[:10] if call.dated else NO_DAY
    return f"{call.session_id}#{call.turn}"


NO_DAY = "(no date)"
"""The day of the calls of sessions whose source gives no times (``Call.dated``)."""


def totals_by(calls: Iterable[Call], by: Group) -> dict[str, Totals]:
    """Totals of calls grouped by ``by`` (:data:`GROUPS`): session id, model, the session's
    agent, the UTC day of the call (``YYYY-MM-DD``; :data:`NO_DAY` for a call of a session
    with no times) or turn (``<session id>#<seq of the user message that opened it>``); keys
    in first-seen order, days in calendar order with :data:`NO_DAY` last."""
    groups: dict[str, Totals] = {}
    for call in calls:
        groups.setdefault(_key(call, by), Totals()).add(call)
    if by != "day":
        return groups
    return dict(sorted(groups.items(), key=lambda item: (item[0] == NO_DAY, item[0])))
