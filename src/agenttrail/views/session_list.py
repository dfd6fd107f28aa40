"""Which sessions a list shows: filters and pages, the same for ``agenttrail sessions`` and
``GET /v1/sessions`` (docs/server.md, Sessions).

Filters on the session row (agent, user, start date) are read from the rows; those on the
events (a model used, an error) from the search index (:mod:`agenttrail.model.search`), which
is brought up to date first. A page is the sessions after a cursor, the id of the last session
of the previous page, so that a page does not shift when sessions are created meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date

from agenttrail.codec import normalize_timestamp
from agenttrail.errors import InputError, InvalidTimestamp
from agenttrail.model import Session
from agenttrail.model.search import SearchableLog, same_name
from agenttrail.views.search import bring_up_to_date

__all__ = [
    "SessionFilter",
    "SessionPage",
    "checked_range",
    "checked_time",
    "list_sessions",
    "start_of",
    "within",
]


@dataclass(frozen=True)
class SessionFilter:
    """Which sessions to list; a field left ``None`` (or False) does not filter."""

    agent: str | None = None
    """The session's agent, in any case (:func:`agenttrail.model.search.same_name`)."""
    user: str | None = None
    """The session's user, in any case (:func:`agenttrail.model.search.same_name`)."""
    since: str | None = None
    """Started on or after: a date (``YYYY-MM-DD``, UTC) or an RFC 3339 time."""
    until: str | None = None
    """Started on or before: a date (the whole day) or an RFC 3339 time."""
    model: str | None = None
    """A message of the session names this model (``meta.model``)."""
    errors: bool = False
    """The session holds an ``error`` event or a failed tool result."""
    limit: int | None = None
    """At most this many sessions (a page); ``None`` for all."""
    after: str | None = None
    """The id of the last session of the previous page: list the ones after it."""


@dataclass(frozen=True)
class SessionPage:
    """One page of a session list."""

    sessions: list[Session]
    next_after: str | None
    """The cursor of the next page (``after``), ``None`` on the last page."""


def start_of(session: Session) -> str | None:
    """When a session started: ``started``, else when its row was written (``created_at``);
    ``None`` for a session whose source gives no times (``Session.dated``): its row was
    written when it was imported."""
    return session.started or (session.created_at if session.dated else None)


def by_start(sessions: Iterable[Session]) -> list[Session]:
    """``sessions`` in the order the CLI lists them (``sessions``, ``usage``): by ``started``,
    oldest first, those with none last in the order given."""
    return sorted(sessions, key=lambda s: (s.started is None, s.started or ""))


def checked_time(name: str, value: str | None) -> str | None:
    """``value`` (or ``None``) as the bound of a time filter: a date (``YYYY-MM-DD``) as it
    is, which compares with the first ten characters of a stored time; an RFC 3339 time in
    the stored ``created_at`` form (:func:`agenttrail.codec.normalize_timestamp`: UTC,
    microseconds), which compares with a stored time as text. Compared as given,
    ``…T10:00:00Z`` came after ``…T10:00:00.000000Z`` (``.`` sorts before ``Z``) and an
    offset was not taken into account.

    Raises:
        InputError: it is neither; the message names the option or parameter ``name``.
    """
    if value is None:
        return None
    try:
        if len(value) == 10:
            date.fromisoformat(value)
            return value
        return normalize_timestamp(value.upper())
    except (ValueError, InvalidTimestamp):
        pass
    raise InputError(f"{name} {value!r}: expected a date (YYYY-MM-DD) or an RFC 3339 time")


def checked_range(
    since: str | None, until: str | None, names: tuple[str, str] = ("since", "until")
) -> tuple[str | None, str | None]:
    """``since`` and ``until`` checked (:func:`checked_time`, named by ``names``) and in
    order: a range that ends before it starts matches nothing, which is a slip, not a filter.

    Raises:
        InputError: either is not a date or an RFC 3339 time, or ``since`` is after ``until``.
    """
    since, until = checked_time(names[0], since), checked_time(names[1], until)
    if since is not None and until is not None:
        common = min(len(since), len(until))  # a date and a time compare by the date
        if since[:common] > until[:common]:
            raise InputError(
                f"{names[0]} {since} is after {names[1]} {until}: no session can match"
            )
    return since, until


def within(at: str | None, since: str | None, until: str | None) -> bool:
    """Whether the time ``at`` (``created_at`` form) is in the range :func:`checked_range`
    gives (a date bound compares with its day, a time bound with it); no known time
    (``None``) is in none."""
    if at is None:
        return False
    return (since is None or at[: len(since)] >= since) and (
        until is None or at[: len(until)] <= until
    )


def list_sessions(
    store: SearchableLog, ordered: Sequence[Session], where: SessionFilter
) -> SessionPage:
    """The page of ``ordered`` (sessions the caller may read, in the order to list them)
    that ``where`` asks for.

    Raises:
        InputError: ``since`` or ``until`` is not a date or an RFC 3339 time, or ``since``
            is after ``until``, ``limit`` is below 1, or ``after`` names no session of
            ``ordered``.
    """
    since, until = checked_range(where.since, where.until)
    if where.limit is not None and where.limit < 1:
        raise InputError(f"limit {where.limit}: expected 1 or more")
    chosen = list(ordered)
    if where.after is not None:
        at = next((i for i, s in enumerate(chosen) if s.id == where.after), None)
        if at is None:
            raise InputError(f"after {where.after!r}: no such session in this list")
        chosen = chosen[at + 1 :]
    if where.errors or where.model is not None:
        bring_up_to_date(store)
        flagged = store.flagged_sessions(errors=where.errors, model=where.model)
        chosen = [s for s in chosen if s.id in flagged]
    if where.agent is not None:
        chosen = [s for s in chosen if same_name(where.agent, s.agent)]
    if where.user is not None:
        chosen = [s for s in chosen if same_name(where.user, s.user)]
    if since is not None or until is not None:
        chosen = [s for s in chosen if within(start_of(s), since, until)]
    if where.limit is None or len(chosen) <= where.limit:
        return SessionPage(chosen, None)
    page = chosen[: where.limit]
    return SessionPage(page, page[-1].id)
