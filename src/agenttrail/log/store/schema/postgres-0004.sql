-- agenttrail PostgreSQL schema, version 4: the idempotency keys chained, as sqlite-0004.sql.
-- Layout: docs/log-format.md (Chain v2, Idempotency keys).

ALTER TABLE session_event_keys ADD COLUMN hash bytea;
ALTER TABLE sessions ADD COLUMN key_count bigint NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN key_hash bytea;
GRANT UPDATE (key_count, key_hash) ON sessions TO agenttrail_writer;

-- The keys stored before this version are chained once, by the upgrade that runs this script
-- (the store's chain_keys_written_before, in the same transaction, as the owner): setting a
-- NULL hash, and nothing else, is the one UPDATE admitted. The writer role has no UPDATE on
-- the table at all.
CREATE FUNCTION agenttrail_key_hash_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.hash IS NULL AND NEW.hash IS NOT NULL
       AND NEW.session_id IS NOT DISTINCT FROM OLD.session_id
       AND NEW.key IS NOT DISTINCT FROM OLD.key AND NEW.seq = OLD.seq THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'agenttrail: session_event_keys is append-only: UPDATE refused'
        USING ERRCODE = 'restrict_violation';
END $$;
DROP TRIGGER session_event_keys_no_update ON session_event_keys;
CREATE TRIGGER session_event_keys_no_update BEFORE UPDATE ON session_event_keys
    FOR EACH ROW EXECUTE FUNCTION agenttrail_key_hash_once();

-- The log's own rows, tombstones and log_keys, each form a chain in the order written
-- (pos), whose heads log_heads keeps (docs/log-format.md, What the chain covers). The rows
-- stored before this version are chained once by the upgrade, as the keys above; a row
-- written since is chained by the trigger below, after it is in (an INSERT … ON CONFLICT DO
-- NOTHING that inserts nothing chains nothing), as the owner: the writer role may not touch
-- log_heads, nor UPDATE either table.
ALTER TABLE tombstones ADD COLUMN hash bytea;
ALTER TABLE log_keys ADD COLUMN hash bytea;
ALTER TABLE log_keys ADD COLUMN pos bigint GENERATED ALWAYS AS IDENTITY UNIQUE;
CREATE TABLE log_heads (
    name        text PRIMARY KEY,               -- the table: tombstones, log_keys
    count       bigint NOT NULL,
    hash        bytea NOT NULL
);
INSERT INTO log_heads (name, count, hash) VALUES
    ('tombstones', 0, '\x0000000000000000000000000000000000000000000000000000000000000000'),
    ('log_keys', 0, '\x0000000000000000000000000000000000000000000000000000000000000000');

-- field(text) and field(bytes) of docs/log-format.md (agenttrail/log/digests.py).
CREATE FUNCTION agenttrail_field(value text) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN value IS NULL THEN '\x00'::bytea ELSE '\x01'::bytea
        || int4send(octet_length(convert_to(value, 'UTF8'))) || convert_to(value, 'UTF8') END
$$;
CREATE FUNCTION agenttrail_field(value bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN value IS NULL THEN '\x00'::bytea ELSE '\x02'::bytea
        || int4send(octet_length(value)) || value END
$$;

CREATE FUNCTION agenttrail_chain_log_row() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    head record;
    preimage bytea;
    digest bytea;
BEGIN
    SELECT count, hash INTO head FROM log_heads WHERE name = TG_TABLE_NAME FOR UPDATE;
    IF TG_TABLE_NAME = 'tombstones' THEN
        preimage := convert_to('agenttrail-tombstone-v2', 'UTF8') || '\x00'::bytea || head.hash
            || agenttrail_field(NEW.session_id) || '\x03'::bytea || int8send(NEW.head_seq)
            || agenttrail_field(NEW.head_hash) || agenttrail_field(NEW.deleted_at)
            || agenttrail_field(NEW.reason);
        digest := sha256(preimage);
        UPDATE tombstones SET hash = digest WHERE session_id = NEW.session_id;
    ELSE
        preimage := convert_to('agenttrail-log-key-v2', 'UTF8') || '\x00'::bytea || head.hash
            || agenttrail_field(NEW.name) || agenttrail_field(NEW.key);
        digest := sha256(preimage);
        UPDATE log_keys SET hash = digest WHERE name = NEW.name;
    END IF;
    UPDATE log_heads SET count = head.count + 1, hash = digest WHERE name = TG_TABLE_NAME;
    RETURN NULL;
END $$;

-- Setting a NULL hash once, and nothing else, is the one UPDATE of either table.
CREATE FUNCTION agenttrail_log_hash_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.hash IS NULL AND NEW.hash IS NOT NULL
       AND (to_jsonb(NEW) - 'hash') = (to_jsonb(OLD) - 'hash') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'agenttrail: %: UPDATE refused',
        CASE TG_TABLE_NAME WHEN 'tombstones' THEN 'tombstones are permanent'
                           ELSE 'log keys are never changed' END
        USING ERRCODE = 'restrict_violation';
END $$;
DROP TRIGGER tombstones_no_update ON tombstones;
CREATE TRIGGER tombstones_no_update BEFORE UPDATE ON tombstones
    FOR EACH ROW EXECUTE FUNCTION agenttrail_log_hash_once();
CREATE TRIGGER log_keys_no_update BEFORE UPDATE ON log_keys
    FOR EACH ROW EXECUTE FUNCTION agenttrail_log_hash_once();
CREATE TRIGGER log_keys_no_delete BEFORE DELETE ON log_keys
    FOR EACH ROW EXECUTE FUNCTION agenttrail_refuse('log keys are never changed');
CREATE TRIGGER log_keys_no_truncate BEFORE TRUNCATE ON log_keys
    FOR EACH STATEMENT EXECUTE FUNCTION agenttrail_refuse('log keys are never changed');
-- The head is locked before the rows are formed (and their pos drawn), so that concurrent
-- writers chain in pos order.
CREATE FUNCTION agenttrail_lock_log_head() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM 1 FROM log_heads WHERE name = TG_TABLE_NAME FOR UPDATE;
    RETURN NULL;
END $$;
CREATE TRIGGER tombstones_lock_head BEFORE INSERT ON tombstones
    FOR EACH STATEMENT EXECUTE FUNCTION agenttrail_lock_log_head();
CREATE TRIGGER log_keys_lock_head BEFORE INSERT ON log_keys
    FOR EACH STATEMENT EXECUTE FUNCTION agenttrail_lock_log_head();
CREATE TRIGGER tombstones_chained AFTER INSERT ON tombstones
    FOR EACH ROW EXECUTE FUNCTION agenttrail_chain_log_row();
CREATE TRIGGER log_keys_chained AFTER INSERT ON log_keys
    FOR EACH ROW EXECUTE FUNCTION agenttrail_chain_log_row();

CREATE FUNCTION agenttrail_log_head_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.name = OLD.name AND NEW.count > OLD.count THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'agenttrail: a log head only moves forward: % refused', TG_OP
        USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER log_heads_forward_only BEFORE UPDATE OR DELETE ON log_heads
    FOR EACH ROW EXECUTE FUNCTION agenttrail_log_head_forward();
CREATE TRIGGER log_heads_no_truncate BEFORE TRUNCATE ON log_heads
    FOR EACH STATEMENT EXECUTE FUNCTION agenttrail_refuse('log heads are permanent');

REVOKE ALL ON log_heads FROM PUBLIC;
GRANT SELECT ON log_heads TO agenttrail_writer;
