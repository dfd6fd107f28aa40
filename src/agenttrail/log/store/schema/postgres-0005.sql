-- agenttrail PostgreSQL schema, version 5: the search index emptied, to be made anew by the
-- next search, with call_id and an index of every one- and two-character substring of the
-- folded text, as schema/sqlite-0005.sql (which says why).

ALTER TABLE search_events ADD COLUMN call_id text;
CREATE INDEX search_events_call ON search_events (session_id, call_id)
    WHERE call_id IS NOT NULL;
TRUNCATE search_events, search_marks;

-- The one- and two-character substrings of a folded text (characters, not bytes): each
-- character, then the pairs from the first character on and from the second (repeats are
-- kept; GIN keeps each key of a row once). Regular expressions, not a generate_series of
-- substr: 2.6 times faster to cut, measured. COST: cutting the grams of a row costs far
-- more than testing it with LIKE; a search reads this index by bitmap scans only
-- (log/store/search.py, PostgresSearch), never row by row.
CREATE FUNCTION agenttrail_grams(folded text) RETURNS text[]
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE COST 10000
AS $$
    SELECT string_to_array(folded, NULL)
        || ARRAY(SELECT m[1] FROM regexp_matches(folded, '(..)', 'g') AS m)
        || ARRAY(SELECT m[1] FROM regexp_matches(substr(folded, 2), '(..)', 'g') AS m)
$$;
CREATE INDEX search_events_grams ON search_events USING gin (agenttrail_grams(folded));
