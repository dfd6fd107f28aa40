"""The turn lease a live agent holds while a turn runs: taken, renewed while it lives, given back.

A turn holds its session's turn lock (docs/server.md, The turn lock) as a lease with an expiry
kept in the database. The recorder's turn renews it on a daemon thread of its own every third of
its length, so a long tool call or a slow model keeps it, whatever the agent's own thread is
doing; when the agent dies the renewals stop with it and the lease runs out within one length
(seconds). A restarted agent with the same holder identity takes its own abandoned lease over at
once (``acquire_turn(take_over=True)``) instead of waiting for it.
"""

from __future__ import annotations

import os
import threading

from agenttrail.errors import AgentTrailError, InputError, TurnInFlight
from agenttrail.log.redact import redacting_logger
from agenttrail.log.store import TurnLease, TurnLocks

__all__ = [
    "DEFAULT_TURN_LEASE_S",
    "MAX_TURN_LEASE_S",
    "MIN_TURN_LEASE_S",
    "TurnLeaseKeeper",
    "turn_lease_seconds",
]

logger = redacting_logger(__name__)

DEFAULT_TURN_LEASE_S = 10.0
"""How long a turn's lease runs without a renewal (seconds). Renewed every third of it, so two
renewals in a row may fail (a busy database) before it lapses; and a crashed agent's lock is
free again within 10 s, not minutes."""

MIN_TURN_LEASE_S = 1.0
"""Shortest lease accepted (seconds): a renewal every third of it must fit a database round
trip and a wait for SQLite's write lock."""

MAX_TURN_LEASE_S = 3600.0
"""Longest lease accepted (seconds), as for ``POST /v1/sessions/{id}/turns``."""

LEASE_ENV = "AGENTTRAIL_TURN_LEASE_S"
"""The environment variable that sets the lease length when the recorder is not given one."""


def turn_lease_seconds(lease_s: float | None = None) -> float:
    """The turn lease length in seconds: ``lease_s``, else ``AGENTTRAIL_TURN_LEASE_S``, else
    :data:`DEFAULT_TURN_LEASE_S`.

    Raises:
        InputError: the value is not a number from :data:`MIN_TURN_LEASE_S` to
            :data:`MAX_TURN_LEASE_S`, naming where it came from.
    """
    where = "Recorder lease_s"
    if lease_s is None:
        raw = os.environ.get(LEASE_ENV)
        if raw is None:
            return DEFAULT_TURN_LEASE_S
        where = f"{LEASE_ENV}={raw!r}"
        try:
            lease_s = float(raw)
        except ValueError:
            raise InputError(f"{where} is not a number of seconds") from None
    if not MIN_TURN_LEASE_S <= lease_s <= MAX_TURN_LEASE_S:  # NaN fails this too
        raise InputError(
            f"{where}: a turn lease of {lease_s:g} s is outside the limits "
            f"{MIN_TURN_LEASE_S:g} to {MAX_TURN_LEASE_S:g} s"
        )
    return float(lease_s)


class TurnLeaseKeeper:
    """Holds one turn's lease on a session's turn lock while the turn runs.

    Args:
        store: the log whose turn lock it takes.
        session_id: the session.
        turn_id: the turn the lease names.
        holder: the holder's identity; a lease of the same holder is taken over.
        lease_s: the lease length (seconds), renewed every third of it.
    """

    def __init__(
        self, store: TurnLocks, session_id: str, *, turn_id: str, holder: str, lease_s: float
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.turn_id = turn_id
        self.holder = holder
        self.lease_s = lease_s
        self.lost: str | None = None
        """Why renewing stopped before the turn ended (another turn took the lock), or
        ``None`` while the lease is held."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def take(self) -> TurnLease:
        """Take the lock (or take over this holder's own abandoned lease) and start renewing.

        Raises:
            TurnInFlight: another holder's turn holds a lease that has not expired.
            SessionNotFound: no such session.
        """
        lease = self._acquire(take_over=True)
        self._thread = threading.Thread(
            target=self._renew, name=f"agenttrail-lease-{self.turn_id}", daemon=True
        )
        self._thread.start()
        return lease

    def give_back(self) -> None:
        """Stop renewing and release the lock (a no-op when another turn holds it now)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.store.release_turn(self.session_id, self.turn_id)

    def _acquire(self, *, take_over: bool) -> TurnLease:
        return self.store.acquire_turn(
            self.session_id,
            turn_id=self.turn_id,
            holder=self.holder,
            ttl_s=self.lease_s,
            take_over=take_over,
        )

    def _renew(self) -> None:
        # A renewal never takes over: if another turn holds the lock now, it took it from us
        # (this lease lapsed, or a turn of the same holder started), and it keeps it.
        while not self._stop.wait(self.lease_s / 3):
            try:
                self._acquire(take_over=False)
            except TurnInFlight as e:
                self.lost = str(e)
                logger.warning("turn lease lost: %s", e)
                return
            except AgentTrailError as e:  # the database is unreachable: try again next time
                logger.warning("turn lease of %s not renewed: %s", self.turn_id, e)
