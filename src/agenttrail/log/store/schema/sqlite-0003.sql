-- agenttrail SQLite schema, version 3: the search index (docs/search.md).
-- One row per indexed event with what a reader sees of it (text) and that text folded for
-- matching (folded: case folded, accents removed, computed above the store); an FTS5 trigram
-- index over folded, kept by triggers; and each session's watermark, the last seq indexed.
-- Derived data: dropped with the session by retention, rebuilt from the events at will.

CREATE TABLE search_events (
    id          INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    type        TEXT,
    actor       TEXT NOT NULL,
    tool        TEXT,
    error       INTEGER NOT NULL,
    model       TEXT,
    message_id  TEXT,
    text        TEXT NOT NULL,
    folded      TEXT NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE INDEX search_events_error ON search_events (session_id) WHERE error = 1;
CREATE INDEX search_events_model ON search_events (model, session_id) WHERE model IS NOT NULL;
CREATE INDEX search_events_tool ON search_events (tool) WHERE tool IS NOT NULL;
CREATE INDEX search_events_message ON search_events (session_id, message_id)
    WHERE message_id IS NOT NULL;

CREATE TABLE search_marks (
    session_id  TEXT PRIMARY KEY NOT NULL,
    seq         INTEGER NOT NULL
);

-- Trigrams of the folded text (https://www.sqlite.org/fts5.html#the_trigram_tokenizer):
-- a substring of three characters or more is found through the index, in any script.
CREATE VIRTUAL TABLE search_text USING fts5 (
    folded, content='search_events', content_rowid='id', tokenize='trigram'
);

CREATE TRIGGER search_events_indexed AFTER INSERT ON search_events
BEGIN
    INSERT INTO search_text (rowid, folded) VALUES (NEW.id, NEW.folded);
END;

CREATE TRIGGER search_events_dropped AFTER DELETE ON search_events
BEGIN
    INSERT INTO search_text (search_text, rowid, folded) VALUES ('delete', OLD.id, OLD.folded);
END;
