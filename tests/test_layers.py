"""The layer rules of docs/architecture.md, checked by reading the source (like Inspect's
test of its event discriminator): a change that reaches across a layer fails here, naming the
file, the line and the rule, instead of slowly bending the layout."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "agenttrail"

MAX_MODULE_LINES = 600
"""Longest module outside server/static (docs/architecture.md): one reason to change each."""

MAX_CLASS_LINES = 300
"""Longest class body."""


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str | None = None) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every import in the module at ``path`` (named ``name``, by
    default its name under src/), relative ones resolved; type-checking imports included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = name or _name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            yield node.lineno, base
            for alias in node.names:  # `from agenttrail.log import store`
                yield node.lineno, f"{base}.{alias.name}"


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _violations(packages: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in _modules():
        name = _name(path)
        if not any(_within(name, p) for p in packages):
            continue
        for line, module in _imports(path):
            for banned in forbidden:
                if _within(module, banned):
                    where = path.relative_to(ROOT)
                    found.append(f"{where}:{line}: imports {module} ({banned} is off limits)")
    return found


def test_model_and_codec_import_nothing_above_them() -> None:
    above = tuple(
        f"agenttrail.{p}"
        for p in (
            "log",
            "ingest",
            "formats",
            "providers",
            "replay",
            "views",
            "evidence",
            "server",
            "cli",
        )
    )
    assert _violations(("agenttrail.model", "agenttrail.codec"), above) == []


def test_only_the_store_speaks_sql() -> None:
    drivers = ("sqlite3", "psycopg", "psycopg_pool")
    found = [
        v
        for v in _violations(("agenttrail",), drivers)
        if not v.startswith("src/agenttrail/log/store/")
    ]
    assert found == []
    sql = re.compile(r"\b(SELECT|INSERT INTO|UPDATE|DELETE FROM|CREATE TABLE)\b [a-z_(*]")
    issued = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in _modules()
        if "log/store" not in path.as_posix()
        for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if sql.search(text) and not text.lstrip().startswith("#")
    ]
    assert issued == []


def test_the_log_imports_nothing_above_it() -> None:
    above = tuple(
        f"agenttrail.{p}"
        for p in ("ingest", "formats", "replay", "views", "evidence", "server", "cli")
    )
    assert _violations(("agenttrail.log",), above) == []


def test_outputs_and_evidence_never_import_the_store_or_the_ways_in() -> None:
    packages = (
        "agenttrail.formats",
        "agenttrail.replay",
        "agenttrail.views",
        "agenttrail.evidence",
    )
    assert _violations(packages, ("agenttrail.log.store", "agenttrail.ingest")) == []


def test_providers_are_vocabulary_only() -> None:
    others = tuple(
        f"agenttrail.{p}"
        for p in (
            "model",
            "log",
            "ingest",
            "formats",
            "replay",
            "views",
            "evidence",
            "server",
            "cli",
        )
    )
    assert _violations(("agenttrail.providers",), others) == []


def test_the_types_importers_build_live_in_the_model() -> None:
    from agenttrail import model
    from agenttrail.log import store

    for name in ("NewEvent", "NewSession", "Session", "NewTrace", "TraceRow"):
        assert getattr(model, name).__module__.startswith("agenttrail.model."), name
        assert not hasattr(store, name) or getattr(store, name) is getattr(model, name)


def test_the_scan_sees_every_kind_of_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from agenttrail.log import store\nimport psycopg.sql\nfrom ..ingest import importer\n"
        "if TYPE_CHECKING:\n    from agenttrail.log.store.sqlite import SQLiteStore\n"
    )
    found = dict((module, line) for line, module in _imports(sample, "agenttrail.views.sample"))
    assert found["agenttrail.log.store"] == 1
    assert found["psycopg.sql"] == 2
    assert found["agenttrail.ingest.importer"] == 3
    assert found["agenttrail.log.store.sqlite"] == 5


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_and_classes_stay_small(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") <= MAX_MODULE_LINES, f"{path.name}: over {MAX_MODULE_LINES} lines"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            size = node.end_lineno - node.lineno + 1
            assert size <= MAX_CLASS_LINES, f"class {node.name}: {size} lines"
