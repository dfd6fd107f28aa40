-- agenttrail PostgreSQL schema, version 5: the search index emptied, to be made anew by the
-- next search, with call_id and an index of every one- and two-character substring of the
-- folded text, as schema/sqlite-0005.sql (which says why).

ALTER TABLE search_events ADD COLUMN call_id text;
CREATE INDEX search_events_call ON search_events (session_id, call_id)
    WHERE call_id IS NOT NULL;
TRUNCATE search_events, search_marks;

-- The distinct one- and two-character substrings of a folded text (characters, not bytes).
-- COST: cutting the grams of a row costs far more than testing it with LIKE; a search reads
-- this index by bitmap scans only (log/store/search.py, PostgresSearch), never row by row.
CREATE FUNCTION agenttrail_grams(folded text) RETURNS text[]
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE COST 10000
AS $$
    SELECT coalesce(array_agg(DISTINCT g), '{}') FROM (
        SELECT substr(folded, i, 1) FROM generate_series(1, length(folded)) AS i
        UNION ALL
        SELECT substr(folded, i, 2) FROM generate_series(1, length(folded) - 1) AS i
    ) AS grams (g)
$$;
CREATE INDEX search_events_grams ON search_events USING gin (agenttrail_grams(folded));
