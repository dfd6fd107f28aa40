-- agenttrail PostgreSQL schema, version 2: the log's own keys (as sqlite-0002.sql).
-- Applied once, in one transaction, by the role that owns the tables.

-- Keys that belong to this log and to no other, written once, never changed:
-- 'redaction' keys the digests of redaction markers (docs/redaction.md).
CREATE TABLE log_keys (
    name        text PRIMARY KEY,
    key         bytea NOT NULL
);

REVOKE ALL ON log_keys FROM PUBLIC;
GRANT SELECT, INSERT ON log_keys TO agenttrail_writer;
