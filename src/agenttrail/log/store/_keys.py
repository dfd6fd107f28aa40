"""The log's own keys (the ``log_keys`` table): drawn once, at first use, and kept.

A key belongs to one log: two logs never share one, and a copy of a session to another log
(``agenttrail migrate``) keeps the markers the first log's key made. Today there is one, the
key of redaction markers' digests (docs/redaction.md, Markers).
"""

from __future__ import annotations

import secrets
from typing import Any

from agenttrail.log.redact import Redactor, RedactRules
from agenttrail.log.store._backend import Backend

__all__ = ["KEY_BYTES", "REDACTION_KEY", "log_key", "redactor_for"]

KEY_BYTES = 32
"""Length of a drawn key: HMAC-SHA-256's block-sized security (RFC 2104 §3 asks for at
least the hash's output length, 32 bytes)."""

REDACTION_KEY = "redaction"
"""The name of the key of redaction markers."""


def log_key(store: Backend[Any], name: str) -> bytes:
    """The log's key ``name``, drawn (``secrets.token_bytes``) and stored when it has none.

    Two processes drawing at once both insert-or-ignore, then read the one that won.

    Raises:
        StoreError: the database failed.
    """
    p = store.sql.param
    select = f"SELECT key FROM log_keys WHERE name = {p}"

    def tx(conn: Any) -> bytes:
        row = conn.execute(select, (name,)).fetchone()
        if row is None:
            drawn = secrets.token_bytes(KEY_BYTES)
            inserted = conn.execute(
                f"INSERT INTO log_keys (name, key) VALUES ({p}, {p}) ON CONFLICT (name) DO NOTHING",
                (name, drawn),
            )
            if inserted.rowcount:  # chained like every row of the log's own (log-format.md)
                store._chain_log_row(conn, "log_keys", (name, drawn))
            row = conn.execute(select, (name,)).fetchone()
        return bytes(row[0])

    return store._write("log_key", tx)


def redactor_for(store: Backend[Any], rules: RedactRules) -> Redactor:
    """The :class:`Redactor` of ``store``: ``rules`` with the log's redaction key, read (or
    drawn) at the first secret, outside any append's transaction."""
    return Redactor(rules, key=lambda: log_key(store, REDACTION_KEY))
