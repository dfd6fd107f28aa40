-- agenttrail SQLite schema, version 2: chain v2, erasure, and the log's own keys. Layout:
-- docs/log-format.md.
-- Applied once, in one transaction, when PRAGMA user_version is 1. Sessions written before
-- keep chain_version 1 and verify as they always did; new sessions are written as v2.

ALTER TABLE sessions ADD COLUMN chain_version INTEGER NOT NULL DEFAULT 1;

-- v2 rows: the random salt and the salted digest the chain hash commits to. Both NULL in a
-- v1 row. An erased v2 row keeps its digest; its payload is X'' and its salt NULL.
ALTER TABLE session_events ADD COLUMN salt BLOB;
ALTER TABLE session_events ADD COLUMN digest BLOB;

-- Which events were erased, one row per erased seq: the erasure itself (who, when, why,
-- which seqs) is a chained event of the session; this table is what lets the one permitted
-- UPDATE below happen, and what verify compares with the rows and that event.
CREATE TABLE erasures (
    session_id   TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    erasure_seq  INTEGER NOT NULL,              -- the erasure event that names it
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TRIGGER erasures_no_update BEFORE UPDATE ON erasures
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: erasures are permanent: UPDATE refused');
END;

CREATE TRIGGER erasures_no_delete BEFORE DELETE ON erasures
WHEN NOT EXISTS (SELECT 1 FROM tombstones WHERE session_id = OLD.session_id)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: erasures are permanent: DELETE refused');
END;

-- The one UPDATE of an event: erasing the payload and salt of a v2 row that has an erasure
-- row, leaving every other column (and so the chain) as it was.
DROP TRIGGER session_events_no_update;
CREATE TRIGGER session_events_no_update BEFORE UPDATE ON session_events
WHEN NOT (
    NEW.session_id IS OLD.session_id AND NEW.seq IS OLD.seq
    AND NEW.created_at IS OLD.created_at AND NEW.hash IS OLD.hash
    AND NEW.digest IS OLD.digest AND OLD.digest IS NOT NULL
    AND NEW.payload = X'' AND NEW.salt IS NULL
    AND EXISTS (SELECT 1 FROM erasures WHERE session_id = OLD.session_id AND seq = OLD.seq)
)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: session_events is append-only: UPDATE refused');
END;

-- The trace rows of a v2 session form a chain of their own (docs/log-format.md, Trace rows
-- in chain v2): each row's hash, and the session's trace head. NULL in a v1 session.
ALTER TABLE trace_rows ADD COLUMN hash BLOB;
ALTER TABLE sessions ADD COLUMN trace_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN trace_hash BLOB;

-- Keys that belong to this log and to no other, written once, never changed:
-- 'redaction' keys the digests of redaction markers (docs/redaction.md).
CREATE TABLE log_keys (
    name        TEXT PRIMARY KEY NOT NULL,
    key         BLOB NOT NULL
);
