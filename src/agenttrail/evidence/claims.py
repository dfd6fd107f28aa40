"""Numeric claims in assistant messages, and whether the turn's trace backs them.

The rules: docs/specs.md, Tool-call traces ("Alert on numeric claims
with no trace row behind them"; "if there is no trace row behind a numeric claim at all, the
assistant answered from memory"). The rules, also in ``docs/evidence.md`` §Unbacked claims:

**What a number is** (:func:`numbers_in`). Digits with an optional ``.`` decimal part and ``,``
thousands separators in groups of exactly three (``1,234,567.89``); an optional minus (``-`` or
``−``) and currency (``$ € £ ¥ ₹`` before, ``USD EUR GBP …`` before or after); an optional scale
(``k``/``K`` thousand, ``M`` million, ``bn`` billion; ``m`` and ``B`` only after a currency
symbol, as in ``$2.5m``; or the words ``thousand``, ``million``, ``billion``, ``trillion``); an
optional percent (``%``, ``percent``, ``per cent``, ``percentage points``) or ``bps``/``basis
points``; an optional time or count unit (``30 years``, ``30-year``, ``360 months``,
``360 payments``). Numbers in words (``twelve``) are out of scope.

**What is skipped, not a claim**: list markers at the start of a line (``1.``, ``2)``, ``(3)``),
footnote marks (``[1]``), labels (``Step 2``, ``Option 3``, ``Table 1``), dates and times
(``2026-06-24``, ``06/24/2026``, ``June 24, 2026``, ``24 June``, ``June 2026``, ``10:30``,
``3 pm``), fractions and ratios written with ``/`` (``1/2``), a bare four-digit year 1900–2100
(``in 2031``; ``$2031`` or ``2,031`` is a number), numbers glued to letters or an id
(``3rd``, ``64bit``, ``COVID-19``, ``v2``, ``call_1``, ``#12``), versions (``2.1.0``), numbers
inside URLs, and digit groups that are not three wide (``1,5``, the European ``1.234,56``):
those cannot be read without guessing. An audit tool that guessed would report numbers nobody
stated.

**Backing, with rounding** (:func:`backs`). A stated number backs on an output ``x`` when
``|x·f − stated| ≤ quantum / 2``, where ``quantum`` is one unit in the last digit written, times
the scale (``4.57`` → 0.01, so 4.567 backs it; ``€2.5k`` → 100; ``1,900`` → 1, so 1,896.20 does
*not* back "1,900"). Both half-up and half-even rounding of ``x`` are thus accepted; truncation
is not (4.567 stated as 4.56 is unbacked). ``f`` is 1, or for a percentage also 100 (an output
``0.0525`` backs ``5.25%``, as does ``5.25``), or for ``bps`` also 10,000. A number written
without a minus is compared with ``|x|`` (prose states a sign in words: "a loss of $500"); a
number written with a minus needs the same sign.

**What backs a claim** (:func:`check_claims`). Only the trace rows of the same turn (a turn is a
user message and everything up to the next, docs/architecture.md, Vocabulary): any number in an
envelope's ``outputs`` (``backed``), else a number the user stated in the turn's message (``given``:
restating the question is not a computed claim), else a number in an envelope's echoed ``inputs``
(``input``: the reply restating what was computed on). Anything else is ``unbacked``. Tool results
that are not envelopes back nothing: they carry no record. Numbers from earlier turns back nothing
either: a turn that states a number must show its evidence.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from agenttrail.evidence.traces import turn_starts
from agenttrail.model import Event, TraceRow, message_text

__all__ = [
    "Backing",
    "Claim",
    "ClaimCheck",
    "backs",
    "check_claims",
    "json_numbers",
    "numbers_in",
    "trace_envelope",
    "unbacked_claims",
]


@dataclass(frozen=True)
class Claim:
    """One number stated in a text (:func:`numbers_in`)."""

    value: Decimal
    """The number, signed, with its scale applied: ``€2.5k`` → 2500, ``5.25%`` → 5.25 (percent
    units), ``-3`` → -3."""
    text: str
    """The matched text, as written: ``$1,234.56``, ``5.25%``, ``30 years``."""
    span: tuple[int, int]
    """``(start, end)`` character offsets of ``text`` in the source string."""
    quantum: Decimal
    """Precision as written: one unit in the last digit, times the scale (``4.57`` → 0.01,
    ``€2.5k`` → 100, ``1,000`` → 1)."""
    unit: str | None = None
    """``%``, ``bps``, ``year``, ``month``, ``week``, ``day``, ``hour``, ``minute``,
    ``payment`` or ``installment``; ``None`` for a bare number or an amount of money."""
    currency: str | None = None
    """The currency symbol or code written with it (``$``, ``€``, ``USD``)."""
    signed: bool = False
    """True when a minus sign was written."""


@dataclass(frozen=True)
class Backing:
    """A number in a trace row's envelope that backs a claim."""

    trace_id: int
    """The trace row's id."""
    path: str
    """Where in the envelope: ``outputs.monthly_payment``, ``inputs.principal``,
    ``outputs.schedule[0].interest``."""
    value: Decimal
    """The number found there."""

    def __str__(self) -> str:
        return f"{self.path} = {self.value}"


@dataclass(frozen=True)
class ClaimCheck:
    """One number in an assistant message and what, in its turn, backs it."""

    seq: int
    """Seq of the assistant message."""
    turn_seq: int | None
    """Seq of the user message that began the turn (``None`` before any)."""
    claim: Claim
    """The number as stated."""
    status: str
    """``backed`` (an envelope output in the turn), ``given`` (the user stated it in the
    turn), ``input`` (an envelope's echoed input in the turn) or ``unbacked``."""
    backing: tuple[Backing, ...]
    """The envelope numbers that back it: outputs when ``backed``, inputs when ``input``."""
    why: str
    """One line: what backs it, or why nothing does."""
    context: str
    """The claim with up to a few words either side, on one line."""


# -- reading numbers ---------------------------------------------------------------------------

_CODES = "USD|EUR|GBP|JPY|CHF|CAD|AUD|NZD|INR|CNY|SEK|NOK|DKK"
_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
    "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec"
)

_NUMBER = re.compile(
    rf"""
    (?<![\w.,/#$€£¥₹])              # not inside a word, version, path, id or number
    (?<![A-Za-z_]-)                 # nor the tail of an id such as COVID-19
    (?:(?P<code>{_CODES})\s?)?
    (?P<sign1>[-\u2212])?
    (?P<currency>[$€£¥₹])?
    (?P<sign2>[-\u2212])?
    (?P<digits>\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)
    (?:
        (?P<suffix>k|K|M|bn|(?(currency)[mB]|(?!)))(?![\w])
      | \s(?P<word>thousand|million|billion|trillion)\b
    )?
    (?:\s?(?P<percent>%|percent\b|per\ cent\b|percentage\ points?\b|bps\b|basis\ points?\b))?
    (?:[\s-](?P<unit>years?|yrs?|months?|mos?|weeks?|days?|hours?|hrs?|minutes?|mins?
        |payments?|installments?|instalments?)\b)?
    (?:\s(?P<code_after>{_CODES})\b)?
    (?![\w]|[.,]\d)                 # not followed by letters (3rd), more digits (1,5; 2.1.0)
    """,
    re.VERBOSE,
)

_SKIPPED = re.compile(
    rf"""
      (?:https?://|www\.)\S+                                            # URLs
    | \b\d{{4}}-\d{{2}}-\d{{2}}(?:[T\ ]\d{{2}}:\d{{2}}(?::\d{{2}}(?:\.\d+)?)?
        (?:Z|[+-]\d{{2}}:?\d{{2}})?)?                                  # ISO dates, timestamps
    | \b\d+(?:/\d+)+\b                                                  # 06/24/2026, 1/2
    | \b\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?:\s?[AaPp]\.?[Mm]\b\.?)?       # 10:30, 10:30 pm
    | \b\d{{1,2}}\s?(?:[AaPp]\.[Mm]\.|[AaPp][Mm]\b)                    # 3 pm, 3 p.m.
    | \b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}}\b)? # June 24, 2026
    | \b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b(?:,?\s+\d{{4}}\b)? # 24 June 2026
    | \b(?:{_MONTHS})\.?,?\s+\d{{4}}\b                                  # June 2026
    | (?m:^)[\ \t]*(?:[-*+][\ \t]+)?(?:\#+[\ \t]*)?\(?\d+[.)](?=\s)     # list markers
    | \[\^?\d+\]                                                        # footnotes [1]
    | \b(?i:step|option|scenario|section|figure|fig\.|table|page|item|appendix|chapter
        |part|no\.|version|ver\.)\s+\d+\b                               # labels
    """,
    re.VERBOSE,
)

_SCALES = {
    "k": Decimal(1000),
    "K": Decimal(1000),
    "thousand": Decimal(1000),
    "m": Decimal(10) ** 6,
    "M": Decimal(10) ** 6,
    "million": Decimal(10) ** 6,
    "B": Decimal(10) ** 9,
    "bn": Decimal(10) ** 9,
    "billion": Decimal(10) ** 9,
    "trillion": Decimal(10) ** 12,
}

_UNITS = {
    "yr": "year",
    "mo": "month",
    "hr": "hour",
    "min": "minute",
    "instalment": "installment",
}

_FACTORS = {"%": (Decimal(1), Decimal(100)), "bps": (Decimal(1), Decimal(10_000))}
"""How an output may be written for a claim in this unit: 0.0525 backs 5.25% (×100)."""


def numbers_in(text: str) -> list[Claim]:
    """The numbers stated in ``text``, in order of appearance.

    Args:
        text: any prose (an assistant or user message).

    Returns:
        One :class:`Claim` per number: its value as a :class:`~decimal.Decimal` (never a
        float, so ``4.57`` stays exactly 4.57), the text matched and its span. The rules for
        what is a number and what is skipped (list markers, dates, years, labels, ids) are in
        the module docstring and ``docs/evidence.md``.
    """
    skipped = [m.span() for m in _SKIPPED.finditer(text)]
    found = []
    for match in _NUMBER.finditer(text):
        start, end = match.span()
        if any(s < end and start < e for s, e in skipped):
            continue
        claim = _claim(match)
        if _is_year(match, claim):
            continue
        found.append(claim)
    return found


def _claim(match: re.Match[str]) -> Claim:
    digits = match["digits"].replace(",", "")
    number = Decimal(digits)
    places = len(digits.partition(".")[2])
    scale = _SCALES.get(match["suffix"] or match["word"] or "", Decimal(1))
    signed = bool(match["sign1"] or match["sign2"])
    percent = match["percent"]
    unit = None
    if percent:
        unit = "bps" if percent in ("bps",) or percent.startswith("basis") else "%"
    elif match["unit"]:
        word = match["unit"].lower()
        word = word[:-1] if word.endswith("s") else word
        unit = _UNITS.get(word, word)
    value = number * scale
    return Claim(
        value=-value if signed else value,
        text=match.group(),
        span=match.span(),
        quantum=Decimal(1).scaleb(-places) * scale,
        unit=unit,
        currency=match["currency"] or match["code"] or match["code_after"],
        signed=signed,
    )


def _is_year(match: re.Match[str], claim: Claim) -> bool:
    """A bare four-digit integer 1900–2100 with nothing else written is a year, not a claim."""
    bare = not (claim.currency or claim.signed or claim.unit or match["suffix"] or match["word"])
    digits = match["digits"]
    return bare and len(digits) == 4 and digits.isdigit() and 1900 <= int(digits) <= 2100


# -- backing -----------------------------------------------------------------------------------


def _decimal(value: Decimal | int | float) -> Decimal:
    # repr gives the shortest text that reads back as the same float: 4.565, not 4.56499999…
    return value if isinstance(value, Decimal) else Decimal(repr(value))


def backs(claim: Claim, value: Decimal | int | float) -> bool:
    """True when ``value`` (an output) backs ``claim`` as stated, allowing for rounding.

    Rule (``docs/evidence.md`` §Unbacked claims): ``|value·f − stated| ≤ quantum / 2`` for
    ``f`` = 1, or 100 as well for a percentage (0.0525 backs ``5.25%``), or 10,000 as well for
    ``bps``. A claim written without a minus is compared with ``|value|``.
    """
    x = _decimal(value)
    if not x.is_finite():
        return False
    half = claim.quantum / 2
    for factor in _FACTORS.get(claim.unit or "", (Decimal(1),)):
        candidate = x * factor
        if not claim.signed:
            candidate = abs(candidate)
        if abs(candidate - claim.value) <= half:
            return True
    return False


_NUMERIC_TEXT = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def json_numbers(value: Any, path: str = "") -> list[tuple[str, Decimal]]:
    """Every number in a JSON value with its path, depth first.

    Numbers are ints and floats (not booleans; NaN and infinities are skipped) and strings
    that are a plain decimal number (``"1896.20"``). Paths read ``monthly_payment``,
    ``schedule[0].interest``; ``path`` prefixes them (``outputs``).
    """
    found: list[tuple[str, Decimal]] = []
    if isinstance(value, bool) or value is None:
        return found
    if isinstance(value, int | float):
        number = _decimal(value)
        if number.is_finite():
            found.append((path, number))
    elif isinstance(value, str):
        text = value.strip()
        if _NUMERIC_TEXT.fullmatch(text):  # admits only what Decimal reads
            found.append((path, Decimal(text)))
    elif isinstance(value, dict):
        for key, item in value.items():
            found += json_numbers(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += json_numbers(item, f"{path}[{index}]")
    return found


def trace_envelope(row: TraceRow) -> dict[str, Any]:
    """A trace row's envelope as a mapping, ``{}`` when its bytes are not a JSON object.

    Parsed leniently (NaN is read, duplicate keys keep the last): an ``invalid`` row still
    shows what it said. The record hash was checked when the row was written.
    """
    try:
        value = json.loads(row.envelope.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _context(text: str, span: tuple[int, int], width: int = 30) -> str:
    start, end = span
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    left = max(line_start, start - width)
    right = min(line_end, end + width)
    snippet = text[left:right].strip()
    return ("…" if left > line_start else "") + snippet + ("…" if right < line_end else "")


# -- checking ----------------------------------------------------------------------------------


def _is_user_message(event: Event) -> bool:
    return event.type == "message" and event.payload.get("role") == "user"


def _is_reply(event: Event) -> bool:
    return event.type == "message" and event.payload.get("role") == "assistant"


def check_claims(events: Iterable[Event], traces: Sequence[TraceRow]) -> list[ClaimCheck]:
    """Every number in every assistant message, and what in its turn backs it.

    Args:
        events: a session's events in seq order (``store.read(session_id)``).
        traces: the session's trace rows (``store.traces(session_id)``).

    Returns:
        One :class:`ClaimCheck` per number, in seq order then text order. Status, in this
        order of precedence: ``backed`` (a number in the ``outputs`` of an envelope of the
        same turn backs it, :func:`backs`), ``given`` (the user stated it in the turn's
        message), ``input`` (a number in an envelope's echoed ``inputs`` backs it), else
        ``unbacked``. docs/specs.md: "Alert on numeric claims with no trace row behind them".
    """
    items = list(events)
    turns = turn_starts(items)
    by_seq = {event.seq: event for event in items}
    rows_of: dict[int | None, list[TraceRow]] = {}
    for row in traces:
        rows_of.setdefault(row.turn_seq, []).append(row)
    numbers = {row.id: _row_numbers(row) for row in traces}
    results_of: dict[int | None, list[Event]] = {}
    calls: dict[Any, list[str]] = {}  # call id -> names; named only when the id is unique
    checks = []
    for event in items:
        turn = turns.get(event.seq)
        if event.type == "tool_call":
            calls.setdefault(event.payload.get("id"), []).append(str(event.payload.get("name")))
        if event.type == "tool_result":
            results_of.setdefault(turn, []).append(event)
        if not _is_reply(event):
            continue
        text = message_text(event.payload)
        opener = by_seq.get(turn) if turn is not None else None
        given = numbers_in(message_text(opener.payload)) if opener is not None else []
        rows = rows_of.get(turn, [])
        for claim in numbers_in(text):
            check = _check(event.seq, turn, claim, _context(text, claim.span), rows, numbers, given)
            if check.status == "unbacked" and not rows:
                why = _why_no_trace(claim, results_of.get(turn, []), calls)
                check = dataclasses.replace(check, why=why)
            checks.append(check)
    return checks


_DIGITS = re.compile(r"(?<![\d.])\d+(?:\.\d+)?")
"""Any run of digits in a tool's output, read loosely: only to say where a number may have
come from, never to back it."""


def _why_no_trace(claim: Claim, results: list[Event], calls: dict[Any, list[str]]) -> str:
    """Why a number in a turn with no trace row is unbacked: the trace spec's "answered from memory"
    when the turn called no tool; otherwise what the tools returned instead of an envelope."""
    if not results:
        return "no trace row in the turn: no tool was called, answered from memory"
    for result in results:
        output = result.payload.get("output")
        if isinstance(output, str):
            found = [Decimal(m) for m in _DIGITS.findall(output)]
        else:
            found = [value for _, value in json_numbers(output, "")]
        if any(backs(claim, value) for value in found):
            named = calls.get(result.payload.get("toolCallId"), [])
            name = result.payload.get("name") or (named[0] if len(named) == 1 else "a tool")
            return (
                f"no trace row in the turn: {claim.text} is in the plain result of {name} "
                f"(seq {result.seq}), which has no record to check it against"
            )
    if len(results) == 1:
        return "no trace row in the turn, and its one tool result does not hold this number"
    return (
        f"no trace row in the turn, and none of its {len(results)} tool results holds this number"
    )


def _row_numbers(row: TraceRow) -> tuple[list[Backing], list[Backing]]:
    """(outputs, inputs) numbers of a row's envelope."""
    envelope = trace_envelope(row)
    outputs = [Backing(row.id, p, v) for p, v in json_numbers(envelope.get("outputs"), "outputs")]
    inputs = [Backing(row.id, p, v) for p, v in json_numbers(envelope.get("inputs"), "inputs")]
    return outputs, inputs


def _check(
    seq: int,
    turn: int | None,
    claim: Claim,
    context: str,
    rows: list[TraceRow],
    numbers: dict[int, tuple[list[Backing], list[Backing]]],
    given: list[Claim],
) -> ClaimCheck:
    outputs = [b for row in rows for b in numbers[row.id][0] if backs(claim, b.value)]
    if outputs:
        where = ", ".join(f"trace {b.trace_id} {b}" for b in outputs[:3])
        return ClaimCheck(seq, turn, claim, "backed", tuple(outputs), f"matches {where}", context)
    said = next((u for u in given if backs(claim, u.value)), None)
    if said is not None:
        why = f"the user stated {said.text} (seq {turn})"
        return ClaimCheck(seq, turn, claim, "given", (), why, context)
    inputs = [b for row in rows for b in numbers[row.id][1] if backs(claim, b.value)]
    if inputs:
        where = ", ".join(f"trace {b.trace_id} {b}" for b in inputs[:3])
        why = f"restates an echoed input: {where}"
        return ClaimCheck(seq, turn, claim, "input", tuple(inputs), why, context)
    if not rows:
        why = "no trace row in the turn: answered from memory"
    else:
        count = f"{len(rows)} trace row{'' if len(rows) == 1 else 's'}"
        why = f"no output of the turn's {count} matches"
    return ClaimCheck(seq, turn, claim, "unbacked", (), why, context)


def unbacked_claims(events: Iterable[Event], traces: Sequence[TraceRow]) -> list[ClaimCheck]:
    """The numbers assistant messages state that nothing in their turn backs.

    Args:
        events: a session's events in seq order (``store.read(session_id)``).
        traces: the session's trace rows (``store.traces(session_id)``).

    Returns:
        The :func:`check_claims` results with status ``unbacked``: a number that no envelope
        output of the same turn backs (allowing for rounding), that the user did not state in
        the turn, and that is no echoed input. docs/specs.md: "Alert on numeric claims with no
        trace row behind them".
    """
    return [c for c in check_claims(events, traces) if c.status == "unbacked"]
