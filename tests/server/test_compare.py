"""The REST side of usage and diff on real uvicorn: ``GET …/summary`` carries a session's
usage, ``GET /v1/sessions/{a}/diff/{b}`` where two sessions part."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore
from agenttrail.server import create_app, mint_token
from tests.conftest import REALDATA, serving

SECRET = b"compare-test-secret-not-for-production-0123456789"
# marot/spotter test/fixtures/transcripts: two real Claude Code sessions (SOURCES.md)
SHORT = REALDATA / "claude-code-spotter" / "short.jsonl"
TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"


@pytest.fixture
def http(store: LogStore) -> Iterator[httpx.Client]:
    with serving(create_app(store, secret=SECRET)) as port:
        token = mint_token(SECRET, rights=["read"], session="*")
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as client:
            yield client


def test_summary_carries_usage(http: httpx.Client, store: LogStore) -> None:
    (report,) = import_paths(store, [SHORT])
    usage = http.get(f"/v1/sessions/{report.session_id}/summary").json()["usage"]
    # short.jsonl's one response (message.id msg_01MKH1ccEGrZGNPvu8pYiiQa, every line
    # repeating usage {input_tokens 3, output_tokens 13, cache_read 11515, cache_creation 13835})
    assert usage["calls"] == 1
    assert usage["tokens"] == {"input": 3, "output": 13, "cache_read": 11515, "cache_write": 13835}
    assert usage["cost_unknown_calls"] == 0 and list(usage["cost"]) == ["USD"]


def test_diff_route(http: httpx.Client, store: LogStore, tmp_path: Path) -> None:
    (short,) = import_paths(store, [SHORT])
    (heavy,) = import_paths(store, [TOOL_HEAVY])
    same = http.get(f"/v1/sessions/{short.session_id}/diff/{short.session_id}").json()
    assert same["identical"] is True and same["first"] is None
    apart = http.get(f"/v1/sessions/{short.session_id}/diff/{heavy.session_id}").json()
    # the two sessions open with different user prompts: they part at the first step
    assert (apart["prefix"], apart["first"]["a"]["step"]) == (0, "user message")
    assert apart["first"]["changes"][0]["field"] == "text"
    missing = http.get(f"/v1/sessions/{short.session_id}/diff/no-such-session")
    assert missing.status_code == 404


def test_diff_route_aligns_every_step(http: httpx.Client, store: LogStore) -> None:
    (short,) = import_paths(store, [SHORT])
    (heavy,) = import_paths(store, [TOOL_HEAVY])
    body = http.get(f"/v1/sessions/{short.session_id}/diff/{heavy.session_id}?align=true").json()
    blocks = body["alignment"]
    # every step of each session is in exactly one block, in seq order
    for side in ("a", "b"):
        seqs = [step["seq"] for block in blocks for step in block[side]]
        assert len(seqs) == body["steps"][side] and seqs == sorted(seqs)
    assert [b["tag"] for b in blocks if b["tag"] != "same"] == [
        d["tag"] for d in body["divergences"]
    ]
    assert sum(len(b["a"]) for b in blocks if b["tag"] == "same") == body["same"]
    first = next(b for b in blocks if b["tag"] != "same")
    assert [c["field"] for c in first["changes"]] == [c["field"] for c in body["first"]["changes"]]
    # the two open with their own user prompts (line 4 of short.jsonl, as the viewer shows it)
    assert first["a"][0]["step"] == "user message" and isinstance(first["a"][0]["text"], str)
    assert (
        "alignment"
        not in http.get(f"/v1/sessions/{short.session_id}/diff/{heavy.session_id}").json()
    )
