"""Every file of the third-party corpus imports: one by one, and all at once as a folder.

The corpus is ``../shared/realdata`` (its ``SOURCES.md`` says what each file is and where it
came from). ``find realdata -type f ! -name SOURCES.md | wc -l`` gives 37 data files: 3 Anthropic
SDK recordings and 1 SSE text, 4 Claude Code transcripts, 17 Harvey ``.spmd`` screenplays, 3
Inspect logs, 3 Langfuse exports, 5 OpenTelemetry cassettes and 1 ToolBench answer; each holds
one session (Inspect: one sample per log; Langfuse: one trace per export).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agenttrail.formats import read_file
from agenttrail.log.store import open_store
from tests.conftest import REALDATA, run_cli

# rglob, not iterdir: without the corpus this is empty and its tests are skipped
# (tests/_environment.py) instead of stopping the run at collection.
CORPUS = sorted(p for p in REALDATA.rglob("*") if p.is_file() and p.name != "SOURCES.md")

FOLDERS = {
    "anthropic-sdk-python": 4,
    "claude-code-simonw": 1,
    "claude-code-spotter": 3,
    "harvey": 17,
    "inspect_ai": 3,
    "langfuse-framework-traces": 3,
    "otel-openai-v2-cassettes": 5,
    "toolbench": 1,
}
"""Data files per folder, by ``find realdata -type f ! -name SOURCES.md | cut -d/ -f2 | sort |
uniq -c``."""


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_file_reads_into_one_session_with_events(path: Path) -> None:
    [session] = read_file(path)
    assert session.events
    assert session.session.id is not None


def test_the_whole_corpus_imports_as_a_folder_and_again_writes_nothing(tmp_path: Path) -> None:
    assert len(CORPUS) == sum(FOLDERS.values()) == 37
    db = str(tmp_path / "log.db")
    first = run_cli("import", str(REALDATA), "--db", db)
    assert first.returncode == 0, first.stderr
    ids = first.stdout.split()
    assert len(ids) == len(set(ids)) == 37
    named = [line.split(": ")[0] for line in first.stderr.splitlines() if "written" in line]
    assert sorted(Path(p) for p in named) == CORPUS  # SOURCES.md is not read
    assert {Path(p).parent.name for p in named} == set(FOLDERS)
    with open_store(db) as store:
        assert sorted(s.id for s in store.sessions()) == sorted(ids)
    again = run_cli("import", str(REALDATA), "--db", db)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split() == ids
    assert again.stderr.count(": 0 events written") == 37
