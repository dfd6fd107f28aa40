-- agenttrail PostgreSQL schema, version 2: chain v2, erasure and the log's own keys, as
-- sqlite-0002.sql.
-- Layout and privileges: docs/log-format.md. Sessions written before keep chain_version 1.

ALTER TABLE sessions ADD COLUMN chain_version integer NOT NULL DEFAULT 1
    CHECK (chain_version IN (1, 2));
ALTER TABLE session_events ADD COLUMN salt bytea;
ALTER TABLE session_events ADD COLUMN digest bytea;

CREATE TABLE erasures (
    session_id   text NOT NULL,
    seq          bigint NOT NULL,
    erasure_seq  bigint NOT NULL,               -- the erasure event that names it
    PRIMARY KEY (session_id, seq)
);
CREATE TRIGGER erasures_no_update BEFORE UPDATE ON erasures
    FOR EACH ROW EXECUTE FUNCTION agenttrail_refuse('erasures are permanent');
CREATE TRIGGER erasures_no_delete BEFORE DELETE ON erasures
    FOR EACH ROW EXECUTE FUNCTION agenttrail_refuse_delete();
CREATE TRIGGER erasures_no_truncate BEFORE TRUNCATE ON erasures
    FOR EACH STATEMENT EXECUTE FUNCTION agenttrail_refuse('erasures are permanent');

-- The one UPDATE of an event: erasing the payload and salt of a v2 row that has an erasure
-- row, every other column left as it was.
DROP TRIGGER session_events_no_update ON session_events;
CREATE FUNCTION agenttrail_erase_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.session_id IS NOT DISTINCT FROM OLD.session_id AND NEW.seq = OLD.seq
       AND NEW.created_at IS NOT DISTINCT FROM OLD.created_at
       AND NEW.hash IS NOT DISTINCT FROM OLD.hash
       AND NEW.digest IS NOT DISTINCT FROM OLD.digest AND OLD.digest IS NOT NULL
       AND NEW.payload = '\x'::bytea AND NEW.salt IS NULL
       AND EXISTS (SELECT 1 FROM erasures WHERE session_id = OLD.session_id AND seq = OLD.seq) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'agenttrail: session_events is append-only: UPDATE refused'
        USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER session_events_no_update BEFORE UPDATE ON session_events
    FOR EACH ROW EXECUTE FUNCTION agenttrail_erase_only();

-- A v2 session's empty head is its genesis (a digest of its fields), not 32 zero bytes.
CREATE OR REPLACE FUNCTION agenttrail_head_matches_log() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s record;
    e record;
BEGIN
    SELECT head_seq, head_hash, chain_version INTO s FROM sessions WHERE id = NEW.id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT seq, hash INTO e FROM session_events WHERE session_id = NEW.id
        ORDER BY seq DESC LIMIT 1;
    IF s.head_seq IS DISTINCT FROM coalesce(e.seq, 0)
       OR (e.seq IS NOT NULL AND s.head_hash IS DISTINCT FROM e.hash)
       OR (e.seq IS NULL AND s.chain_version = 1
           AND s.head_hash IS DISTINCT FROM '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea) THEN
        RAISE EXCEPTION 'agenttrail: a session head only moves forward, to its last event (session %)', NEW.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION agenttrail_remove_session(p_session_id text, p_deleted_at text, p_reason text)
    RETURNS TABLE (head_seq bigint, head_hash bytea)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    s record;
BEGIN
    SELECT x.head_seq, x.head_hash INTO s FROM sessions x WHERE x.id = p_session_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO tombstones (session_id, head_seq, head_hash, deleted_at, reason)
        VALUES (p_session_id, s.head_seq, s.head_hash, p_deleted_at, p_reason);
    DELETE FROM trace_rows WHERE session_id = p_session_id;
    DELETE FROM session_event_keys WHERE session_id = p_session_id;
    DELETE FROM erasures WHERE session_id = p_session_id;
    DELETE FROM session_events WHERE session_id = p_session_id;
    DELETE FROM turn_leases WHERE session_id = p_session_id;
    DELETE FROM sessions WHERE id = p_session_id;
    head_seq := s.head_seq;
    head_hash := s.head_hash;
    RETURN NEXT;
END $$;

-- The trace rows of a v2 session form a chain of their own: each row's hash, and the
-- session's trace head. NULL in a v1 session.
ALTER TABLE trace_rows ADD COLUMN hash bytea;
ALTER TABLE sessions ADD COLUMN trace_count bigint NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN trace_hash bytea;
GRANT UPDATE (trace_count, trace_hash) ON sessions TO agenttrail_writer;

REVOKE ALL ON erasures FROM PUBLIC;
GRANT SELECT, INSERT ON erasures TO agenttrail_writer;
-- Erasure only: the trigger above admits nothing else.
GRANT UPDATE (payload, salt) ON session_events TO agenttrail_writer;

-- Keys that belong to this log and to no other, written once, never changed:
-- 'redaction' keys the digests of redaction markers (docs/redaction.md).
CREATE TABLE log_keys (
    name        text PRIMARY KEY,
    key         bytea NOT NULL
);

REVOKE ALL ON log_keys FROM PUBLIC;
GRANT SELECT, INSERT ON log_keys TO agenttrail_writer;
