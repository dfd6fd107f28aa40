"""Shared fixtures: real SQLite files in tmp dirs, the third-party data folder, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenttrail.store import LogStore, open_store

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AGENTTRAIL_SHARED") or ROOT / ".." / "shared").resolve()
"""Third-party data and vectors, read in place (never copied into the repo): the ``shared``
folder beside the checkout, or ``$AGENTTRAIL_SHARED``."""
REALDATA = SHARED / "realdata"
VECTORS = SHARED / "vectors"


def pytest_configure(config: pytest.Config) -> None:
    if not (SHARED / "realdata" / "SOURCES.md").is_file():
        raise pytest.UsageError(
            f"third-party test data not found at {SHARED}: the tests read ../shared/realdata "
            "and ../shared/vectors beside the checkout; set AGENTTRAIL_SHARED to their folder"
        )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A path for a fresh SQLite log file."""
    return tmp_path / "agenttrail.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[LogStore]:
    """A real SQLite log, closed after the test."""
    opened = open_store(db_path)
    try:
        yield opened
    finally:
        opened.close()


def run_cli(
    *args: str, cwd: Path | None = None, input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real ``agenttrail`` command in a subprocess; returns its exit code and output."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agenttrail.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        input=input,
        env=full_env,
        check=False,
    )
