"""A live agent for the kill tests: records turns into a session until it is killed.

:func:`run` is the body of a process of its own (``multiprocessing``, started from a fork
server that has imported agenttrail once, so that a trial does not pay for an interpreter's
start). It resumes the session with a new :class:`~agenttrail.ingest.recorder.Recorder`
(holder ``agent``), as a restarted agent does, and sends one line on its pipe after each call
has returned (so each line acknowledges a commit):

    took SECONDS            the first turn's lease was taken (over) in SECONDS
    event SEQ HASH TYPE E   an event was appended (E is 1 for a tool result with an envelope)
    call ID                 a tool call was appended

Each turn is a user message, three ``run_model`` calls answered by response envelopes
(tests/mortgage_model.py) and a plain tool result, and a reply: most of its time is spent in
the appends of tool results and their trace rows.
"""

from __future__ import annotations

import json
import time
from multiprocessing.connection import Connection

from agenttrail.ingest.recorder import Recorder, Turn
from agenttrail.log.store import Appended, open_store
from tests import mortgage_model

PRELOAD = ["agenttrail.ingest.recorder", "agenttrail.log.store.postgres", "tests.faults._agent"]
"""What the fork server imports once for every agent it starts."""


def run(url: str, session_id: str, lease_s: float, acks: Connection) -> None:
    """Record turns into ``session_id`` until killed (10,000 turns at most)."""

    def ack(line: str) -> None:
        acks.send_bytes(line.encode())

    def event(appended: Appended, kind: str, envelope: bool = False) -> None:
        ack(f"event {appended.seq} {appended.hash.hex()} {kind} {int(envelope)}")

    def tools(turn: Turn, n: int) -> None:
        for i in range(3):
            inputs = {"principal": 100_000 + 1_000 * n + i, "annual_rate": 0.05, "years": 30}
            call = turn.tool_call("run_model", inputs)
            ack(f"call {call}")
            envelope = json.dumps(mortgage_model.run_model(inputs), indent=2)
            event(turn.tool_result(call, envelope), "tool_result", envelope=True)
        call = turn.tool_call("lookup_rate", {"product": "fixed-30"})
        ack(f"call {call}")
        event(turn.tool_result(call, "5.00%"), "tool_result")

    with open_store(url) as store:
        rec = Recorder(store, session_id, holder="agent", lease_s=lease_s)
        for n in range(10_000):
            started = time.monotonic()
            with rec.turn(model="m", provider="p") as turn:
                if n == 0:
                    ack(f"took {time.monotonic() - started:.6f}")
                event(turn.user(f"question {n}"), "message")
                tools(turn, n)
                event(turn.reply(f"answer {n}"), "message")
