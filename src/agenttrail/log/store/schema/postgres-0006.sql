-- agenttrail PostgreSQL schema, version 6: the search index emptied, to be made anew by the
-- next search, because what it flags as an error changed, as schema/sqlite-0006.sql (which
-- says why).

TRUNCATE search_events, search_marks;
