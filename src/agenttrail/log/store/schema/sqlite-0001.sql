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

-- Trace rows: evidence for tool calls whose result is a response envelope. They
-- join the log by (session_id, call_seq, result_seq) and the turn by turn_seq; they hold no
-- user identity (that stays in sessions).
CREATE TABLE trace_rows (
    id           INTEGER PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions (id),
    call_seq     INTEGER NOT NULL,              -- the tool_call event
    result_seq   INTEGER NOT NULL,              -- the tool_result event holding the envelope
    turn_seq     INTEGER,                       -- the user message that began the turn
    tool         TEXT NOT NULL,
    inputs       TEXT NOT NULL,                 -- the call's input as issued, JSON
    envelope     BLOB NOT NULL,                 -- the envelope's bytes, verbatim
    created_at   TEXT NOT NULL,
    record_hash  TEXT,                          -- SHA-256 (hex) we computed; NULL if not I-JSON
    stated_hash  TEXT,                          -- the hash the envelope states, if any
    status       TEXT NOT NULL,                 -- verified | mismatch | computed | invalid
    detail       TEXT NOT NULL DEFAULT '',
    spec         TEXT NOT NULL,                 -- the envelope spec used, JSON
    UNIQUE (session_id, result_seq)
);
CREATE INDEX trace_rows_turn ON trace_rows (session_id, turn_seq);

-- Turn lock: an agent turn in flight holds a lease; a user's own tool invocation is refused
-- (HTTP 409) while it runs. Kept in the database so that it holds across server replicas.
CREATE TABLE turn_leases (
    session_id   TEXT PRIMARY KEY NOT NULL,
    turn_id      TEXT NOT NULL,
    holder       TEXT NOT NULL,
    expires_at   TEXT NOT NULL                  -- created_at form; an expired lease is free
);

-- Retention's one sanctioned path: a whole session may be removed only after its tombstone is
-- written, in the same transaction, so every deletion is itself on record.
CREATE TABLE tombstones (
    session_id   TEXT PRIMARY KEY NOT NULL,
    head_seq     INTEGER NOT NULL,              -- events the session had
    head_hash    BLOB NOT NULL,                 -- its last chain hash
    deleted_at   TEXT NOT NULL,
    reason       TEXT NOT NULL
);

CREATE TRIGGER session_events_no_delete BEFORE DELETE ON session_events
WHEN NOT EXISTS (SELECT 1 FROM tombstones WHERE session_id = OLD.session_id)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: session_events is append-only: DELETE refused');
END;

CREATE TRIGGER trace_rows_no_update BEFORE UPDATE ON trace_rows
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: trace_rows is append-only: UPDATE refused');
END;

CREATE TRIGGER trace_rows_no_delete BEFORE DELETE ON trace_rows
WHEN NOT EXISTS (SELECT 1 FROM tombstones WHERE session_id = OLD.session_id)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: trace_rows is append-only: DELETE refused');
END;

CREATE TRIGGER tombstones_no_update BEFORE UPDATE ON tombstones
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: tombstones are permanent: UPDATE refused');
END;

CREATE TRIGGER tombstones_no_delete BEFORE DELETE ON tombstones
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: tombstones are permanent: DELETE refused');
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
WHEN NOT EXISTS (SELECT 1 FROM tombstones WHERE session_id = OLD.session_id)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: session_event_keys is append-only: DELETE refused');
END;

CREATE TRIGGER sessions_no_delete BEFORE DELETE ON sessions
WHEN NOT EXISTS (SELECT 1 FROM tombstones WHERE session_id = OLD.id)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: sessions are removed only by retention: DELETE refused');
END;

CREATE TRIGGER sessions_no_replace BEFORE INSERT ON sessions
WHEN EXISTS (SELECT 1 FROM sessions WHERE id = NEW.id)
  OR EXISTS (SELECT 1 FROM tombstones WHERE session_id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: session id already exists or was removed by retention');
END;

CREATE TRIGGER sessions_head_forward_only BEFORE UPDATE OF head_seq, head_hash, id ON sessions
WHEN NEW.id IS NOT OLD.id OR NEW.head_seq <= OLD.head_seq
BEGIN
    SELECT RAISE(ABORT, 'agenttrail: a session head only moves forward');
END;
