"""The store contract, run on a real SQLite file and a real PostgreSQL schema: append, read,
seq, idempotency, limits, concurrency, the listener, and the checks every backend makes.

Contents follow eventsourcing's recorder tests (``eventsourcing/tests/persistence.py``): empty
append, duplicate key, atomic batch, concurrent writers, readers never seeing a gap. Every test
here takes ``store`` or ``db_url`` and so runs on both backends (``tests/conftest.py``); what
only one backend has is in ``test_store_sqlite.py`` and ``test_store_postgres.py``.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import threading
import time
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail import Recorder
from agenttrail.codec import encode_payload
from agenttrail.errors import (
    InputError,
    PayloadError,
    PayloadTooLarge,
    SessionExists,
    SessionNotFound,
    TurnInFlight,
)
from agenttrail.log.chain import verify
from agenttrail.log.digests import session_genesis
from agenttrail.log.store import Appended, LogStore, open_store
from agenttrail.log.store._backend import READ_PAGE_ROWS
from agenttrail.model import Event, NewEvent, NewSession, NewTrace, events
from tests._secrets import ALL, found_in
from tests.conftest import is_postgres


def test_a_new_session_is_empty_and_reads_nothing(store: LogStore) -> None:
    session = store.create_session(NewSession(title="t", agent="a", user="u", workspace="/w"))
    assert session.head_seq == 0
    # A new session is chain v2: its empty head is the genesis of its fields (the documented
    # layout, docs/log-format.md, Chain v2), not 32 zero bytes.
    assert session.chain_version == 2
    assert session.head_hash == session_genesis(session.id, ("t", "a", "u", "/w", None, "{}"))
    assert list(store.read(session.id)) == []
    assert store.append_batch(session.id, []) == []
    assert [s.id for s in store.sessions()] == [session.id]


def test_appends_get_seq_1_2_3_and_read_back_in_order(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    payloads = [events.message("user", f"m{i}") for i in range(5)]
    seqs = [store.append(sid, p).seq for p in payloads]
    assert seqs == [1, 2, 3, 4, 5]
    read = list(store.read(sid))
    assert [e.seq for e in read] == seqs
    assert [e.payload for e in read] == payloads
    assert [e.seq for e in store.read(sid, after_seq=2, limit=2)] == [3, 4]
    assert store.get_session(sid).head_seq == 5
    assert store.get_session(sid).head_hash == read[-1].hash


def test_events_read_are_the_events_the_dataclass_makes(store: LogStore) -> None:
    # The store builds its events without Event's __init__ (Event.stored): each must still be
    # the event the constructor makes from the same fields, erased ones included.
    sid = store.create_session(NewSession()).id
    store.append_batch(sid, [NewEvent(events.message("user", f"m{i}")) for i in range(3)])
    store.erase(sid, [2], by="me", reason="test")
    read = list(store.read(sid))
    fields = [{f.name: getattr(e, f.name) for f in dataclasses.fields(Event)} for e in read]
    assert read == [Event(**f) for f in fields]
    assert {hash(e) for e in read} == {hash(Event(**f)) for f in fields}
    assert [type(f["data"]) for f in fields] == [bytes] * 4
    assert [e.erased for e in read] == [False, True, False, False]
    assert [e.type for e in read] == ["message", "erased", "message", "erasure"]
    assert dataclasses.replace(read[0], seq=9).payload == read[0].payload
    with pytest.raises(dataclasses.FrozenInstanceError):
        read[0].seq = 5  # type: ignore[misc]


def test_read_pages_through_more_rows_than_one_page(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    n = READ_PAGE_ROWS * 2 + 7
    store.append_batch(sid, [NewEvent({"type": "x", "i": i}) for i in range(n)])
    assert [e.payload["i"] for e in store.read(sid)] == list(range(n))
    assert len(list(store.read(sid, after_seq=5, limit=READ_PAGE_ROWS + 3))) == READ_PAGE_ROWS + 3


def test_unknown_payload_shapes_come_back_byte_identical(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    odd = {"kind": "from-a-newer-server", "nested": {"z": [1, 2.5, None, True], "a": "ü"}}
    store.append(sid, odd)
    event = next(store.read(sid))
    assert event.payload == odd
    assert event.data == encode_payload(odd)
    assert event.type is None


def test_idempotent_append_returns_the_first_seq_and_writes_nothing(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    first = store.append(sid, events.message("user", "hi"), key="client-1")
    again = store.append(sid, events.message("user", "hi"), key="client-1")
    assert (first.seq, first.duplicate) == (1, False)
    assert (again.seq, again.duplicate, again.hash) == (1, True, first.hash)
    assert [e.seq for e in store.read(sid)] == [1]
    batch = store.append_batch(
        sid, [NewEvent({"type": "x"}, key="k"), NewEvent({"type": "x"}, key="k")]
    )
    assert [(r.seq, r.duplicate) for r in batch] == [(2, False), (2, True)]


def test_holds_key_looks_for_a_key_that_begins_with_a_prefix(store: LogStore) -> None:
    store.create_session(NewSession(id="s"))
    assert not store.holds_key("s", "otlp:")  # no key at all
    store.append_batch("s", [NewEvent({"type": "x"}, key="inspect:e1"), NewEvent({"type": "x"})])
    assert store.holds_key("s", "inspect:") and store.holds_key("s", "inspect:e1")
    assert not store.holds_key("s", "otlp:") and not store.holds_key("s", "inspect:e10")
    store.append("s", {"type": "x"}, key="a_%:Ω")  # read as it is, not as a pattern
    assert store.holds_key("s", "a_%:") and not store.holds_key("s", "ab%:")
    assert not store.holds_key("other", "inspect:")  # keys are a session's


def test_a_seq_or_id_beyond_the_columns_integers_names_nothing(store: LogStore) -> None:
    # An id from a URL or a command line past 2**63 made the database driver raise
    # (OverflowError: a 500 from the server, a traceback from `agenttrail trace`).
    store.create_session(NewSession(id="s"))
    store.append_batch("s", [NewEvent({"type": "x"}), NewEvent({"type": "x"})])
    assert list(store.read("s", after_seq=2**70)) == []
    assert [e.seq for e in store.read("s", after_seq=-(2**70))] == [1, 2]
    with pytest.raises(InputError, match=f"^no trace row {2**70}$"):
        store.trace(2**70)


def test_a_batch_is_atomic(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    with pytest.raises(PayloadError, match=r"payload\.bad"):
        store.append_batch(sid, [NewEvent({"type": "ok"}), NewEvent({"bad": (1, 2)})])
    assert list(store.read(sid)) == []
    with pytest.raises(InputError, match="created_at"):
        store.append_batch(sid, [NewEvent({"type": "ok"}), NewEvent({"type": "x"}, "yesterday")])
    assert store.get_session(sid).head_seq == 0


def test_append_batch_creates_the_session_in_the_same_transaction(store: LogStore) -> None:
    created = NewSession(title="imported", agent="claude-code")
    results = store.append_batch("s-1", [NewEvent({"type": "x"})], create=created)
    assert [r.seq for r in results] == [1]
    assert store.get_session("s-1").title == "imported"
    with pytest.raises(SessionNotFound):
        store.append_batch("s-2", [NewEvent({"type": "x"})])
    with pytest.raises(SessionExists):
        store.create_session(NewSession(id="s-1"))


def test_batches_of_several_sessions_commit_together_or_not_at_all(store: LogStore) -> None:
    kept = store.create_session(NewSession()).id
    store.append(kept, {"type": "x"})
    given = [
        ("z-new", [NewEvent({"type": "a"}), NewEvent({"type": "b"}, key="k")], NewSession()),
        (kept, [NewEvent({"type": "c"})], None),
        ("a-new", [NewEvent({"type": "d"})], NewSession(title="second")),
    ]
    done = store.append_sessions(given)
    # results in the order given (the locks are taken in id order), seqs per session
    assert [[r.seq for r in results.appended] for results in done] == [[1, 2], [2], [1]]
    assert [e.type for e in store.read("z-new")] == ["a", "b"]
    assert store.get_session("a-new").title == "second"
    again = store.append_sessions([("z-new", [NewEvent({"type": "b"}, key="k")], None)])
    assert [(r.seq, r.duplicate) for r in again[0].appended] == [(2, True)]
    # one bad batch, or one session that does not exist: nothing of any batch is written
    with pytest.raises(PayloadError):
        store.append_sessions(
            [(kept, [NewEvent({"type": "e"})], None), ("a-new", [NewEvent({"bad": (1,)})], None)]
        )
    with pytest.raises(SessionNotFound):
        store.append_sessions(
            [(kept, [NewEvent({"type": "e"})], None), ("missing", [NewEvent({"type": "f"})], None)]
        )
    assert store.get_session(kept).head_seq == 2
    assert store.get_session("a-new").head_seq == 1
    assert verify(store)[0].ok


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ([1, 2], "mapping"),
        ({"t": (1, 2)}, r"payload\.t"),
        ({"t": {1: "a"}}, "key 1"),
        ({"t": float("nan")}, "NaN"),
        ({"t": [b"bytes"]}, r"payload\.t\[0\]"),
    ],
)
def test_payloads_that_would_not_read_back_equal_are_refused(
    store: LogStore, payload: object, where: str
) -> None:
    sid = store.create_session(NewSession()).id
    with pytest.raises(PayloadError, match=where):
        store.append(sid, payload)  # type: ignore[arg-type]
    assert store.get_session(sid).head_seq == 0


def test_large_payloads_are_stored_whole_and_the_limit_is_named(db_url: str) -> None:
    big = "x" * (2 * 1024 * 1024)
    with open_store(db_url) as store:
        sid = store.create_session(NewSession()).id
        store.append(sid, events.tool_result("c1", "read_file", output=big))
        store.append(sid, events.tool_result("c2", "echo", output="0123456789"))
        outputs = [e.payload["output"] for e in store.read(sid)]
        assert outputs == [big, "0123456789"]
    with open_store(db_url, max_payload_bytes=1024 * 1024) as small:
        with pytest.raises(PayloadTooLarge, match="limit of 1,048,576 bytes"):
            small.append(sid, events.tool_result("c3", "read_file", output=big))
        assert small.get_session(sid).head_seq == 2


def test_the_payload_limit_comes_from_the_environment(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTTRAIL_MAX_PAYLOAD_BYTES", "100")
    with open_store(db_url) as store:
        assert store.max_payload_bytes == 100
        sid = store.create_session(NewSession()).id
        with pytest.raises(PayloadTooLarge, match="limit of 100 bytes"):
            store.append(sid, {"type": "x", "text": "y" * 200})


def test_lone_surrogates_and_other_hard_text_read_back_equal(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    texts = ["café \udc81 done", "\ud800", "nul\x00byte", "emoji 👩‍💻 rtl שלום", "\udfff\ud800"]
    for text in texts:
        store.append(sid, events.message("user", text, tag={text: text}))
    assert [e.payload["content"] for e in store.read(sid)] == texts
    assert [e.payload["tag"] for e in store.read(sid)] == [{t: t} for t in texts]


# -- one check for both backends --------------------------------------------------------------


def _trace(session_id: str, result_seq: int, tool: str = "run_model") -> NewTrace:
    return NewTrace(
        session_id=session_id,
        call_seq=result_seq - 1,
        result_seq=result_seq,
        turn_seq=None,
        tool=tool,
        inputs="{}",
        envelope=b'{"model":"m"}',
        created_at="2026-06-24T10:00:05.000000Z",
        record_hash=None,
        stated_hash=None,
        status="computed",
        detail="",
        spec="{}",
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [("tool", "run\udc80model"), ("inputs", '{"a": "\ud800"}'), ("detail", "nul\x00")],
)
def test_a_trace_row_that_would_not_be_stored_as_given_is_refused_naming_the_field(
    store: LogStore, field: str, value: str
) -> None:
    # Both backends run the same check before they write: a lone surrogate is an InputError
    # naming the field, never a driver's UnicodeEncodeError, and nothing of the batch is kept.
    sid = store.create_session(NewSession()).id
    good, bad = _trace(sid, 2), dataclasses.replace(_trace(sid, 4), **{field: value})
    with pytest.raises(InputError, match=f"trace row {field} "):
        store.add_traces([good, bad])
    assert store.traces(sid) == []
    assert [row.result_seq for row in store.add_traces([good])] == [2]


def test_a_recorded_envelope_whose_tool_name_is_not_text_is_an_input_error(
    store: LogStore,
) -> None:
    # Through the public Recorder: the tool_result is an envelope, so a trace row is written,
    # and its tool name holds a lone surrogate. The call is stored (lossless text); the trace
    # row is refused with an InputError on either backend, and the result with it: the two
    # commit in one transaction, so a result is never left without its row.
    envelope = json.dumps({"model": "m", "specVersion": "1", "inputs": {}, "outputs": {"y": 1}})
    rec = Recorder.start(store, title="surrogates")
    with rec.turn(model="m", provider="p", location="local") as turn:
        turn.user("go")
        call = turn.tool_call("run\udc80model", {"x": 1})
        with pytest.raises(InputError, match="trace row tool") as raised:
            turn.tool_result(call, envelope)
    assert not isinstance(raised.value.__cause__, UnicodeError)
    assert store.traces(rec.session_id) == []
    names = [e.payload.get("name") for e in store.read(rec.session_id) if e.type == "tool_call"]
    assert names == ["run\udc80model"]
    assert [e.type for e in store.read(rec.session_id)][-1] == "tool_call"  # no result


def test_append_traced_writes_events_and_the_rows_built_from_their_seqs(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    store.append(sid, events.tool_call("c1", "run_model", {}), key="tool_call:c1")
    seen: list[int] = []

    def rows(appended: Sequence[Appended], session: Callable[[], list[Event]]) -> list[NewTrace]:
        seen.extend(e.seq for e in session())  # the session as the transaction sees it
        return [_trace(sid, appended[0].seq)]

    result = events.tool_result("c1", "run_model", output="{}")
    done = store.append_traced(sid, [NewEvent(result, key="tool_result:c1")], rows)
    assert [a.seq for a in done.appended] == seen[1:] == [2]
    assert [(r.result_seq, r.id) for r in done.traces] == [(2, store.traces(sid)[0].id)]
    again = store.append_traced(sid, [NewEvent(result, key="tool_result:c1")], rows)
    assert (again.appended[0].seq, again.appended[0].duplicate, again.traces) == (2, True, [])


def test_append_sessions_writes_each_batchs_trace_rows_in_its_transaction(store: LogStore) -> None:
    kept = store.create_session(NewSession()).id
    store.append(kept, events.tool_call("c1", "run_model", {}), key="tool_call:c1")
    seen: dict[str, list[int]] = {}

    def rows_of(
        sid: str,
    ) -> Callable[[Sequence[Appended], Callable[[], list[Event]]], list[NewTrace]]:
        def rows(
            appended: Sequence[Appended], session: Callable[[], list[Event]]
        ) -> list[NewTrace]:
            seen[sid] = [e.seq for e in session()]  # the session as the transaction sees it
            return [_trace(sid, appended[-1].seq)]

        return rows

    result = NewEvent(events.tool_result("c1", "run_model", output="{}"), key="tool_result:c1")
    given = [("z-new", [NewEvent({"type": "a"})], NewSession()), (kept, [result], None)]
    done = store.append_sessions(given, traces=[None, rows_of(kept)])
    assert done[0].traces == [] and seen == {kept: [1, 2]}
    assert [(r.result_seq, r.id) for r in done[1].traces] == [(2, store.traces(kept)[0].id)]
    # a builder that fails: no batch is written, and no row
    with pytest.raises(InputError):
        store.append_sessions(
            [
                ("y-new", [NewEvent({"type": "b"})], NewSession()),
                (kept, [NewEvent({"type": "c"})], None),
            ],
            traces=[None, lambda a, _: [dataclasses.replace(_trace(kept, a[0].seq), tool="\x00")]],
        )
    assert (store.get_session(kept).head_seq, len(store.traces(kept))) == (2, 1)
    with pytest.raises(SessionNotFound):
        store.get_session("y-new")


def test_an_event_that_brings_its_encoded_payload_is_encoded_again_once_redacted(
    store: LogStore,
) -> None:
    # NewEvent.data is the payload's encoding done once by the caller (an import checks sizes
    # and an export's hashes on it); a payload the store redacts is no longer those bytes
    payload = events.message("user", f"my keys: {ALL}")
    plain = events.message("user", "nothing secret")
    sid = store.create_session(NewSession()).id
    given = [
        NewEvent(payload, data=encode_payload(payload)),
        NewEvent(plain, data=encode_payload(plain)),
    ]
    store.append_batch(sid, given)
    redacted, kept = store.read(sid)
    assert found_in(redacted.data) == [] and "[REDACTED:" in redacted.payload["content"]
    assert kept.data == encode_payload(plain) and verify(store)[0].ok


@pytest.mark.parametrize("failure", ["a row not stored as given", "the builder raises"])
def test_append_traced_writes_nothing_when_its_rows_fail(store: LogStore, failure: str) -> None:
    sid = store.create_session(NewSession()).id

    def rows(appended: Sequence[Appended], _: Callable[[], list[Event]]) -> list[NewTrace]:
        if failure == "the builder raises":
            raise ZeroDivisionError
        return [dataclasses.replace(_trace(sid, appended[0].seq), tool="nul\x00")]

    with pytest.raises((InputError, ZeroDivisionError)):
        store.append_traced(sid, [NewEvent({"type": "tool_result"})], rows)
    assert (store.get_session(sid).head_seq, list(store.read(sid)), store.traces(sid)) == (
        0,
        [],
        [],
    )


# -- concurrency: gapless, unique seq --------------------------------------------------------


def test_threads_sharing_a_store_never_gap_or_duplicate_seq(store: LogStore) -> None:
    sid = store.create_session(NewSession()).id
    seen: list[int] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        for i in range(50):
            seq = store.append(sid, {"type": "x", "writer": n, "i": i}).seq
            with lock:
                seen.append(seq)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == list(range(1, 401))
    assert [e.seq for e in store.read(sid)] == list(range(1, 401))


PROCESSES, THREADS, APPENDS = 4, 4, 40
"""4 processes × 4 threads appending to one session: the load docs/log-format.md promises
holds (no gap, no duplicate, no deadlock)."""


def _process_writer(db: str, sid: str, n: int, count: int) -> None:
    with open_store(db) as store:

        def one_thread(t: int) -> None:
            for i in range(count):
                store.append(sid, {"type": "x", "p": n, "t": t, "i": i})

        threads = [threading.Thread(target=one_thread, args=(t,)) for t in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def test_processes_and_threads_appending_to_one_session_never_gap(db_url: str) -> None:
    # Gapless, no duplicates, no deadlock (every process ends in time, with exit code 0), and
    # the chain verifies: on SQLite through its write lock, on PostgreSQL through the session
    # row lock that the seq-allocating UPDATE takes.
    with open_store(db_url) as store:
        sid = store.create_session(NewSession()).id
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_process_writer, args=(db_url, sid, n, APPENDS))
        for n in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    total = PROCESSES * THREADS * APPENDS
    with open_store(db_url) as store:
        got = list(store.read(sid))
        assert [e.seq for e in got] == list(range(1, total + 1))
        writers = {(e.payload["p"], e.payload["t"], e.payload["i"]) for e in got}
        assert len(writers) == total
        assert verify(store)[0].ok


# -- the listener (server replicas) ----------------------------------------------------------


def test_appends_by_another_store_wake_a_listener(db_url: str) -> None:
    with open_store(db_url) as reader, open_store(db_url) as writer:
        listener = reader.listen()
        if not is_postgres(db_url):
            assert listener is None  # SQLite: the live feed polls session heads
            return
        assert listener is not None
        try:
            assert listener.wait(1.0) is None  # connected: anything before may be missed
            sid = writer.create_session(NewSession()).id
            assert listener.wait(0.2) == []  # creating a session is no append
            writer.append_batch(sid, [NewEvent({"type": "x"}), NewEvent({"type": "y"})])
            writer.append(sid, {"type": "z"})
            woken: list[str] = []
            deadline = time.monotonic() + 10
            while len(woken) < 2 and time.monotonic() < deadline:
                woken += listener.wait(1.0) or []
            assert woken == [sid, sid]  # one per committed append, in commit order
            writer.acquire_turn(sid, turn_id="t1", holder="agent", ttl_s=60)
            with pytest.raises(TurnInFlight):
                writer.append_batch(sid, [NewEvent({"type": "user"})], unless_turn=True)
            assert listener.wait(0.3) == []  # a refused (rolled back) append wakes no one
        finally:
            listener.close()


# -- properties (Hypothesis) ---------------------------------------------------------------

_settings = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_settings
@given(
    plan=st.lists(
        st.lists(st.tuples(st.integers(1, 5), st.booleans()), min_size=1, max_size=6),
        min_size=2,
        max_size=5,
    )
)
def test_seq_stays_gapless_and_unique_under_concurrent_batches(
    store: LogStore, plan: list[list[tuple[int, bool]]]
) -> None:
    # Each thread appends batches of random size; some events reuse an idempotency key that
    # another thread may already have written, so some appends are duplicates. Each example
    # writes a session of its own.
    sid = store.create_session(NewSession()).id
    results: list[Appended] = []
    lock = threading.Lock()

    def writer(n: int, batches: list[tuple[int, bool]]) -> None:
        for size, shared in batches:
            batch = [
                NewEvent({"type": "x", "w": n, "i": i}, key=f"shared-{i}" if shared else None)
                for i in range(size)
            ]
            got = store.append_batch(sid, batch)
            with lock:
                results.extend(got)

    threads = [threading.Thread(target=writer, args=(n, b)) for n, b in enumerate(plan)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    written = sorted(r.seq for r in results if not r.duplicate)
    assert written == list(range(1, len(written) + 1))
    assert [e.seq for e in store.read(sid)] == written
    assert store.get_session(sid).head_seq == len(written)


@_settings
@given(texts=st.lists(st.text(st.characters(codec=None, categories=None)), min_size=1, max_size=5))
def test_any_text_round_trips_through_the_store(db_url: str, texts: list[str]) -> None:
    # Each example writes a session of its own. Redaction off: a text such as
    # "AUTHORIZATION" names a credential, and a key so named has its value redacted
    # (tests/log/test_redact.py); what is tested here is that the store keeps any text.
    with open_store(db_url, redact=False) as store:
        sid = store.create_session(NewSession()).id
        batch = [NewEvent(events.message("user", t, note={t: [t]})) for t in texts]
        store.append_batch(sid, batch)
        got = [e.payload for e in store.read(sid)]
    assert [p["content"] for p in got] == texts
    assert [p["note"] for p in got] == [{t: [t]} for t in texts]
