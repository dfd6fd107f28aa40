"""Writes ``v1-log.db``: a log as agenttrail wrote it before chain v2 (schema version 1).

Run once with the code at main before chain v2 (commit 2b0c7ea), from the repository root::

    python tests/data/make_v1_log.py

The file is kept as written: the tests open it with today's code and require that it still
verifies as v1 (tests/log/test_chain_v2.py), that migrate copies it as v1 with its chains
intact (tests/ingest/test_migrate.py). It holds the sample session (events, trace rows,
idempotency keys), the loan session of tests/loan_session.py (trace rows), an empty
session and a tombstone left by retention.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agenttrail.ingest.sample import record_sample
from agenttrail.log.store import open_store
from agenttrail.model import NewSession

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # for tests.loan_session, run as a script

from tests.loan_session import record_loan_session  # noqa: E402


def main() -> None:
    target = HERE / "v1-log.db"
    if target.exists():
        sys.exit(f"{target} exists; it is a fixture of the v1 format, not to be rewritten")
    with open_store(target) as store:
        record_sample(store)
        record_loan_session(store)  # trace rows
        store.create_session(NewSession(id="v1-empty", title="nothing yet", user="ada"))
        store.create_session(NewSession(id="v1-removed", title="to be removed"))
        store.append("v1-removed", {"type": "message", "role": "user", "content": "bye"})
        store.remove_session("v1-removed", reason="retention test")
    import sqlite3

    conn = sqlite3.connect(target)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    conn.close()


if __name__ == "__main__":
    main()
