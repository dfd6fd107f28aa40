"""A writer for the kill tests (tests/faults/test_kill_writer.py), run as a subprocess:
``python -m tests.faults._writer single|batch DB SESSION``. It appends until it is killed and
reports each acknowledged append on stdout, one line each, flushed before the next append:
``ack <tag> <seq> …`` (the seqs the store returned). ``ready`` comes first, once the store is
open."""

from __future__ import annotations

import sys

from agenttrail.log.store import open_store
from agenttrail.model import NewEvent

BATCH = 8
"""Events per batch append."""


def main(mode: str, db: str, session_id: str) -> None:
    with open_store(db) as store:
        print("ready", flush=True)
        n = 0
        while True:
            n += 1
            tag = f"{mode}-{n}-{id(store):x}"  # unique to this child and this append
            if mode == "single":
                done = [store.append(session_id, {"type": "x", "tag": tag}, key=tag)]
            else:
                batch = [NewEvent({"type": "x", "tag": tag, "j": j}) for j in range(BATCH)]
                done = store.append_batch(session_id, batch)
            print("ack", tag, *(a.seq for a in done), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
