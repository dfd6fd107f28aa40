-- agenttrail SQLite schema, version 5: the search index emptied, to be made anew by the next
-- search (docs/search.md, The index), with two additions. Applied once, in one transaction,
-- when PRAGMA user_version is 4. The index is derived data: emptied, its rows are corrected,
-- not patched, when the next search indexes every event again.
-- - call_id: a tool call's id or a tool result's toolCallId. A result is indexed under its
--   call's tool name, found by this id; before, a result whose own payload names no tool (most
--   results of OpenAI, Anthropic and Claude Code) had no tool, and --tool missed it.
-- - search_grams: every one- and two-character substring of the folded text, for queries too
--   short for a trigram (two CJK characters are a common word), which scanned the table.

ALTER TABLE search_events ADD COLUMN call_id TEXT;
CREATE INDEX search_events_call ON search_events (session_id, call_id)
    WHERE call_id IS NOT NULL;

-- Emptied without the per-row trigger: the trigram table is emptied at once instead.
DROP TRIGGER search_events_dropped;
DELETE FROM search_events;
DELETE FROM search_marks;
INSERT INTO search_text (search_text) VALUES ('delete-all');
CREATE TRIGGER search_events_dropped AFTER DELETE ON search_events
BEGIN
    INSERT INTO search_text (search_text, rowid, folded) VALUES ('delete', OLD.id, OLD.folded);
END;

-- One- and two-character substrings of the folded text, one token each (the hexadecimal of
-- its UTF-32 code units, so the ascii tokenizer keeps any script and punctuation whole:
-- log/store/search.py, grams), rowid the search_events id. Contentless and without
-- positions (detail=none): only which rows hold a gram. Kept by the store, which writes the
-- tokens with each row and gives them again to delete it (SQL cannot cut the grams).
CREATE VIRTUAL TABLE search_grams USING fts5 (
    grams, content='', detail='none', tokenize='ascii'
);
