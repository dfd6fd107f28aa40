-- agenttrail SQLite schema, version 6: the search index emptied, to be made anew by the next
-- search (docs/search.md, The index), because what it flags as an error changed. Applied
-- once, in one transaction, when PRAGMA user_version is 5. Before, `--errors` picked a tool
-- result only when the result itself said it failed (is_error, an error field, an exit
-- code), and never a shell command: a result whose output begins `error:` and a command that
-- exited non-zero, both shown as failures by every view, were not found. The index is
-- derived data: emptied, its rows are made again by the rule the views use.

-- Emptied without the per-row trigger, as in sqlite-0005.sql: the text tables at once.
DROP TRIGGER search_events_dropped;
DELETE FROM search_events;
DELETE FROM search_marks;
INSERT INTO search_text (search_text) VALUES ('delete-all');
INSERT INTO search_grams (search_grams) VALUES ('delete-all');
CREATE TRIGGER search_events_dropped AFTER DELETE ON search_events
BEGIN
    INSERT INTO search_text (search_text, rowid, folded) VALUES ('delete', OLD.id, OLD.folded);
END;
