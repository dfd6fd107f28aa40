-- agenttrail SQLite schema, version 4: the idempotency keys chained. Layout:
-- docs/log-format.md (Chain v2, Idempotency keys).
-- Applied once, in one transaction, when PRAGMA user_version is 3. The keys of every session,
-- v1 or v2, form a chain of their own in (seq, key) order; the session row keeps its head.

ALTER TABLE session_event_keys ADD COLUMN hash BLOB;
ALTER TABLE sessions ADD COLUMN key_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN key_hash BLOB;

-- The keys stored before this version are chained once, by the upgrade that runs this script
-- (the store's chain_keys_written_before, in the same transaction): setting a NULL hash, and
-- nothing else, is the one UPDATE admitted.
DROP TRIGGER session_event_keys_no_update;
CREATE TRIGGER session_event_keys_no_update BEFORE UPDATE ON session_event_keys
WHEN NOT (
    OLD.hash IS NULL AND NEW.hash IS NOT NULL
    AND NEW.session_id IS OLD.session_id AND NEW.key IS OLD.key AND NEW.seq IS OLD.seq
)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: session_event_keys is append-only: UPDATE refused');
END;

-- The log's own rows, tombstones and log_keys, each form a chain in the order written
-- (rowid), whose heads log_heads keeps (docs/log-format.md, What the chain covers). The rows
-- stored before this version are chained once by the upgrade, as the keys above.
ALTER TABLE tombstones ADD COLUMN hash BLOB;
ALTER TABLE log_keys ADD COLUMN hash BLOB;
CREATE TABLE log_heads (
    name        TEXT PRIMARY KEY NOT NULL,      -- the table: tombstones, log_keys
    count       INTEGER NOT NULL,
    hash        BLOB NOT NULL
);
INSERT INTO log_heads (name, count, hash) VALUES ('tombstones', 0, zeroblob(32));
INSERT INTO log_heads (name, count, hash) VALUES ('log_keys', 0, zeroblob(32));

DROP TRIGGER tombstones_no_update;
CREATE TRIGGER tombstones_no_update BEFORE UPDATE ON tombstones
WHEN NOT (
    OLD.hash IS NULL AND NEW.hash IS NOT NULL AND NEW.session_id IS OLD.session_id
    AND NEW.head_seq IS OLD.head_seq AND NEW.head_hash IS OLD.head_hash
    AND NEW.deleted_at IS OLD.deleted_at AND NEW.reason IS OLD.reason
)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: tombstones are permanent: UPDATE refused');
END;

CREATE TRIGGER log_keys_no_update BEFORE UPDATE ON log_keys
WHEN NOT (
    OLD.hash IS NULL AND NEW.hash IS NOT NULL AND NEW.name IS OLD.name AND NEW.key IS OLD.key
)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: log keys are never changed: UPDATE refused');
END;

CREATE TRIGGER log_keys_no_delete BEFORE DELETE ON log_keys
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: log keys are never changed: DELETE refused');
END;

CREATE TRIGGER log_heads_forward_only BEFORE UPDATE ON log_heads
WHEN NEW.name IS NOT OLD.name OR NEW.count <= OLD.count
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: a log head only moves forward');
END;

CREATE TRIGGER log_heads_no_delete BEFORE DELETE ON log_heads
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: log heads are permanent: DELETE refused');
END;
