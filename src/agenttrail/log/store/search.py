"""The search index of both backends (:class:`agenttrail.model.search.SearchIndex`).

Tables ``search_events`` (one row per indexed event: its text, and that text folded for
matching) and ``search_marks`` (each session's watermark), from ``schema/*-0002.sql``. The
text is computed above the store; the store only keeps the rows, matches substrings of the
folded text and drops the rows of a session that retention removed. What differs per
backend is how a substring is found through an index: SQLite's FTS5 trigram table
(``MATCH`` on a quoted phrase, https://www.sqlite.org/fts5.html#the_trigram_tokenizer),
PostgreSQL's pg_trgm GIN index (``LIKE``, https://www.postgresql.org/docs/current/pgtrgm.html
#PGTRGM-INDEX). A query shorter than three characters has no trigram: it is matched by a scan
of the folded text, correct but slower (docs/search.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, Protocol, TypeVar

from agenttrail.log.store._sql import Statements, Tx
from agenttrail.model.search import IndexHit, IndexRow, SearchFilter

__all__ = ["PostgresSearch", "SQLiteSearch"]

T = TypeVar("T")

_STALE = """
SELECT s.id, coalesce(m.seq, 0) FROM sessions s LEFT JOIN search_marks m ON m.session_id = s.id
WHERE s.head_seq > coalesce(m.seq, 0) ORDER BY s.{order}
"""

_COLUMNS = tuple(f.name for f in fields(IndexRow))
"""The columns of ``search_events`` after ``session_id``, in :class:`IndexRow`'s order."""

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

    def _match(self, folded: str) -> tuple[str, Any]: ...


class _SearchBase:
    """What both backends do the same way; ``_match`` is each one's own."""

    def index_marks(self: _Backend) -> list[tuple[str, int]]:
        """See :meth:`agenttrail.model.search.SearchIndex.index_marks`."""
        order = "pos" if self.sql.param == "%s" else "rowid"
        p = self.sql.param

        def drop(tx: Any) -> None:
            for (gone,) in tx.execute(_GONE).fetchall():
                tx.execute(f"DELETE FROM search_events WHERE session_id = {p}", (gone,))
                tx.execute(f"DELETE FROM search_marks WHERE session_id = {p}", (gone,))

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
            tx.execute(
                f"INSERT INTO search_marks (session_id, seq) VALUES ({p}, {p}) "
                "ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq",
                (session_id, upto_seq),
            )
            return True

        return self._write("search index", write)

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
            rows = self._read(
                lambda tx: tx.execute(
                    f"SELECT DISTINCT session_id FROM search_events WHERE model = {p}", (model,)
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
        match, value = self._match(folded)
        clauses, params = [match], [value]
        if where.session_ids is not None:
            if not where.session_ids:
                return []
            clauses.append(f"e.session_id IN ({', '.join([p] * len(where.session_ids))})")
            params += list(where.session_ids)
        if where.tool is not None:
            clauses.append(f"e.tool = {p}")
            params.append(where.tool)
        if where.errors:
            clauses.append("e.error = 1")
        if where.agent is not None:
            clauses.append(f"e.session_id IN (SELECT id FROM sessions WHERE agent = {p})")
            params.append(where.agent)
        if where.since is not None:
            clauses.append(f"e.created_at >= {p}")
            params.append(where.since)
        statement = (
            "SELECT e.session_id, e.seq, e.type, e.actor, e.message_id, e.text, "
            "CASE WHEN e.message_id IS NULL THEN e.seq ELSE (SELECT min(f.seq) "
            "FROM search_events f WHERE f.message_id IS NOT NULL "  # the partial index
            "AND f.session_id = e.session_id AND f.message_id = e.message_id) END "
            f"FROM search_events e WHERE {' AND '.join(clauses)} LIMIT {p}"
        )
        rows = self._read(lambda tx: tx.execute(statement, [*params, limit]).fetchall())
        return [
            IndexHit(str(s), int(q), t, str(a), m, int(first or q), str(x))
            for s, q, t, a, m, x, first in rows
        ]


class SQLiteSearch(_SearchBase):
    """FTS5 trigram: a quoted phrase of the folded query, a substring of three characters or
    more; shorter ones by ``instr`` over the folded text."""

    def _match(self, folded: str) -> tuple[str, Any]:
        if len(folded) >= 3:
            phrase = '"' + folded.replace('"', '""') + '"'
            return "e.id IN (SELECT rowid FROM search_text WHERE search_text MATCH ?)", phrase
        return "instr(e.folded, ?) > 0", folded


class PostgresSearch(_SearchBase):
    """``LIKE '%query%'`` on the folded text, through pg_trgm's GIN index when the store could
    create it (``postgres.py``), by a scan otherwise."""

    def _match(self, folded: str) -> tuple[str, Any]:
        escaped = folded.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return "e.folded LIKE %s", f"%{escaped}%"
