"""The store's roles are written once: a backend implements only its own part.

Each role of the contract (``EventLog``, ``TraceLog``, ``TurnLocks``, ``Archive``) has one
implementation, a mixin in ``src/agenttrail/log/store/_base.py``. When each backend had its own
copy of every method, one of them skipped a check the other made (SQLite's ``add_traces``
stored a trace row PostgreSQL refused). These tests keep it from happening again.
"""

from __future__ import annotations

from typing import Any

import pytest

from agenttrail.log import store as store_module
from agenttrail.log.store import LogStore
from agenttrail.log.store._base import (
    ArchiveBase,
    Backend,
    EventLogBase,
    StoreBase,
    TraceLogBase,
    TurnLocksBase,
)
from agenttrail.log.store.postgres import PostgresStore
from agenttrail.log.store.sqlite import SQLiteStore
from agenttrail.model.search import SearchIndex

_SHARED = {
    name
    for part in (Backend, EventLogBase, TraceLogBase, TurnLocksBase, ArchiveBase, StoreBase)
    for name, value in vars(part).items()
    if callable(value) and not name.startswith("__")
} - set(Backend.__abstractmethods__)


_SEARCH = {n for n in dir(SearchIndex) if not n.startswith("_")}


@pytest.mark.parametrize("store_class", [SQLiteStore, PostgresStore])
def test_a_backend_overrides_none_of_the_shared_code(store_class: type[StoreBase[Any]]) -> None:
    overridden = sorted(set(vars(store_class)) & _SHARED)
    assert overridden == [], f"{store_class.__name__} re-implements {overridden}"
    assert not store_class.__abstractmethods__  # and it implements its whole part


def test_every_role_of_the_contract_is_implemented_by_the_shared_base() -> None:
    roles = [store_module.EventLog, store_module.TraceLog, store_module.TurnLocks]
    roles += [store_module.Archive, LogStore]
    for role in roles:
        members = {n for n in dir(role) if not n.startswith("_")} - {"url", "max_payload_bytes"}
        # The search index is the backends' own (log/store/search.py), each on one base.
        missing = sorted(n for n in members if not hasattr(StoreBase, n) and n not in _SEARCH)
        assert missing == [], f"{role.__name__}: {missing}"
    for store_class in (SQLiteStore, PostgresStore):
        assert all(hasattr(store_class, n) for n in _SEARCH)
