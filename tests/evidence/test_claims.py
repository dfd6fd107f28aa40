"""Numbers in assistant messages, and whether the turn's trace backs them .

Rules under test: ``docs/evidence.md`` §Unbacked claims and the :mod:`agenttrail.evidence.claims`
docstring. The session is our own (``tests/loan_session.py``), written with the recorder into
a real SQLite file.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail import Recorder
from agenttrail.evidence.claims import (
    backs,
    check_claims,
    json_numbers,
    numbers_in,
    unbacked_claims,
)
from agenttrail.ingest.sample import record_sample
from agenttrail.log.store import LogStore
from tests import mortgage_model
from tests.loan_session import SESSION_ID, record_loan_session


@pytest.mark.parametrize(
    ("text", "stated", "value", "quantum", "unit", "currency"),
    [
        ("It is $1,234.56 now", "$1,234.56", "1234.56", "0.01", None, "$"),
        ("roughly €2.5k", "€2.5k", "2500", "100", None, "€"),
        ("a rate of 5.25%", "5.25%", "5.25", "0.01", "%", None),
        ("5.25 percent", "5.25 percent", "5.25", "0.01", "%", None),
        ("down -3 today", "-3", "-3", "1", None, None),
        ("down −4.5", "−4.5", "-4.5", "0.1", None, None),
        ("a loss of -$600", "-$600", "-600", "1", None, "$"),
        ("1,000,000 rows", "1,000,000", "1000000", "1", None, None),
        ("about 4.57.", "4.57", "4.57", "0.01", None, None),
        ("over 30 years", "30 years", "30", "1", "year", None),
        ("a 30-year loan", "30-year", "30", "1", "year", None),
        ("360 months", "360 months", "360", "1", "month", None),
        ("360 payments", "360 payments", "360", "1", "payment", None),
        ("25 bps", "25 bps", "25", "1", "bps", None),
        ("2 million", "2 million", "2000000", "1000000", None, None),
        ("$2.5m", "$2.5m", "2500000", "100000", None, "$"),
        ("$1.2B", "$1.2B", "1200000000", "100000000", None, "$"),
        ("USD 1,200", "USD 1,200", "1200", "1", None, "USD"),
        ("1,200 EUR", "1,200 EUR", "1200", "1", None, "EUR"),
        ("only .5%", ".5%", "0.5", "0.1", "%", None),
        ("It is 1,500.", "1,500", "1500", "1", None, None),
        ("paid $2031 once", "$2031", "2031", "1", None, "$"),  # money, not a year
    ],
)
def test_numbers_in_reads_value_precision_unit_and_span(
    text: str, stated: str, value: str, quantum: str, unit: str | None, currency: str | None
) -> None:
    (claim,) = numbers_in(text)
    assert claim.text == stated
    assert text[claim.span[0] : claim.span[1]] == stated
    assert claim.value == Decimal(value)
    assert claim.quantum == Decimal(quantum)
    assert claim.unit == unit
    assert claim.currency == currency
    assert claim.signed == value.startswith("-")


@pytest.mark.parametrize(
    "text",
    [
        "1. Compare lenders\n2) Ask for quotes\n(3) Lock the rate\n  - 4. nested",  # list markers
        "## 2. Next steps",
        "See [1] and [^2].",  # footnotes
        "On 2026-06-24T10:30:00Z, 06/24/2026, June 24, 2026, 24 June 2026, June 2026.",
        "At 10:30, at 10:30 pm, at 3 pm, at 3 p.m.",
        "Payments start in 2031.",  # a bare year
        "Step 2, Option 3, Table 1, page 4, version 7.",  # labels
        "the 3rd payment, a 64bit id, COVID-19, ISO-8601, call_1, #12, sha256",  # ids
        "v2.1 and 2.1.0",  # versions
        "https://example.com/rates/2026/5.5 and www.example.com/123",  # URLs
        "1,5 and 1.234,56 and 1,2345",  # not a three-digit grouping: no guessing
        "half is 1/2, and 3/4 more",  # fractions
        "5m away, flat 5B",  # m and B scale only money
        "twelve payments",  # numbers in words are out of scope
    ],
)
def test_numbers_in_skips_what_is_no_quantity(text: str) -> None:
    assert numbers_in(text) == []


def test_numbers_in_keeps_the_numbers_beside_skipped_ones() -> None:
    text = "1. Your payment from June 2026 is $1,896.20 for 3-5 years.\n2. Rate: 6.5%"
    assert [c.text for c in numbers_in(text)] == ["$1,896.20", "3", "5 years", "6.5%"]


@given(
    st.decimals(min_value=0, max_value=10**12, places=2, allow_nan=False),
    st.sampled_from([0, 1, 2]),
    st.booleans(),
)
def test_a_formatted_number_reads_back_and_backs_itself(
    number: Decimal, places: int, negative: bool
) -> None:
    text = f"{number:,.{places}f}"
    if negative:
        text = "-" + text
    written = f"The figure is {text} in total."
    (claim,) = numbers_in(written)  # with separators, 2,026 is never taken for a year
    assert claim.text == text
    assert claim.value == Decimal(text.replace(",", ""))
    assert backs(claim, claim.value)
    assert backs(claim, number.quantize(Decimal(1).scaleb(-places)) * (-1 if negative else 1))


@pytest.mark.parametrize(
    ("stated", "output", "backed"),
    [
        ("4.57", 4.567, True),  # rounded to the places stated
        ("4.56", 4.567, False),  # truncation is not rounding
        ("4.570", 4.567, False),  # more places stated: must match to them
        ("4.6", 4.567, True),
        ("5", 4.567, True),
        ("4.57", 4.565, True),  # a tie rounds half up …
        ("4.56", 4.565, True),  # … or half to even; both are accepted
        ("4.57", 4.575, True),
        ("4.58", 4.575, True),
        ("4.57", Decimal("4.5750001"), False),
        ("$1,896.20", 1896.2, True),
        ("$1,896", 1896.2, True),
        ("$1,900", 1896.2, False),  # an integer's trailing zeros are not a precision
        ("$1.9k", 1896.2, True),  # a scale is
        ("€2.5k", 2549, True),
        ("€2.5k", 2551, False),
        ("$2.5m", 2_480_000, True),
        ("5.25%", 0.0525, True),  # a fraction output backs a percentage …
        ("5.25%", 5.25, True),  # … as does a percent output
        ("5.3%", 0.0525, True),
        ("5.2%", 0.0525, True),
        ("5.25%", 0.0535, False),
        ("0.0525", 5.25, False),  # but a percent output does not back a bare fraction
        ("25 bps", 0.0025, True),
        ("-3", -3, True),
        ("-3", 3, False),  # a written minus must match
        ("3", -3, True),  # no sign written: compared by magnitude ("a loss of 3")
        ("0", 0.3, True),
    ],
)
def test_backs_allows_rounding_to_the_stated_precision(
    stated: str, output: float | int | Decimal, backed: bool
) -> None:
    (claim,) = numbers_in(stated)
    assert backs(claim, output) is backed


def test_backs_refuses_nan_and_infinity() -> None:
    (claim,) = numbers_in("4.57")
    assert not backs(claim, float("nan"))
    assert not backs(claim, float("inf"))


def test_json_numbers_walks_outputs_with_paths() -> None:
    value = {
        "monthly_payment": 1896.2,
        "ok": True,
        "note": "fixed",
        "as_text": " 1896.20 ",
        "schedule": [{"interest": 1625}, {"interest": 1624.5, "nan": float("nan")}],
        "none": None,
    }
    assert json_numbers(value, "outputs") == [
        ("outputs.monthly_payment", Decimal("1896.2")),
        ("outputs.as_text", Decimal("1896.20")),
        ("outputs.schedule[0].interest", Decimal(1625)),
        ("outputs.schedule[1].interest", Decimal("1624.5")),
    ]


# -- the session -------------------------------------------------------------------------------


def test_unbacked_claims_in_the_loan_session(store: LogStore) -> None:
    turns = record_loan_session(store)
    unbacked = unbacked_claims(store.read(SESSION_ID), store.traces(SESSION_ID))
    assert [(c.turn_seq, c.claim.text) for c in unbacked] == [
        (turns[1], "$2,419.23"),  # misstated: a trace row, but no output matches
        (turns[3], "$2,600"),  # a numeric reply with no tool call in the turn
    ]
    assert unbacked[0].why == "no output of the turn's 1 trace row matches"
    assert unbacked[1].why == "no trace row in the turn: no tool was called, answered from memory"
    assert "Typically around $2,600 a month" in unbacked[1].context


def test_an_unbacked_number_in_a_turn_with_tools_says_what_the_tools_returned(
    store: LogStore,
) -> None:
    # The sample session (agenttrail.ingest.sample): turn 7 calls read_file and run_shell, whose
    # plain-text result (seq 11) holds "harvey.go:42:5"; turn 14's one result holds no 38.
    session = record_sample(store)
    why = {(c.turn_seq, c.claim.text): c.why for c in unbacked_claims(store.read(session), [])}
    assert why == {
        (2, "4"): "no trace row in the turn: no tool was called, answered from memory",
        (7, "42"): "no trace row in the turn: 42 is in the plain result of run_shell (seq 11), "
        "which has no record to check it against",
        (14, "38"): "no trace row in the turn, and its one tool result does not hold this number",
    }


def test_check_claims_says_what_backs_each_number(store: LogStore) -> None:
    turns = record_loan_session(store)
    checks = check_claims(store.read(SESSION_ID), store.traces(SESSION_ID))
    first = {c.claim.text: c for c in checks if c.turn_seq == turns[0]}
    # The question's numbers, restated, are not computed claims.
    assert {t for t, c in first.items() if c.status == "given"} == {
        "$300,000",
        "6.5%",
        "30 years",
    }
    assert first["$1,896.20"].status == "backed"
    assert [str(b) for b in first["$1,896.20"].backing] == ["outputs.monthly_payment = 1896.2"]
    assert first["$382.6k"].status == "backed"  # 382,632 rounded to the stated 0.1k
    assert first["56.1%"].status == "backed"  # the fraction 0.5605, as a percentage
    assert first["360 payments"].status == "backed"


def _one_turn(
    store: LogStore, question: str, answer: str, *, output: str | None = None
) -> list[str]:
    """Statuses of the reply's numbers in a one-turn session answered by ``output``."""
    rec = Recorder.start(store)
    with rec.turn(model="gpt-4o") as turn:
        turn.user(question)
        if output is not None:
            call = turn.tool_call("run_model", {"principal": 300_000})
            turn.tool_result(call, output)
        turn.reply(answer)
    return [
        f"{c.claim.text} {c.status}"
        for c in check_claims(store.read(rec.session_id), store.traces(rec.session_id))
    ]


def test_a_restated_echoed_input_is_backed_by_the_trace(store: LogStore) -> None:
    envelope = mortgage_model.run_model({"principal": 300_000, "annual_rate": 0.065, "years": 30})
    assert _one_turn(
        store,
        "What is the payment on my loan?",
        "At 6.5% over 30 years the payment is $1,896.20.",
        output=json.dumps(envelope),
    ) == ["6.5% input", "30 years input", "$1,896.20 backed"]


def test_a_result_that_is_no_envelope_backs_nothing(store: LogStore) -> None:
    assert _one_turn(
        store, "What is the payment?", "It is $1,896.20.", output='{"monthly_payment": 1896.2}'
    ) == ["$1,896.20 unbacked"]


def test_numbers_from_an_earlier_turn_back_nothing(store: LogStore) -> None:
    rec = Recorder.start(store)
    envelope = mortgage_model.run_model({"principal": 300_000, "annual_rate": 0.065, "years": 30})
    with rec.turn(model="gpt-4o") as turn:
        turn.user("What is my payment?")
        call = turn.tool_call("run_model", envelope["inputs"])
        turn.tool_result(call, json.dumps(envelope))
        turn.reply("It is $1,896.20 a month.")
    with rec.turn(model="gpt-4o") as turn:
        turn.user("Say it again?")
        turn.reply("Again: $1,896.20 a month.")
    unbacked = unbacked_claims(store.read(rec.session_id), store.traces(rec.session_id))
    assert [(c.seq, c.claim.text) for c in unbacked] == [(6, "$1,896.20")]


def test_only_the_text_of_assistant_messages_is_read(store: LogStore) -> None:
    rec = Recorder.start(store)
    rec.append(
        {
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Running the model for 42 scenarios."},
                {"type": "tool_use", "id": "t1", "name": "run_model", "input": {"n": 99}},
            ],
        }
    )
    rec.append({"type": "message", "role": "system", "content": "Budget: 1,000 tokens"})
    rec.append({"type": "message", "role": "assistant", "content": {"odd": 7}})
    unbacked = unbacked_claims(store.read(rec.session_id), store.traces(rec.session_id))
    assert [(c.turn_seq, c.claim.text) for c in unbacked] == [(None, "42")]
