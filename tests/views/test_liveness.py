"""When a session counts as live (agenttrail.views.liveness): a turn in flight, or an event
written less than RECENT_S ago, and never once it has ended."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agenttrail.views.liveness import RECENT_S, is_live

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(
    ("last", "ended", "writing", "live"),
    [
        (_ago(1), False, False, True),
        (_ago(RECENT_S - 1), False, False, True),
        (_ago(RECENT_S), False, False, False),  # five minutes is no longer recent
        (_ago(86400 * 300), False, False, False),  # an import of an old session
        (_ago(86400 * 300), False, True, True),  # a turn holds the lock
        (None, False, True, True),  # an empty session whose first turn runs
        (None, False, False, False),
        (_ago(1), True, False, False),  # ended, however recently
        (_ago(1), True, True, False),
    ],
)
def test_is_live(last: str | None, ended: bool, writing: bool, live: bool) -> None:
    assert is_live(last_event_at=last, ended=ended, writing=writing, now=NOW) is live
