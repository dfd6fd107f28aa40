"""What an import of a file the log holds already finds changed in it: an event whose
idempotency key is in the log (so nothing is written for it) but whose payload is not the one
stored under that key, because the file was edited since or because this agenttrail reads the
format into other payloads than the one that imported it. The log keeps what it had (it is
append-only); the importer says so instead of counting the event as already present
(docs/log-format.md, Idempotency keys)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agenttrail.codec import encode_payload
from agenttrail.log.store import Appended, LogStore
from agenttrail.model import NewEvent
from agenttrail.views.units import counted

__all__ = ["changed", "warnings"]


def warnings(
    store: LogStore,
    path: Path,
    session_id: str,
    events: Sequence[NewEvent],
    results: Sequence[Appended],
) -> list[str]:
    """The import's warning for the events of ``path`` that :func:`changed` finds (none
    when it finds none), naming their seqs (the first five)."""
    seqs = changed(store, session_id, events, results)
    if not seqs:
        return []
    listed = ", ".join(map(str, seqs[:5])) + (", …" if len(seqs) > 5 else "")
    return [
        f"{path}: {counted(len(seqs), 'event')} already in the log under the same key "
        f"{'reads' if len(seqs) == 1 else 'read'} otherwise now (seq {listed}): the file was "
        "edited since, or this agenttrail reads it otherwise; the log keeps what it had"
    ]


def changed(
    store: LogStore, session_id: str, events: Sequence[NewEvent], results: Sequence[Appended]
) -> list[int]:
    """The seqs of the stored events that ``events`` (an append's batch, each with its bytes,
    :attr:`NewEvent.data`) repeat by key with another payload, in order; ``results`` are the
    append's outcomes, one per event.

    Only events stored before the append are compared (a key twice in one batch is the
    reader's to say), and a payload as the store would store it: redacted with the store's
    rules. An erased event (its payload gone, docs/log-format.md, Erasure) is not compared.
    The session's rows are read only when the append wrote nothing for some event.
    """
    written = {done.seq for done in results if not done.duplicate}
    repeated = {
        done.seq: event
        for event, done in zip(events, results, strict=True)
        if done.duplicate and done.seq not in written
    }
    if not repeated:
        return []
    found = []
    last = max(repeated)
    for seq, _, stored, _, salt, _ in store.read_rows(session_id):
        if seq > last:
            break
        event = repeated.get(seq)
        if event is None or (not stored and salt is None):  # not repeated, or erased
            continue
        data = event.data if event.data is not None else encode_payload(event.payload)
        if stored == data:
            continue
        redacted = store.redactor.payload(event.payload, event.data)
        if redacted is event.payload or encode_payload(redacted) != stored:
            found.append(seq)
    return found
