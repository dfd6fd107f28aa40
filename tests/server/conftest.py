"""The server tests' shared fixture: a real app on a real uvicorn on loopback, on each backend."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from agenttrail.log.store import LogStore, open_store
from agenttrail.server import create_app, mint_token
from agenttrail.server.tools import ToolRegistry, workspace_tools
from tests.conftest import serving

SECRET = b"test-secret-not-for-production-0123456789abcdef"


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
