"""Our own financial-assistant session: a mortgage model behind ``run_model``, one turn per
reconciliation class of docs/evidence.md (the cases that must work).

Written through the real recorder API into a real SQLite log; every timestamp is fixed. The
turns, and what each reply states:

1. consistent     $300,000 at 6.5% over 30 years; the reply states the payment, the payment
                  count, the interest rounded to ``$382.6k`` and the interest share as
                  ``56.1%`` (the envelope has the fraction 0.5605: a half-way tie).
2. misstated      $300,000 at 5.75% over 15 years; the reply transposes the payment's digits
                  ($2,419.23 for 2,491.23) but states the interest right.
3. mis-extracted  the user says $350,000; the model ran $305,000 and the reply states that
                  result faithfully.
4. unbacked       a payment stated with no tool call in the turn.
5. drift          an envelope at specVersion 2.1 from a build whose total interest used the
                  unrounded payment: a fresh run gives the same payment, other interest.
6. version-moved  an envelope at specVersion 2.0; today's re-runner reports 2.1.
"""

from __future__ import annotations

import json
from typing import Any

from agenttrail.ingest.recorder import Recorder
from agenttrail.log.store import LogStore
from tests import mortgage_model

SESSION_ID = "loan-advice"

EXPECTED: list[tuple[int, str, str, str]] = [
    # (turn number, stated text, class without --rerun, class with --rerun)
    (1, "$1,896.20", "consistent", "consistent"),
    (1, "360 payments", "consistent", "consistent"),
    (1, "$382.6k", "consistent", "consistent"),
    (1, "56.1%", "consistent", "consistent"),
    (2, "$2,419.23", "misstated", "misstated"),
    (2, "$148,421.40", "consistent", "consistent"),
    (3, "$2,029.17", "mis-extracted", "mis-extracted"),
    (4, "$2,600", "unbacked", "unbacked"),
    (5, "$1,539.29", "consistent", "consistent"),
    (5, "$304,145.48", "consistent", "drift"),
    (6, "$1,199.10", "consistent", "version-moved"),
]
"""Every claim the replies make that the user did not state, and its class."""


def _at(second: int) -> str:
    return f"2026-03-02T14:{second // 60:02d}:{second % 60:02d}.000000Z"


def _turn(
    rec: Recorder,
    clock: int,
    question: str,
    answer: str,
    envelope: dict[str, Any] | None = None,
) -> int:
    """One turn: the question, a ``run_model`` call answered by ``envelope`` (if any), the
    reply. Returns the seq of the user message (the turn's seq)."""
    with rec.turn(model="gpt-4o", provider="openai", location="remote") as turn:
        seq = turn.user(question, created_at=_at(clock)).seq
        if envelope is not None:
            call = turn.tool_call("run_model", envelope["inputs"], created_at=_at(clock + 1))
            # The envelope as the tool returned it: pretty-printed JSON text, kept verbatim.
            turn.tool_result(call, json.dumps(envelope, indent=2), created_at=_at(clock + 2))
        turn.reply(answer, created_at=_at(clock + 3))
    return seq


def record_loan_session(store: LogStore, session_id: str = SESSION_ID) -> list[int]:
    """Record the session; return the seq of each turn's user message, turn 1 first."""
    rec = Recorder.start(
        store,
        session_id=session_id,
        title="Mortgage questions",
        agent="loan-advisor",
        user="dana@example.com",
        started=_at(0),
    )
    run = mortgage_model.run_model
    turns = [
        _turn(
            rec,
            0,
            "What would my monthly payment be on a $300,000 mortgage at 6.5% over 30 years?",
            "For a $300,000 loan at 6.5% over 30 years, your monthly payment would be "
            "$1,896.20. Over 360 payments you would pay about $382.6k in interest, so 56.1% "
            "of everything you pay goes to interest.",
            run({"principal": 300_000, "annual_rate": 0.065, "years": 30}),
        ),
        _turn(
            rec,
            60,
            "And at 5.75% over 15 years for the same $300,000?",
            "At 5.75% over 15 years your payment would be $2,419.23 a month, and the total "
            "interest $148,421.40.",
            run({"principal": 300_000, "annual_rate": 0.0575, "years": 15}),
        ),
        _turn(
            rec,
            120,
            "My sister is borrowing $350,000 at 7% over 30 years. What will her payment be?",
            "Her payment would be $2,029.17 a month.",
            run({"principal": 305_000, "annual_rate": 0.07, "years": 30}),  # mis-typed
        ),
        _turn(
            rec,
            180,
            "Roughly what does a $400,000 mortgage cost per month these days?",
            "Typically around $2,600 a month at today's rates.",
        ),
        _turn(
            rec,
            240,
            "What if I borrow $250,000 at 6.25% for 30 years?",
            "You would pay $1,539.29 a month and $304,145.48 in interest over the life of "
            "the loan.",
            _older_build({"principal": 250_000, "annual_rate": 0.0625, "years": 30}),
        ),
        _turn(
            rec,
            300,
            "And $200,000 at 6% for 30 years?",
            "Your payment would be $1,199.10 a month.",
            _version_2_0({"principal": 200_000, "annual_rate": 0.06, "years": 30}),
        ),
    ]
    rec.close(created_at=_at(400))
    return turns


def _older_build(inputs: dict[str, Any]) -> dict[str, Any]:
    """An envelope from a build with the same specVersion and a bug: drift."""
    outs = mortgage_model.outputs(
        inputs["principal"], inputs["annual_rate"], inputs["years"], interest_from_unrounded=True
    )
    return mortgage_model.envelope(inputs, outs, mortgage_model.SPEC_VERSION)


def _version_2_0(inputs: dict[str, Any]) -> dict[str, Any]:
    """An envelope from specVersion 2.0, which had no interest share."""
    outs = mortgage_model.outputs(inputs["principal"], inputs["annual_rate"], inputs["years"])
    del outs["interest_share"]
    return mortgage_model.envelope(inputs, outs, "2.0")
