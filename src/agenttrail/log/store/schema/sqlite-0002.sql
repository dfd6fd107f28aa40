-- agenttrail SQLite schema, version 2: the log's own keys. Layout: docs/log-format.md.
-- Applied once, in one transaction, when PRAGMA user_version is below 2.

-- Keys that belong to this log and to no other, written once, never changed:
-- 'redaction' keys the digests of redaction markers (docs/redaction.md).
CREATE TABLE log_keys (
    name        TEXT PRIMARY KEY NOT NULL,
    key         BLOB NOT NULL
);
