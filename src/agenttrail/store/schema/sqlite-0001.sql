-- agenttrail SQLite schema, version 1. Layout and chain: docs/log-format.md.
-- Applied once, in one transaction, when PRAGMA user_version is below 1.

CREATE TABLE sessions (
    id          TEXT PRIMARY KEY NOT NULL,
    title       TEXT,
    agent       TEXT,
    user        TEXT,
    workspace   TEXT,
    started     TEXT,
    metadata    TEXT NOT NULL DEFAULT '{}',   -- JSON object
    created_at  TEXT NOT NULL,
    head_seq    INTEGER NOT NULL DEFAULT 0,   -- seq of the last event
    head_hash   BLOB NOT NULL DEFAULT (zeroblob(32))
);

CREATE TABLE session_events (
    session_id  TEXT NOT NULL REFERENCES sessions (id),
    seq         INTEGER NOT NULL,
    created_at  TEXT NOT NULL,                -- RFC 3339 UTC, microseconds, 'Z'
    payload     BLOB NOT NULL,                -- canonical CBOR
    hash        BLOB NOT NULL,                -- SHA-256 chain hash, 32 bytes
    PRIMARY KEY (session_id, seq)
);

-- Idempotency keys: a retried append with the same key returns this seq.
CREATE TABLE session_event_keys (
    session_id  TEXT NOT NULL,
    key         TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;

-- Guard rails (the chain is the evidence; whoever owns the file can drop these).
CREATE TRIGGER session_events_no_update BEFORE UPDATE ON session_events
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: session_events is append-only: UPDATE refused');
END;

CREATE TRIGGER session_events_no_delete BEFORE DELETE ON session_events
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: session_events is append-only: DELETE refused');
END;

-- INSERT OR REPLACE deletes the old row without firing DELETE triggers (recursive_triggers is
-- off by default), so inserts are guarded too: the only row that may be inserted is the next
-- seq of its session. This also refuses gaps.
CREATE TRIGGER session_events_next_seq_only BEFORE INSERT ON session_events
WHEN NEW.seq IS NOT (SELECT coalesce(max(seq), 0) + 1 FROM session_events WHERE session_id = NEW.session_id)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: session_events is append-only: only the next seq may be inserted');
END;

CREATE TRIGGER session_event_keys_no_update BEFORE UPDATE ON session_event_keys
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: session_event_keys is append-only: UPDATE refused');
END;

CREATE TRIGGER session_event_keys_no_delete BEFORE DELETE ON session_event_keys
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: session_event_keys is append-only: DELETE refused');
END;

CREATE TRIGGER sessions_no_delete BEFORE DELETE ON sessions
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: sessions are removed only by retention: DELETE refused');
END;

CREATE TRIGGER sessions_no_replace BEFORE INSERT ON sessions
WHEN EXISTS (SELECT 1 FROM sessions WHERE id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: session id already exists');
END;

CREATE TRIGGER sessions_head_forward_only BEFORE UPDATE OF head_seq, head_hash, id ON sessions
WHEN NEW.id IS NOT OLD.id OR NEW.head_seq <= OLD.head_seq
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: a session head only moves forward');
END;
