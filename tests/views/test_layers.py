"""The way out never goes around the read side: views/ and evidence/ read the log through
``agenttrail.model.LogReader`` (and ``agenttrail.log.chain.ChainReader`` where the chain is
checked), never through the store or a database driver (docs/architecture.md, Layer rules).
A source scan, so that a new import of the store fails here rather than in a review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "agenttrail"
READERS = ("views", "evidence")
"""Packages that only read the log."""
FORBIDDEN = ("agenttrail.log.store", "sqlite3", "psycopg")
"""Modules they must not import (nor any module below them)."""


def _imported(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


_MODULES = sorted(p for package in READERS for p in (PACKAGE / package).rglob("*.py"))


@pytest.mark.parametrize("path", _MODULES, ids=[str(p.relative_to(PACKAGE)) for p in _MODULES])
def test_readers_of_the_log_do_not_import_the_store_or_a_driver(path: Path) -> None:
    found = [
        name
        for name in _imported(path)
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN)
    ]
    assert found == [], f"{path.relative_to(ROOT)} imports {', '.join(sorted(set(found)))}"


def test_the_scan_sees_an_import_of_the_store(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from agenttrail.log import store\nimport psycopg.sql\n"
        "if TYPE_CHECKING:\n    from agenttrail.log.store.sqlite import SQLiteStore\n"
    )
    assert _imported(sample) == [
        "agenttrail.log",
        "agenttrail.log.store",
        "psycopg.sql",
        "agenttrail.log.store.sqlite",
        "agenttrail.log.store.sqlite.SQLiteStore",
    ]
    assert len(_MODULES) > 10  # the packages were found
