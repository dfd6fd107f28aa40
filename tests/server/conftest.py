"""What the server tests share: a real app on a real uvicorn on loopback on each backend
(``server``); for the browser tests of the viewer, Debian's Chromium driven by Playwright and a
real uvicorn on loopback serving a fresh log (tests/server/test_viewer.py, test_markdown.py).

The browser is the distribution's Chromium, found on ``PATH``; without it the tests that take
the ``browser`` fixture are skipped, unless ``AGENTTRAIL_REQUIRE_BROWSER`` is set
(tests/_environment.py). Screenshots go to ``$AGENTTRAIL_SCREENSHOTS`` or
``<tmp>/agenttrail-screenshots``, outside the repository.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession
from agenttrail.server import create_app, mint_token
from agenttrail.server.tools import Tool, ToolRegistry, workspace_tools
from tests.conftest import CHROMIUM, serving

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SECRET = b"test-secret-not-for-production-0123456789abcdef"
SHOTS = Path(
    os.environ.get("AGENTTRAIL_SCREENSHOTS")
    or Path(tempfile.gettempdir()) / "agenttrail-screenshots"
)


def _shot(page: Page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Without a browser the tests that take this fixture are skipped at collection, or the
    # run refuses to start when CI requires one (tests/_environment.py).
    assert CHROMIUM is not None
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def _echo_tool() -> Tool:
    """A tool whose schema has every kind of field the palette builds a form for."""
    schema = {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 0, "description": "How many."},
            "loud": {"type": "boolean"},
            "mode": {"enum": ["a", "b"]},
            "ratio": {"type": "number"},
            "options": {
                "type": "object",
                "properties": {"tag": {"type": "string"}},
                "required": ["tag"],
            },
        },
        "required": ["count", "mode"],
        "additionalProperties": False,
    }
    return Tool("echo", "Return the input unchanged.", schema, lambda value: value)


@dataclass
class Viewer:
    """A running server and a browser context for it."""

    url: str
    store: LogStore
    workspace: Path
    browser: Browser
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    """Console errors a test provokes on purpose (the browser logs every HTTP error)."""

    def token(self, rights: str = "read,append,invoke,audit") -> str:
        return mint_token(SECRET, rights=rights.split(","))

    def http(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token()}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def page(self, **context: Any) -> Page:
        options: dict[str, Any] = {"locale": "en-US", "viewport": {"width": 1366, "height": 860}}
        options.update(context)
        page = self.browser.new_context(**options).new_page()
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on(
            "console",
            lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None,
        )
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        return page

    def open(self, session: str | None = None, *, seq: int | None = None, **context: Any) -> Page:
        page = self.page(**context)
        fragment: dict[str, Any] = {"token": self.token()}
        if session is not None:
            fragment["session"] = session
        if seq is not None:
            fragment["seq"] = seq
        page.goto(f"{self.url}/#{urlencode(fragment)}")
        if session is not None:
            expect(page.locator("#rows .row").first).to_be_visible()
        return page


@pytest.fixture
def viewer(tmp_path: Path, browser: Browser) -> Iterator[Viewer]:
    store = open_store(tmp_path / "log.db")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello from the workspace\n")
    registry = ToolRegistry([*workspace_tools(workspace), _echo_tool()])
    app = create_app(store, secret=SECRET, tools=registry)
    try:
        with serving(app) as port:
            running = Viewer(f"http://127.0.0.1:{port}", store, workspace, browser)
            try:
                yield running
                unexpected = [
                    e for e in running.errors if not any(x in e for x in running.expected)
                ]
                assert unexpected == [], unexpected  # no script error, no failed request
                # Nothing from the log ran as script.
                assert running.dialogs == [], running.dialogs
            finally:
                for context in browser.contexts:
                    context.close()
    finally:
        store.close()


def _new_session(store: LogStore, sid: str, payloads: list[dict[str, Any]], **fields: Any) -> str:
    store.create_session(NewSession(sid, fields.get("title", sid), "harvey", "ana"))
    if payloads:
        store.append_batch(sid, [NewEvent(p) for p in payloads])
    return sid


def _has_class(name: str) -> re.Pattern[str]:
    return re.compile(rf"(^|\s){re.escape(name)}(\s|$)")


def _row(page: Page, seq: int) -> Any:
    return page.locator(f'#rows .row[data-seq="{seq}"]')


def _wait_until(page: Page, condition: str, timeout_s: float = 20) -> None:
    """Poll a JavaScript condition with ``evaluate``: ``wait_for_function`` compiles its
    predicate with ``eval`` inside the page, which the page's CSP (rightly) refuses."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(condition):
        assert time.monotonic() < deadline, f"still false after {timeout_s} s: {condition}"
        page.wait_for_timeout(20)


def _drawn_seqs(page: Page) -> list[int]:
    found: list[int] = page.eval_on_selector_all(
        "#rows .row", "rows => rows.map(r => Number(r.dataset.seq))"
    )
    return found


@dataclass
class Server:
    """A running server: its base URLs, its store, and tokens for it."""

    url: str
    ws: str
    store: LogStore
    workspace: Path

    def token(self, rights: str = "read,append,invoke,audit", session: str = "*") -> str:
        return mint_token(SECRET, rights=rights.split(","), session=session)

    def client(self, rights: str = "read,append,invoke,audit", session: str = "*") -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token(rights, session)}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture
def server(tmp_path: Path, db_url: str) -> Iterator[Server]:
    """A server on each backend (on PostgreSQL its hub LISTENs for appends)."""
    store = open_store(db_url, max_payload_bytes=64 * 1024)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello from the workspace\n")
    app = create_app(store, secret=SECRET, tools=ToolRegistry(workspace_tools(workspace)))
    try:
        with serving(app) as port:
            yield Server(f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}", store, workspace)
    finally:
        store.close()
