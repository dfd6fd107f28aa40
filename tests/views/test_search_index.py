"""Search through the store's index (agenttrail.views.search over log/store/search.py), on real
SQLite files and the real PostgreSQL server: scripts, case folding, accents, filters, and the
index kept in step with appends made after a search."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agenttrail.log.store import LogStore, open_store
from agenttrail.log.store import search as store_search
from agenttrail.log.store.sqlite import SCHEMA_VERSION
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.model.search import SearchFilter
from agenttrail.views.search import bring_up_to_date, fold, search
from tests.conftest import postgres_schema

# Sentences written for these tests (no third-party text); the expected hits are the events
# each word was put in by hand below.
WORLD = [
    events.message("user", "東京都の天気を教えてください"),  # 1 Japanese
    events.message("assistant", "北京今天下雨"),  # 2 Chinese
    events.message("user", "مرحبا بالعالم، كيف حالك؟"),  # 3 Arabic
    events.message("assistant", "Привет, МИР! Ёлка"),  # 4 Cyrillic
    events.message("user", "Die Straße in München; un café crème à Paris"),  # 5 German, French
    events.tool_call("c1", "grep", {"pattern": "needle", "path": "/srv"}),  # 6
    events.tool_result("c1", output="", error="permission denied: /srv"),  # 7 failed
    events.tool_call("c2", "read_file", {"path": "notes.txt"}),  # 8
    events.tool_result("c2", output="the needle is here"),  # 9
    events.error("model overloaded"),  # 10
]


def _seqs(store: LogStore, query: str, where: SearchFilter | None = None) -> dict[str, list[int]]:
    found = search(store, query, store.sessions(), where=where, hits_per_session=50)
    return {m.session_id: [h.seq for h in m.hits] for m in found}


def _world(store: LogStore, sid: str = "w", **fields: Any) -> str:
    store.create_session(NewSession(sid, **fields))
    store.append_batch(sid, [NewEvent(p) for p in WORLD])
    return sid


@pytest.mark.parametrize(
    ("query", "seq"),
    [
        ("東京", 1),  # two CJK characters: shorter than a trigram, found all the same
        ("天気を教え", 1),
        ("北京", 2),
        ("下雨", 2),
        ("مرحبا", 3),
        ("بالعالم", 3),
        ("привет", 4),
        ("мир", 4),
        ("ЁЛКА", 4),
        ("STRASSE", 5),  # casefold: ß is ss
        ("straße", 5),
        ("MUNCHEN", 5),  # accents removed
        ("Cafe Creme", 5),
        ("CAFÉ", 5),
        ("a paris", 5),  # à is a
    ],
)
def test_every_script_is_found_whatever_the_case_and_accents(
    store: LogStore, query: str, seq: int
) -> None:
    sid = _world(store)
    assert _seqs(store, query) == {sid: [seq]}


SHORT = [
    # Too short for a trigram: found through the one- and two-character index, folded the
    # same way. Expected seqs: the events of WORLD that hold the query, read by hand.
    ("北京", [2]),
    ("京", [1, 2]),  # 東京, 北京
    ("天", [1, 2]),  # 天気, 今天
    ("雨", [2]),  # the text's last character
    ("下雨", [2]),  # the text's last two
    ("مر", [3]),
    ("لع", [3]),  # inside بالعالم
    ("؟", [3]),  # Arabic question mark, the last character
    ("Ё", [4]),  # folded to е, as in Привет and Ёлка
    ("ß", [5, 7]),  # folded to ss: Straße and permission
    ("xt", [8]),  # notes.txt
    ("/S", [6, 7]),  # /srv, in a call's arguments and a result's error
    ("q", []),
]


@pytest.mark.parametrize(("query", "seqs"), SHORT)
def test_queries_of_one_or_two_characters_are_found_in_every_script(
    store: LogStore, query: str, seqs: list[int]
) -> None:
    sid = _world(store)
    assert _seqs(store, query) == ({sid: seqs} if seqs else {})
    store.append(sid, events.message("user", "下雨了吗? q"))  # kept in step with appends
    found = [*seqs, 11] if query in ("雨", "下雨", "q") else seqs
    assert _seqs(store, query) == ({sid: found} if found else {})


@pytest.mark.parametrize(("query", "seqs"), SHORT)
def test_postgresql_finds_short_queries_through_the_gram_index_alone(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, query: str, seqs: list[int]
) -> None:
    # A log this small is always scanned first; with no time to scan, the gram index answers.
    monkeypatch.setattr(store_search, "SCAN_FIRST_MS", 0)
    with postgres_schema(postgres_url) as url, open_store(url) as store:
        sid = _world(store)
        assert _seqs(store, query) == ({sid: seqs} if seqs else {})


def test_the_snippet_is_cut_from_the_text_as_written(store: LogStore) -> None:
    sid = _world(store)
    (match,) = search(store, "strasse in munchen", store.sessions())
    assert (match.session_id, match.hits[0].snippet) == (
        sid,
        "Die Straße in München; un café crème à Paris",
    )


def test_tool_names_inputs_outputs_and_errors_are_found_and_filtered(store: LogStore) -> None:
    sid = _world(store, agent="harvey")
    _world(store, "other", agent="mistral")
    assert _seqs(store, "needle") == {sid: [6, 9], "other": [6, 9]}
    assert _seqs(store, "read_file") == {sid: [8], "other": [8]}
    assert _seqs(store, "needle", SearchFilter(tool="grep")) == {sid: [6], "other": [6]}
    assert _seqs(store, "e", SearchFilter(errors=True)) == {sid: [7, 10], "other": [7, 10]}
    assert _seqs(store, "needle", SearchFilter(agent="mistral")) == {"other": [6, 9]}
    assert _seqs(store, "needle", SearchFilter(session_ids=["other"])) == {"other": [6, 9]}
    assert _seqs(store, "needle", SearchFilter(since="2999-01-01")) == {}


def test_an_agent_and_a_tool_beyond_ascii_are_named_in_any_case(store: LogStore) -> None:
    # SQLite's own lower() lowers ASCII letters only; Python's and PostgreSQL's every letter
    sid = _world(store, "equipe", agent="Équipe")
    _world(store, "other", agent="Ärger")
    store.append(sid, events.tool_call("c9", "Übersetzen", {"text": "needle"}))
    store.append(sid, events.tool_result("c9", "Übersetzen", output="needle done"))
    assert _seqs(store, "needle", SearchFilter(agent="ÉQUIPE")) == {sid: [6, 9, 11, 12]}
    assert _seqs(store, "needle", SearchFilter(agent="équipe")) == {sid: [6, 9, 11, 12]}
    assert _seqs(store, "needle", SearchFilter(tool="ÜBERSETZEN")) == {sid: [11, 12]}
    assert _seqs(store, "needle", SearchFilter(agent="ärger")) == {"other": [6, 9]}


def test_events_appended_after_a_search_are_found_by_the_next(store: LogStore) -> None:
    sid = _world(store)
    assert _seqs(store, "zebra") == {}
    store.append(sid, events.message("assistant", "a Zebra crossed"))
    store.create_session(NewSession("late"))
    store.append("late", events.message("user", "ZEBRAS everywhere"))
    assert _seqs(store, "zebra") == {sid: [11], "late": [1]}
    assert bring_up_to_date(store) == 0  # nothing left to index
    store.append(sid, events.message("user", "zebra again"))
    assert bring_up_to_date(store) == 1
    assert _seqs(store, "zebra") == {sid: [11, 12], "late": [1]}


def test_a_removed_session_leaves_nothing_in_the_index(store: LogStore) -> None:
    sid = _world(store)
    _world(store, "kept")
    assert set(_seqs(store, "needle")) == {sid, "kept"}
    store.remove_session(sid, reason="retention test")
    assert set(_seqs(store, "needle")) == {"kept"}
    assert _seqs(store, "京") == {"kept": [1, 2]}
    assert store.flagged_sessions() == {"kept"}


def test_a_removed_sessions_grams_leave_the_sqlite_gram_index(db_path: Path) -> None:
    with open_store(db_path) as store:
        _world(store, "gone")
        _world(store, "kept")
        assert set(_seqs(store, "京")) == {"gone", "kept"}
        store.remove_session("gone", reason="retention test")
    # 京 is U+4EAC: its token is its UTF-32 code unit in hexadecimal (sqlite-0005.sql).
    with closing(sqlite3.connect(db_path)) as raw:
        found = raw.execute(
            "SELECT g.rowid, e.session_id FROM search_grams g LEFT JOIN search_events e "
            "ON e.id = g.rowid WHERE search_grams MATCH '\"00004eac\"'"
        ).fetchall()
    assert sorted(session for _, session in found) == ["kept", "kept"]


def test_a_query_of_quotes_and_wildcards_is_plain_text(store: LogStore) -> None:
    store.create_session(NewSession("q"))
    store.append_batch(
        "q", [NewEvent(events.message("user", t)) for t in ('say "hi" 100%', "a_b", "100x")]
    )
    assert _seqs(store, '"hi"') == {"q": [1]}
    assert _seqs(store, "100%") == {"q": [1]}
    assert _seqs(store, "a_b") == {"q": [2]}
    assert _seqs(store, "%") == {"q": [1]}


def test_folding_is_unicode_case_folding_without_latin_accents() -> None:
    # Expectations from Unicode's CaseFolding.txt and the NFKD decompositions of
    # UnicodeData.txt, not from the code: ß → ss, ﬁ → fi, full-width Ａ → a, é → e + U+0301.
    assert fold("Straße") == "strasse"
    assert fold("ﬁle Ａ") == "file a"
    assert fold("Crème Brûlée") == "creme brulee"
    # marks of other scripts stay: Japanese voicing (が), Arabic vowels (fatha)
    assert fold("が") == "が" and fold("ｶﾞ") == "ガ".casefold()
    assert fold("مَ") == "مَ"


def test_a_log_of_schema_version_1_is_migrated_and_its_events_found(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with open_store(path) as store:
        _world(store)
    # Back to what schema version 2 wrote: no search tables, no chained keys (sqlite-0005.sql,
    # sqlite-0004.sql and sqlite-0003.sql undone by hand).
    with closing(sqlite3.connect(path)) as raw:
        for trigger in (
            "session_event_keys_no_update",
            "tombstones_no_update",
            "log_keys_no_update",
            "log_keys_no_delete",
            "log_heads_forward_only",
            "log_heads_no_delete",
        ):
            raw.execute(f"DROP TRIGGER {trigger}")
        raw.execute("DROP TABLE log_heads")
        for table, column in (
            ("session_event_keys", "hash"),
            ("sessions", "key_count"),
            ("sessions", "key_hash"),
            ("tombstones", "hash"),
            ("log_keys", "hash"),
        ):
            raw.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        for table in ("session_event_keys", "tombstones"):
            raw.execute(
                f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
                "BEGIN SELECT RAISE(ABORT, 'agenttrail: refused'); END"
            )
        for table in ("search_grams", "search_text", "search_events", "search_marks"):
            raw.execute(f"DROP TABLE {table}")
        raw.execute("PRAGMA user_version = 2")
        raw.commit()
    with open_store(path, create=False) as store:
        assert _seqs(store, "straße") == {"w": [5]}
    with closing(sqlite3.connect(path)) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
