"""The documentation is executable: README commands, CLI help, and the outsider's verifier.

Like sqlite-utils' and Datasette's ``tests/test_docs.py``: a command missing from the docs, a
README whose test command drifts from CI, or a by-hand verifier that no longer matches the
chain fails the suite.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import typer

from agenttrail import Recorder
from agenttrail.cli import app
from agenttrail.ingest.sample import SAMPLE_SESSION_ID, record_sample
from agenttrail.log.store import open_store
from agenttrail.log.store.postgres import parse_url
from tests.conftest import (
    ROOT,
    owner_connection,
    postgres_schema,
    run_cli,
    session_made_before_the_id_rule,
)

README = (ROOT / "README.md").read_text(encoding="utf-8")
LOG_FORMAT = (ROOT / "docs" / "log-format.md").read_text(encoding="utf-8")


def _code_blocks(text: str, lang: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(rf"```{lang}\n(.*?)```", text, re.S)]


def test_the_readme_opens_with_exactly_two_setup_commands() -> None:
    head = README.split("---", 1)[0]
    commands = _code_blocks(head, "sh")
    assert len(commands) == 2
    main_job, tests = commands
    assert "agenttrail quickstart" in main_job
    assert "pytest" in tests


def test_ci_runs_the_readmes_test_command() -> None:
    tests_command = _code_blocks(README, "sh")[1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests_command in ci.splitlines()


def test_the_readmes_recorder_example_runs_as_written(tmp_path: Path) -> None:
    # A new user ran it in an empty folder: it read a harvey.go it never made (a traceback).
    (example,) = [block for block in _code_blocks(README, "python") if "@agenttrail.tool" in block]
    script = tmp_path / "example.py"
    script.write_text(example, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "AGENTTRAIL_DATABASE_URL"}
    ran = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    types = [line.split()[2] for line in ran.stdout.splitlines()]
    assert types[0] == "recall" and types[-1] == "session_end"
    assert types.count("tool_call") == types.count("tool_result") == 2
    with open_store(tmp_path / "agenttrail.db") as store:
        (session,) = store.sessions()
        assert session.title == "Compile check"


def _commands() -> list[str]:
    return sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", _commands())
def test_every_command_is_documented_and_has_help(command: str) -> None:
    assert f"`agenttrail {command}" in README
    result = run_cli(command, "--help")
    assert result.returncode == 0
    assert "Example:" in result.stdout
    # `agenttrail --help` lists each command with the first paragraph of its help, as
    # written: one line (PEP 257's summary line), or the list breaks mid-sentence.
    summary = typer.main.get_command(app).commands[command].help.split("\n\n")[0]  # type: ignore[attr-defined]
    assert "\n" not in summary.strip(), summary


def _outsider_script(db: Path, session: str, version: int = 2) -> str:
    """The by-hand verifier of docs/log-format.md for a session of chain ``version``: the
    first script of the section for v1, the second for v2."""
    block = LOG_FORMAT.split("### Verify with sqlite3 and sha256sum only", 1)[1]
    script = _code_blocks(block, "sh")[version - 1]
    return script.replace(
        "DB=agenttrail.db SESSION=sample-harvey-session", f"DB='{db}' SESSION='{session}'"
    )


def _verifies_by_hand(db: str | Path, script: Callable[[str, int], str]) -> None:
    """Write the sample session (chain v2, seq 4 erased) and one with a lone surrogate and a
    512 KiB result (chain v1, as a session from before the id rule is) into ``db``, then run
    the by-hand ``script(session, version)`` of each: it prints ``ok`` for every seq and the
    head the store has."""
    with open_store(db) as store:
        record_sample(store)
        store.erase(SAMPLE_SESSION_ID, [4], by="tests", reason="by-hand check of an erasure")
        # A UTF-8 id is hashed as its bytes; no new session may have one (the id rule), but
        # old logs hold them, and the by-hand check must still read them.
        session_made_before_the_id_rule(str(db), "hard é")
        rec = Recorder(store, "hard é")
        with rec.turn(model="m") as turn:
            turn.user("café \udc81 done")
            call = turn.tool_call("read_file", {"path": "big"})
            turn.tool_result(call, "x" * (512 * 1024))
        heads = {s.id: (s.head_seq, s.head_hash.hex(), s.chain_version) for s in store.sessions()}
    assert {version for _, _, version in heads.values()} == {1, 2}
    for session, (head_seq, head_hash, version) in heads.items():
        out = subprocess.run(
            ["sh", "-c", script(session, version)], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        erased = [4] if session == SAMPLE_SESSION_ID else []
        assert out[:-1] == [
            f"seq {n}: ok" + (" (erased)" if n in erased else "") for n in range(1, head_seq + 1)
        ]
        assert out[-1] == f"head|{head_seq}|{head_hash}"


@pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("sqlite3", "xxd", "sha256sum")),
    reason="needs the sqlite3, xxd and sha256sum commands",
)
def test_a_log_verifies_by_hand_with_sqlite3_and_sha256sum(tmp_path: Path) -> None:
    db = tmp_path / "agenttrail.db"
    _verifies_by_hand(db, lambda session, version: _outsider_script(db, session, version))
    # The same script catches a row changed by someone who dropped the triggers.
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER session_events_no_update")
    conn.execute(
        "UPDATE session_events SET payload = CAST(replace(CAST(payload AS TEXT), '2+2', '2+3') "
        "AS BLOB) WHERE session_id = ? AND seq = 2",
        (SAMPLE_SESSION_ID,),
    )
    conn.close()
    out = subprocess.run(
        ["sh", "-c", _outsider_script(db, SAMPLE_SESSION_ID)], capture_output=True, text=True
    ).stdout.splitlines()
    assert out[:2] == ["seq 1: ok", "seq 2: BAD"]
    assert run_cli("verify", "--db", str(db)).returncode == 1


def _psql_script(url: str, session: str, version: int = 2) -> str:
    block = LOG_FORMAT.split("### Verify with psql and sha256sum only", 1)[1]
    script = _code_blocks(block, "sh")[version - 1]
    server = parse_url(url)
    first = (
        "URL=postgresql://postgres@127.0.0.1:5432/test SCHEMA=public SESSION=sample-harvey-session"
    )
    assert first in script
    return script.replace(
        first, f"URL='{server.conninfo}' SCHEMA='{server.schema}' SESSION='{session}'"
    )


@pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("psql", "xxd", "sha256sum")),
    reason="needs the psql, xxd and sha256sum commands",
)
def test_a_postgresql_log_verifies_by_hand_with_psql_and_sha256sum(postgres_url: str) -> None:
    with postgres_schema(postgres_url) as url:
        _verifies_by_hand(url, lambda session, version: _psql_script(url, session, version))
        # The same script catches a row changed by the database's owner around the triggers.
        with owner_connection(url) as conn:
            conn.execute("ALTER TABLE session_events DISABLE TRIGGER session_events_no_update")
            changed = conn.execute(
                "UPDATE session_events SET payload = overlay(payload placing '2+3'::bytea "
                "from position('2+2'::bytea in payload) for 3) "
                "WHERE session_id = %s AND seq = 2 AND position('2+2'::bytea in payload) > 0",
                (SAMPLE_SESSION_ID,),
            )
            assert changed.rowcount == 1
        out = subprocess.run(
            ["sh", "-c", _psql_script(url, SAMPLE_SESSION_ID)], capture_output=True, text=True
        ).stdout.splitlines()
        assert out[:2] == ["seq 1: ok", "seq 2: BAD"]
        assert run_cli("verify", "--db", url).returncode == 1


def test_no_tracked_file_holds_a_merge_conflict_marker() -> None:
    # A half-resolved merge once left `<<<<<<< HEAD` in docs/benchmarks.md, and nothing failed.
    tracked = subprocess.run(
        ["git", "ls-files", "*.md", "*.py", "*.js", "*.css", "*.html", "*.toml", ".ci/run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    marker = re.compile(r"^(<{7}|>{7}) |^={7}$", re.M)
    found = [p for p in tracked if marker.search((ROOT / p).read_text(encoding="utf-8"))]
    assert found == []
