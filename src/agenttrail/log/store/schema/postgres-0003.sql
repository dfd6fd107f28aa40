-- agenttrail PostgreSQL schema, version 3: the search index (docs/search.md).
-- The same tables as schema/sqlite-0003.sql (less SQLite's FTS5 table): one row per indexed
-- event, its text and that text folded for matching, and each session's watermark. The
-- trigram index on folded is made by the store when pg_trgm can be had (postgres.py).

CREATE TABLE search_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id  text NOT NULL,
    seq         bigint NOT NULL,
    created_at  text NOT NULL,
    type        text,
    actor       text NOT NULL,
    tool        text,
    error       integer NOT NULL,
    model       text,
    message_id  text,
    text        text NOT NULL,
    folded      text NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE INDEX search_events_error ON search_events (session_id) WHERE error = 1;
CREATE INDEX search_events_model ON search_events (model, session_id) WHERE model IS NOT NULL;
CREATE INDEX search_events_tool ON search_events (tool) WHERE tool IS NOT NULL;
CREATE INDEX search_events_message ON search_events (session_id, message_id)
    WHERE message_id IS NOT NULL;

CREATE TABLE search_marks (
    session_id  text PRIMARY KEY NOT NULL,
    seq         bigint NOT NULL
);

-- Derived data: the writer may rebuild it, unlike the events it is derived from.
GRANT SELECT, INSERT, UPDATE, DELETE ON search_events, search_marks TO agenttrail_writer;
