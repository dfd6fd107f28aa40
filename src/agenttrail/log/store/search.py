"""The search index of both backends (:class:`agenttrail.model.search.SearchIndex`).

Tables ``search_events`` (one row per indexed event: its text, and that text folded for
matching) and ``search_marks`` (each session's watermark), from ``schema/*-0003.sql`` and
``*-0005.sql``. The text is computed above the store; the store only keeps the rows, matches
substrings of the folded text and drops the rows of a session that retention removed. What
differs per backend is how a substring is found through an index: SQLite's FTS5 trigram table
(``MATCH`` on a quoted phrase, https://www.sqlite.org/fts5.html#the_trigram_tokenizer),
PostgreSQL's pg_trgm GIN index (``LIKE``, https://www.postgresql.org/docs/current/pgtrgm.html
#PGTRGM-INDEX). A query shorter than three characters has no trigram: it is found through an
index of every one- and two-character substring of the folded text, SQLite's FTS5 table
``search_grams`` and PostgreSQL's GIN index on ``agenttrail_grams(folded)`` (docs/search.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, Protocol, TypeVar

from agenttrail.codec import escaped_surrogates
from agenttrail.log.store._sql import Statements, Tx
from agenttrail.model.search import IndexHit, IndexRow, SearchFilter, names_model

__all__ = ["PostgresSearch", "SQLiteSearch"]

T = TypeVar("T")

_STALE = """
SELECT s.id, coalesce(m.seq, 0) FROM sessions s LEFT JOIN search_marks m ON m.session_id = s.id
WHERE s.head_seq > coalesce(m.seq, 0) ORDER BY s.{order}
"""

_COLUMNS = tuple(f.name for f in fields(IndexRow))
"""The columns of ``search_events`` after ``session_id``, in :class:`IndexRow`'s order."""

_GRAMS = " AND agenttrail_grams(e.folded) @> ARRAY[%s::text]"
"""The condition of PostgreSQL's gram index (``schema/postgres-0005.sql``), after ``LIKE``."""

SCAN_FIRST_MS = 15
"""How long a PostgreSQL query of one or two characters may scan before it reads the gram
index instead (milliseconds; :meth:`PostgresSearch._select`); 0: the index at once."""

_IDS_PER_QUERY = 500
"""Call ids looked up in one statement (under SQLite's 999 parameters before 3.32)."""

_GONE = (
    "SELECT m.session_id FROM search_marks m "
    "WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = m.session_id)"
)
"""Sessions indexed and since removed by retention."""


def _stored(value: Any) -> Any:
    """A row's value as both drivers store it (a flag as the integer 0 or 1)."""
    return int(value) if isinstance(value, bool) else value


class _Backend(Protocol):
    sql: Statements

    def _read(self, fn: Callable[[Tx], T]) -> T: ...

    def _write(self, what: str, fn: Callable[[Any], T]) -> T: ...

    def _match(self, folded: str) -> tuple[str, str, list[Any]]: ...

    def _drop_rows(self, tx: Any, session_id: str, seqs: Sequence[int] | None = None) -> None: ...

    def _index_grams(self, tx: Any, session_id: str, rows: Sequence[IndexRow]) -> None: ...

    def _select(self, statement: str, params: list[Any], *, short: bool) -> list[Any]: ...


class _SearchBase:
    """What both backends do the same way; ``_match`` (and what keeps SQLite's gram index,
    ``_index_grams``, ``_drop_rows``) is each one's own."""

    def index_marks(self: _Backend) -> list[tuple[str, int]]:
        """See :meth:`agenttrail.model.search.SearchIndex.index_marks`."""
        order = "pos" if self.sql.param == "%s" else "rowid"

        def drop(tx: Any) -> None:
            for (gone,) in tx.execute(_GONE).fetchall():
                self._drop_rows(tx, gone)

        # Read first: a search of a log already indexed opens no write transaction.
        if self._read(lambda tx: tx.execute(_GONE).fetchone()) is not None:
            self._write("search index", drop)
        stale = self._read(lambda tx: tx.execute(_STALE.format(order=order)).fetchall())
        return [(str(s), int(n)) for s, n in stale]

    def index(
        self: _Backend, session_id: str, after_seq: int, upto_seq: int, rows: Sequence[IndexRow]
    ) -> bool:
        """See :meth:`agenttrail.model.search.SearchIndex.index`."""
        p = self.sql.param

        def write(tx: Any) -> bool:
            mark = tx.execute(
                f"SELECT seq FROM search_marks WHERE session_id = {p}", (session_id,)
            ).fetchone()
            if (int(mark[0]) if mark else 0) != after_seq:
                return False
            columns = ", ".join(["session_id", *_COLUMNS])
            values = ", ".join([p] * (1 + len(_COLUMNS)))
            tx.cursor().executemany(
                f"INSERT INTO search_events ({columns}) VALUES ({values})",
                [(session_id, *(_stored(getattr(r, c)) for c in _COLUMNS)) for r in rows],
            )
            self._index_grams(tx, session_id, rows)
            tx.execute(
                f"INSERT INTO search_marks (session_id, seq) VALUES ({p}, {p}) "
                "ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq",
                (session_id, upto_seq),
            )
            return True

        return self._write("search index", write)

    def call_tools(self: _Backend, session_id: str, call_ids: Sequence[str]) -> dict[str, str]:
        """See :meth:`agenttrail.model.search.SearchIndex.call_tools`."""
        p = self.sql.param
        found: dict[str, str] = {}
        for at in range(0, len(call_ids), _IDS_PER_QUERY):
            chunk = list(call_ids[at : at + _IDS_PER_QUERY])
            statement = (
                f"SELECT call_id, tool FROM search_events WHERE session_id = {p} "
                f"AND call_id IS NOT NULL AND call_id IN ({', '.join([p] * len(chunk))}) "
                "AND type = 'tool_call' AND tool IS NOT NULL ORDER BY seq"
            )
            params = [session_id, *chunk]

            def read(tx: Tx, statement: str = statement, params: list[str] = params) -> list[Any]:
                return list(tx.execute(statement, params).fetchall())

            found.update((str(i), str(t)) for i, t in self._read(read))
        return found

    def _select(self: _Backend, statement: str, params: list[Any], *, short: bool) -> list[Any]:
        """The rows of a search's statement (``short``: a query of one or two characters)."""
        return self._read(lambda tx: tx.execute(statement, params).fetchall())

    def flagged_sessions(
        self: _Backend, *, errors: bool = False, model: str | None = None
    ) -> set[str]:
        """See :meth:`agenttrail.model.search.SearchIndex.flagged_sessions`."""
        p = self.sql.param
        chosen: set[str] | None = None
        if errors:
            rows = self._read(
                lambda tx: tx.execute(
                    "SELECT DISTINCT session_id FROM search_events WHERE error = 1"
                ).fetchall()
            )
            chosen = {str(r[0]) for r in rows}
        if model is not None:
            recorded = self._read(
                lambda tx: tx.execute(  # through the partial index on model
                    "SELECT DISTINCT model FROM search_events WHERE model IS NOT NULL"
                ).fetchall()
            )
            named = [str(r[0]) for r in recorded if names_model(model, str(r[0]))]
            found: set[str] = set()
            if named:
                rows = self._read(
                    lambda tx: tx.execute(
                        "SELECT DISTINCT session_id FROM search_events "
                        f"WHERE model IN ({', '.join([p] * len(named))})",
                        named,
                    ).fetchall()
                )
                found = {str(r[0]) for r in rows}
            chosen = found if chosen is None else chosen & found
        if chosen is None:
            rows = self._read(
                lambda tx: tx.execute("SELECT session_id FROM search_marks").fetchall()
            )
            chosen = {str(r[0]) for r in rows}
        return chosen

    def query(self: _Backend, folded: str, where: SearchFilter, *, limit: int) -> list[IndexHit]:
        """See :meth:`agenttrail.model.search.SearchIndex.query`."""
        p = self.sql.param
        # no text: every event the filters pick (what they narrow to: SearchIndex.query)
        source, match, params = self._match(folded) if folded else ("search_events e", "1 = 1", [])
        clauses = [match]
        if where.session_ids is not None:
            if not where.session_ids:
                return []
            clauses.append(f"e.session_id IN ({', '.join([p] * len(where.session_ids))})")
            params += list(where.session_ids)
        lower = self.sql.lower  # a tool or an agent named in any case (same_name's rule)
        if where.tool is not None:
            clauses.append(f"{lower}(e.tool) = {lower}({p})")
            params.append(where.tool)
        if where.errors:
            clauses.append("e.error = 1")
        if where.agent is not None:
            clauses.append(
                f"e.session_id IN (SELECT id FROM sessions WHERE {lower}(agent) = {lower}({p}))"
            )
            params.append(where.agent)
        if where.since is not None:
            clauses.append(f"e.created_at >= {p}")
            params.append(where.since)
        if where.until is not None:  # a date: the whole day; '' is no time (IndexRow)
            clauses.append(f"substr(e.created_at, 1, {len(where.until)}) <= {p}")
            clauses.append("e.created_at <> ''")
            params.append(where.until)
        statement = (
            "SELECT e.session_id, e.seq, e.type, e.actor, e.message_id, e.text, "
            "CASE WHEN e.message_id IS NULL THEN e.seq ELSE (SELECT min(f.seq) "
            "FROM search_events f WHERE f.message_id IS NOT NULL "  # the partial index
            "AND f.session_id = e.session_id AND f.message_id = e.message_id) END "
            f"FROM {source} WHERE {' AND '.join(clauses)} LIMIT {p}"
        )
        # a filter given on the command line may hold a lone surrogate (an argument that is
        # not UTF-8): as the index's texts do (views.search.index_row), it holds an escape
        params = [escaped_surrogates(v) if isinstance(v, str) else v for v in params]
        rows = self._select(statement, [*params, limit], short=0 < len(folded) < 3)
        return [
            IndexHit(str(s), int(q), t, str(a), m, int(first or q), str(x))
            for s, q, t, a, m, x, first in rows
        ]


def _index_rows(param: str, session_id: str, seqs: Sequence[int] | None) -> tuple[str, list[Any]]:
    """The condition (and its parameters) that picks a session's rows of ``search_events``,
    or with ``seqs`` those events' rows only."""
    if seqs is None:
        return f"session_id = {param}", [session_id]
    return f"session_id = {param} AND seq IN ({', '.join([param] * len(seqs))})", [
        session_id,
        *seqs,
    ]


def _drop_index_rows(tx: Any, param: str, session_id: str, seqs: Sequence[int] | None) -> int:
    """Delete a session's rows of ``search_events`` and ``search_marks``; with ``seqs``, only
    the rows of those events (erased: their text leaves the index), the watermark kept, so
    they are not indexed again. Returns the number of ``search_events`` rows deleted."""
    if seqs is None:
        tx.execute(f"DELETE FROM search_marks WHERE session_id = {param}", (session_id,))
    where, params = _index_rows(param, session_id, seqs)
    return int(tx.execute(f"DELETE FROM search_events WHERE {where}", params).rowcount)


def grams(folded: str) -> str:
    """The tokens of ``search_grams`` for one folded text: each distinct one- and
    two-character substring, written as the hexadecimal of its UTF-32 code units (8 digits a
    character), space-separated, so that FTS5's ``ascii`` tokenizer keeps every one whole
    whatever its script or punctuation (``schema/sqlite-0005.sql``)."""
    digits = folded.encode("utf-32-be", "surrogatepass").hex()
    found = {digits[at : at + 8] for at in range(0, len(digits), 8)}
    found.update(digits[at : at + 16] for at in range(0, len(digits) - 8, 8))
    return " ".join(found)


class SQLiteSearch(_SearchBase):
    """FTS5 trigram: a quoted phrase of the folded query, a substring of three characters or
    more. Shorter ones: the one token of the query in ``search_grams``, FTS5 over every one-
    and two-character substring of the folded text (:func:`grams`), kept by the store beside
    ``search_events`` (not by triggers: SQL cannot cut the grams)."""

    def _match(self, folded: str) -> tuple[str, str, list[Any]]:
        if len(folded) >= 3:
            phrase = '"' + folded.replace('"', '""') + '"'
            match = "e.id IN (SELECT rowid FROM search_text WHERE search_text MATCH ?)"
            return "search_events e", match, [phrase]
        # CROSS JOIN: the gram index drives, so a common gram stops at the limit.
        source = "search_grams g CROSS JOIN search_events e ON e.id = g.rowid"
        token = folded.encode("utf-32-be", "surrogatepass").hex()  # the one gram it is
        return source, "g.search_grams MATCH ?", [f'"{token}"']

    def _index_grams(self, tx: Any, session_id: str, rows: Sequence[IndexRow]) -> None:
        if not rows:
            return
        ids = dict(
            tx.execute(
                "SELECT seq, id FROM search_events WHERE session_id = ? AND seq BETWEEN ? AND ?",
                (session_id, rows[0].seq, rows[-1].seq),
            ).fetchall()
        )
        tx.executemany(
            "INSERT INTO search_grams (rowid, grams) VALUES (?, ?)",
            [(ids[r.seq], grams(r.folded)) for r in rows],
        )

    def _drop_rows(self, tx: Any, session_id: str, seqs: Sequence[int] | None = None) -> None:
        """A session's index rows (with ``seqs``, those events' only: see
        :func:`_drop_index_rows`), and their grams (a contentless FTS5 table forgets a row
        only when told its tokens again: https://www.sqlite.org/fts5.html#contentless_tables).

        An FTS5 table keeps a deleted row's tokens in its index segments, marked deleted,
        until the segments are merged. For an erasure that would leave the erased text's
        trigrams in the file, so after dropping erased rows both FTS5 tables are merged whole
        (``'optimize'``, https://www.sqlite.org/fts5.html#the_optimize_command): the old
        segments are freed, and ``secure_delete`` zeroes their pages (docs/log-format.md,
        Erasure). It rewrites the index: a cost paid per erasure, in proportion to the log."""
        where, params = _index_rows("?", session_id, seqs)
        tx.executemany(
            "INSERT INTO search_grams (search_grams, rowid, grams) VALUES ('delete', ?, ?)",
            [
                (i, grams(f))
                for i, f in tx.execute(
                    f"SELECT id, folded FROM search_events WHERE {where}", params
                )
            ],
        )
        if _drop_index_rows(tx, "?", session_id, seqs) and seqs is not None:
            self._merge_index(tx)

    def _merge_index(self, tx: Any) -> None:
        """Merge both FTS5 tables whole (``'optimize'``): the segments that kept deleted rows'
        tokens are freed, and ``secure_delete`` zeroes their pages."""
        for table in ("search_text", "search_grams"):
            tx.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


class PostgresSearch(_SearchBase):
    """``LIKE '%query%'`` on the folded text, through pg_trgm's GIN index when the store could
    create it (``postgres.py``), by a scan otherwise. A query of one or two characters has no
    trigram: it goes through the GIN index of every one- and two-character substring of the
    folded text (``agenttrail_grams``, ``schema/postgres-0005.sql``), by a bitmap scan only
    (:meth:`_select`), then ``LIKE``; unless a scan finds its rows first."""

    def _match(self, folded: str) -> tuple[str, str, list[Any]]:
        escaped = folded.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        like = f"%{escaped}%"
        if len(folded) >= 3:
            return "search_events e", "e.folded LIKE %s", [like]
        return "search_events e", f"e.folded LIKE %s{_GRAMS}", [like, folded]

    def _index_grams(self, tx: Any, session_id: str, rows: Sequence[IndexRow]) -> None:
        pass  # the expression index keeps itself

    def _select(self: _Backend, statement: str, params: list[Any], *, short: bool) -> list[Any]:
        """A short query: first the statement without the gram index, a scan given
        :data:`SCAN_FIRST_MS` (a gram in most rows: the scan reaches the limit at once, where
        the index would first gather every row that holds it); past that, the gram index,
        whose plan may not scan rows (a sequential or plain index scan would cut the grams of
        every row it tests): only bitmap scans, where the gram index's condition is read from
        the index, and a plan made for the query's own values
        (https://www.postgresql.org/docs/current/runtime-config-query.html), set for this one
        transaction. Both give the same rows."""

        def run(tx: Any) -> list[Any]:
            with tx.connection.transaction():
                if short and SCAN_FIRST_MS > 0:
                    try:
                        with tx.connection.transaction():  # a savepoint: a timeout undoes it
                            tx.execute(f"SET LOCAL statement_timeout = {SCAN_FIRST_MS}")
                            scan = statement.replace(_GRAMS, "", 1)
                            return list(tx.execute(scan, [params[0], *params[2:]]).fetchall())
                    except Exception as e:
                        if getattr(e, "sqlstate", None) != "57014":  # query_canceled
                            raise
                    for plan in ("seqscan", "indexscan", "indexonlyscan"):
                        tx.execute(f"SET LOCAL enable_{plan} = off")
                    # A generic plan (the 6th run of a prepared statement) cannot tell how
                    # common the gram is, and cut grams row by row in tests: 15 ms became 300.
                    tx.execute("SET LOCAL plan_cache_mode = force_custom_plan")
                return list(tx.execute(statement, params).fetchall())

        return self._read(run)

    def _drop_rows(self, tx: Any, session_id: str, seqs: Sequence[int] | None = None) -> None:
        _drop_index_rows(tx, "%s", session_id, seqs)

    def _merge_index(self, tx: Any) -> None:
        """Nothing: PostgreSQL's deleted index rows stay in its files until ``VACUUM FULL``
        (docs/log-format.md, Erasure)."""
