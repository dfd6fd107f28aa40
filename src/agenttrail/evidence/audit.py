"""One verdict on a session's log: its hash chain and its trace rows, checked now.

``agenttrail verify``, the API's ``GET /v1/sessions/{id}/verify`` and the viewer's summary
badge all say whether a session's log holds; they take that answer from :func:`audit`, so the
three cannot come to differ. The chain is recomputed first (:func:`agenttrail.log.chain.verify`,
layout in docs/log-format.md); the trace rows are checked against the log only when the chain
holds (:func:`agenttrail.evidence.traces.verify_traces`), because the chain is what protects
the logged results a row is compared with (docs/evidence.md, Trace rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agenttrail.evidence.traces import verify_traces
from agenttrail.log.chain import (
    ChainReader,
    SessionVerdict,
    key_chain_problems,
    problem_place,
    trace_chain_problems,
    verify,
)

__all__ = ["SessionAudit", "audit"]


def _as_is(text: str) -> str:
    return text


@dataclass(frozen=True)
class SessionAudit:
    """What auditing one session found: the chain's verdict and the trace rows' problems."""

    session_id: str
    """The session checked."""
    events: int
    """Event rows read for the session."""
    head: str
    """The last good chain hash, hex (64 zeros when the session has no events)."""
    bad_seq: int | None
    """The first seq whose chain does not verify; ``None`` when the chain holds, and when the
    session row cannot be read (``reason`` then names its column)."""
    reason: str
    """Why ``bad_seq`` (or the session row) is bad; empty when the chain holds."""
    trace_problems: tuple[str, ...] = ()
    """One line per trace row that does not match the log, and the first trace row and
    idempotency key that do not chain; none are looked for when the chain does not hold."""
    erased: tuple[int, ...] = ()
    """The seqs whose payload was erased (``agenttrail erase``); their digests still chain."""

    @property
    def chain_ok(self) -> bool:
        """True when every event row and the session row verify."""
        return not self.reason

    @property
    def where(self) -> str:
        """Where the chain's problem is: ``seq <N>``, or ``session row``
        (:func:`agenttrail.log.chain.problem_place`)."""
        return problem_place(self.bad_seq)

    @property
    def ok(self) -> bool:
        """True when the chain holds and every trace row matches the log."""
        return self.chain_ok and not self.trace_problems

    def record(self, *, escape: Callable[[str], str] = _as_is) -> dict[str, Any]:
        """The verdict as the JSON-ready mapping the API and the viewer return::

            {"ok", "events", "head", "bad_seq", "reason", "trace_problems", "erased"}

        Args:
            escape: applied to ``reason`` and to each trace problem (the viewer passes
                :func:`agenttrail.views.safe.safe`); the text as it is by default.
        """
        return {
            "ok": self.ok,
            "events": self.events,
            "head": self.head,
            "bad_seq": self.bad_seq,
            "reason": escape(self.reason),
            "trace_problems": [escape(p) for p in self.trace_problems],
            "erased": list(self.erased),
        }


def audit(store: ChainReader, session_ids: Iterable[str] | None = None) -> list[SessionAudit]:
    """Recompute the chain of each session, then check its trace rows against the log.

    Args:
        store: the log to read.
        session_ids: the sessions to check; with ``None``, every session and every session id
            that has events but no session row (as :func:`agenttrail.log.chain.verify`).

    Returns:
        One :class:`SessionAudit` per session, in the order checked.

    Raises:
        SessionNotFound: a given session id does not exist.
        SessionRowDamaged: a given session's row cannot be read (changed by hand); with no
            ``session_ids`` such a row is that session's verdict instead.
    """
    verdicts = verify(store, session_ids)
    return [_audit(store, verdict) for verdict in verdicts]


def _audit(store: ChainReader, verdict: SessionVerdict) -> SessionAudit:
    problems = []
    if verdict.ok:
        problems = verify_traces(store, verdict.session_id)
        problems += trace_chain_problems(store, verdict.session_id)
        problems += key_chain_problems(store, verdict.session_id)
    return SessionAudit(
        session_id=verdict.session_id,
        events=verdict.events,
        head=verdict.head_hash.hex(),
        bad_seq=verdict.bad_seq,
        reason=verdict.reason,
        trace_problems=tuple(problems),
        erased=verdict.erased,
    )
