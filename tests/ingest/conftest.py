"""Fixtures of the tests that drive the real provider clients against a loopback upstream
replaying provider traffic (tests/ingest/_upstream.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ingest._upstream import Upstream, upstream


@pytest.fixture(scope="module")
def server() -> Iterator[Upstream]:
    """One loopback upstream for a test module."""
    yield from upstream()


@pytest.fixture
def up(server: Upstream) -> Iterator[Upstream]:
    """The module's upstream with no reply scripted and no request seen yet."""
    server.replies.clear()
    server.requests.clear()
    yield server
