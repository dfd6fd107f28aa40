"""Three-way reconciliation: what the reply said, what the trace computed, what a fresh run gives.

docs/specs.md, Tool-call traces: The three-way reconciliation. For every number an assistant message
states (:mod:`agenttrail.evidence.claims`), this compares (a) the number as stated, (b) the outputs
of the envelopes in the same turn's trace rows and (c), when asked, a fresh run of the same model on
the envelope's echoed inputs, and names which layer disagrees. The classes, also in
``docs/evidence.md`` §Reconciliation:

==================  =================================================================
``consistent``      an envelope output of the turn backs the number (with rounding);
                    with a fresh run, that run reproduces the trace
``misstated``       the turn has trace rows but no output backs the number; with a fresh
                    run, the run agrees with the trace: a language-layer bug
``mis-extracted``   the number rests on an envelope whose echoed ``inputs`` differ from
                    the numbers the user stated in the turn: a comprehension bug
``unbacked``        a numeric claim in a turn with no trace row: answered from memory
``drift``           the fresh run differs from the trace while ``specVersion`` is the same
``version-moved``   the re-runner reports another ``specVersion``: outputs are not
                    compared; the stored record's hash is recomputed instead, and the
                    verdict says whether it still holds
==================  =================================================================

Numbers the user stated in the turn are not computed claims and get no verdict. A trace row
whose finding no claim rests on (mis-extracted inputs, drift, a moved version) is still
reported, with no claim.

**Re-runners** are Python callables ``(inputs: dict, spec_version: str) -> envelope`` (a
mapping, or its JSON text), one per envelope ``model``. They are found in the ``rerunners=``
argument first, then among the entry points of group ``agenttrail.rerunners`` whose name is the
model (``importlib.metadata``), so a package registers one in its ``pyproject.toml``::

    [project.entry-points."agenttrail.rerunners"]
    mortgage = "acme_models.mortgage:rerun"
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from agenttrail.errors import InputError, NotIJSON, RerunError
from agenttrail.evidence.claims import (
    Backing,
    Claim,
    ClaimCheck,
    backs,
    check_claims,
    json_numbers,
    numbers_in,
    trace_envelope,
)
from agenttrail.evidence.envelopes import (
    EnvelopeSpec,
    is_envelope,
    parse_envelope,
    record_hash,
)
from agenttrail.evidence.traces import turn_starts
from agenttrail.model import LogReader, TraceRow, message_text

__all__ = [
    "CLASSES",
    "RERUNNER_GROUP",
    "ClaimVerdict",
    "RerunError",
    "Rerunner",
    "find_rerunner",
    "reconcile",
]

CLASSES = ("consistent", "misstated", "mis-extracted", "unbacked", "drift", "version-moved")
"""Every verdict a claim can get (docs/specs.md, Tool-call traces: the three-way reconciliation)."""

RERUNNER_GROUP = "agenttrail.rerunners"
"""The entry-point group re-runners are registered in; the entry point's name is the model."""

Rerunner = Callable[[dict[str, Any], str], Any]
"""``(inputs, spec_version) -> envelope``: runs the model again; returns the envelope as a
mapping or as its JSON text."""


@dataclass(frozen=True)
class ClaimVerdict:
    """One claim and the layer that disagrees, if any."""

    turn_seq: int | None
    """Seq of the user message that began the turn."""
    seq: int | None
    """Seq of the assistant message that states the claim; ``None`` for a finding about a
    trace row that no claim rests on."""
    status: str
    """One of :data:`CLASSES`."""
    stated: str | None
    """The claim as written (``$1,896.20``); ``None`` for a trace-row finding."""
    trace: str | None
    """The envelope number that backs it, or for ``misstated`` the nearest output
    (``outputs.monthly_payment = 1896.2``); ``None`` when the turn has no trace row."""
    fresh: str | None
    """The same number in the fresh run (``None`` when not rerun), or ``specVersion X`` when
    the version moved."""
    why: str
    """One line saying which layer disagrees and how."""
    trace_id: int | None = None
    """The trace row the verdict rests on."""
    context: str = ""
    """The claim with a few words either side."""
    claim: Claim | None = None
    """The parsed claim (value, span, quantum)."""

    def to_json(self) -> dict[str, Any]:
        """The verdict as a JSON-ready mapping (``agenttrail reconcile --json``)."""
        return {
            "turn_seq": self.turn_seq,
            "seq": self.seq,
            "status": self.status,
            "stated": self.stated,
            "value": str(self.claim.value) if self.claim is not None else None,
            "trace": self.trace,
            "fresh": self.fresh,
            "trace_id": self.trace_id,
            "why": self.why,
            "context": self.context,
        }


def find_rerunner(model: str, rerunners: Mapping[str, Rerunner] | None = None) -> Rerunner:
    """The re-runner for an envelope's ``model``.

    Looks in ``rerunners`` first, then among the entry points of group
    :data:`RERUNNER_GROUP` named ``model`` (``importlib.metadata.entry_points``).

    Raises:
        InputError: no re-runner is registered for the model.
        RerunError: the entry point cannot be loaded or is not callable.
    """
    if rerunners is not None and model in rerunners:
        return rerunners[model]
    for entry in importlib.metadata.entry_points(group=RERUNNER_GROUP, name=model):
        try:
            loaded = entry.load()
        except Exception as e:  # any import-time failure of someone else's code
            raise RerunError(
                f"re-runner {entry.value!r} for model {model!r} cannot be loaded: "
                f"{type(e).__name__}: {e}"
            ) from e
        if not callable(loaded):
            raise RerunError(f"re-runner {entry.value!r} for model {model!r} is not callable")
        runner: Rerunner = loaded
        return runner
    raise InputError(
        f"no re-runner for model {model!r}: register an entry point named {model!r} in group "
        f"{RERUNNER_GROUP!r}, or pass rerunners="
    )


# -- one trace row -----------------------------------------------------------------------------

_SEVERITY = {"consistent": 0, "version-moved": 1, "drift": 2, "mis-extracted": 3}


@dataclass(frozen=True)
class _RowCheck:
    """What reconciliation found about one trace row, claims aside."""

    row: TraceRow
    status: str
    """``consistent``, ``mis-extracted``, ``version-moved`` or ``drift``."""
    findings: tuple[str, ...]
    """Why, one phrase per finding; empty when consistent."""
    fresh: dict[str, Decimal] | None
    """Numbers of the fresh run by path (``outputs.x``), when rerun at the same version."""
    fresh_version: str | None
    """The fresh run's ``specVersion`` when rerun."""
    rerun: bool
    """Whether the row was run again."""
    drifted: bool = False
    """The fresh run, at the same ``specVersion``, differs from the trace."""

    def fresh_at(self, path: str) -> str | None:
        if not self.rerun:
            return None
        if self.fresh is None:
            return f"specVersion {self.fresh_version}"
        value = self.fresh.get(path)
        return "(absent)" if value is None else str(value)


def _given_factors(claim: Claim) -> tuple[Decimal, ...]:
    """How a number the user stated may appear among echoed inputs: 6.5% as 0.065, 30 years
    as 360 months, 360 months as 30 years."""
    return {
        "%": (Decimal(1), Decimal("0.01")),
        "bps": (Decimal(1), Decimal("0.0001")),
        "year": (Decimal(1), Decimal(12)),
        "month": (Decimal(1), Decimal(1) / Decimal(12)),
    }.get(claim.unit or "", (Decimal(1),))


def _user_gave(claim: Claim, value: Decimal) -> bool:
    """True when an echoed input ``value`` is the number the user stated, allowing for the
    precision they wrote it with (``$350k`` is any input within 500 of 350,000)."""
    got = value if claim.signed else abs(value)
    for factor in _given_factors(claim):
        target = claim.value * factor if claim.signed else abs(claim.value * factor)
        if abs(got - target) <= claim.quantum * factor / 2:
            return True
    return False


def _mis_extraction(envelope: dict[str, Any], given: list[Claim]) -> str | None:
    """Why the echoed inputs differ from what the user said, or ``None``.

    Heuristic (documented in ``docs/evidence.md``): mis-extracted when some number the user
    stated appears in no input *and* some input matches no number the user stated: the user
    said 350,000 and the model ran 305,000. Extra inputs alone (defaults), or extra user
    numbers alone (context), are not a finding.
    """
    inputs = json_numbers(envelope.get("inputs"), "inputs")
    if not given or not inputs:
        return None
    unused = [u for u in given if not any(_user_gave(u, v) for _, v in inputs)]
    unsaid = [(p, v) for p, v in inputs if not any(_user_gave(u, v) for u in given)]
    if not unused or not unsaid:
        return None
    said = ", ".join(u.text for u in unused)
    ran = ", ".join(f"{p} = {v}" for p, v in unsaid)
    return f"the user said {said} but the echoed inputs have {ran} (comprehension)"


def _differences(trace: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    found = []
    for part in ("inputs", "outputs"):
        ours = dict(json_numbers(trace.get(part), part))
        theirs = dict(json_numbers(fresh.get(part), part))
        for path in sorted(ours.keys() | theirs.keys()):
            a, b = ours.get(path), theirs.get(path)
            if a != b:
                found.append(f"{path} {_show(a)} → {_show(b)}")
    if not found:
        found.append("non-numeric outputs differ")
    return found


def _show(value: Decimal | None) -> str:
    return "(absent)" if value is None else str(value)


def _check_row(
    row: TraceRow,
    given: list[Claim],
    *,
    rerun: bool,
    rerunners: Mapping[str, Rerunner] | None,
) -> _RowCheck:
    envelope = trace_envelope(row)
    findings = []
    status = "consistent"
    why = _mis_extraction(envelope, given)
    if why is not None:
        status, findings = "mis-extracted", [why]
    fresh_numbers: dict[str, Decimal] | None = None
    fresh_version: str | None = None
    drifted = False
    if rerun and is_envelope(envelope):
        fresh = _run(row, envelope, rerunners)
        version, fresh_version = str(envelope["specVersion"]), str(fresh["specVersion"])
        if fresh_version != version:
            findings.append(
                f"specVersion {version} → {fresh_version}: outputs not compared; "
                f"{_record_holds(row, envelope)}"
            )
            status = status if status != "consistent" else "version-moved"
        else:
            fresh_numbers = dict(json_numbers(fresh.get("outputs"), "outputs"))
            if (fresh.get("inputs"), fresh.get("outputs")) != (
                envelope.get("inputs"),
                envelope.get("outputs"),
            ):
                changed = "; ".join(_differences(envelope, fresh)[:3])
                findings.append(
                    f"specVersion {version} unchanged but the fresh run differs: {changed}"
                )
                status = status if status != "consistent" else "drift"
                drifted = True
    ran = rerun and is_envelope(envelope)  # an envelope of another spec cannot be rerun
    return _RowCheck(row, status, tuple(findings), fresh_numbers, fresh_version, ran, drifted)


def _run(
    row: TraceRow, envelope: dict[str, Any], rerunners: Mapping[str, Rerunner] | None
) -> dict[str, Any]:
    model = str(envelope["model"])
    runner = find_rerunner(model, rerunners)
    inputs = envelope["inputs"]
    if not isinstance(inputs, dict):
        raise RerunError(f"trace {row.id}: the echoed inputs are not a JSON object; cannot rerun")
    try:
        fresh = runner(dict(inputs), str(envelope["specVersion"]))
    except Exception as e:  # someone else's model code: report, do not crash
        raise RerunError(
            f"re-runner for model {model!r} failed on trace {row.id}: {type(e).__name__}: {e}"
        ) from e
    if isinstance(fresh, bytes):
        fresh = fresh.decode("utf-8", "surrogatepass")
    if isinstance(fresh, str):
        try:
            fresh = parse_envelope(fresh)
        except NotIJSON as e:
            raise RerunError(
                f"re-runner for model {model!r} returned text that is not I-JSON: {e}"
            ) from e
    if not isinstance(fresh, dict) or not is_envelope(fresh):
        raise RerunError(
            f"re-runner for model {model!r} returned no envelope "
            "(a JSON object with model, specVersion, inputs and outputs)"
        )
    return fresh


def _record_holds(row: TraceRow, envelope: dict[str, Any]) -> str:
    """Recompute the stored record's hash (the trace spec: "if the version has moved, recompute the
    stored record's hash instead") and say whether it still holds."""
    try:
        ours = record_hash(envelope, EnvelopeSpec.from_json(row.spec))
    except NotIJSON as e:
        return f"stored record hash cannot be recomputed: {e}"
    expected = (row.stated_hash or row.record_hash or "").lower()
    if ours == expected:
        return f"stored record hash recomputed and holds ({ours[:16]}…)"
    return f"stored record hash does NOT hold: stated {expected[:16]}…, recomputed {ours[:16]}…"


# -- the session -------------------------------------------------------------------------------


def reconcile(
    store: LogReader,
    session_id: str,
    *,
    rerun: bool = False,
    rerunners: Mapping[str, Rerunner] | None = None,
) -> list[ClaimVerdict]:
    """Reconcile every numeric claim of a session's assistant messages against its trace.

    Args:
        store: the log.
        session_id: the session.
        rerun: also run each trace row's model again on its echoed inputs (layer c).
        rerunners: re-runners by envelope ``model``, consulted before the entry points of
            group :data:`RERUNNER_GROUP`.

    Returns:
        One :class:`ClaimVerdict` per claim the user did not state themselves, in seq order,
        then one per trace row with a finding that no claim rests on. The classes are
        :data:`CLASSES`, defined in the module docstring (docs/specs.md, Tool-call traces:
        the three-way reconciliation); rounding follows :func:`agenttrail.evidence.claims.backs`.

    Raises:
        SessionNotFound: no such session.
        InputError: ``rerun`` and a trace row's model has no re-runner.
        RerunError: a re-runner failed or returned no envelope.
    """
    store.get_session(session_id)  # SessionNotFound, not an empty answer
    items = list(store.read(session_id))
    rows = store.traces(session_id)
    checks = check_claims(items, rows)
    turns = turn_starts(items)
    openers = {turn for turn in turns.values() if turn is not None}
    given = {
        event.seq: numbers_in(message_text(event.payload))
        for event in items
        if event.seq in openers
    }
    row_checks = {
        row.id: _check_row(
            row,
            given.get(row.turn_seq, []) if row.turn_seq is not None else [],
            rerun=rerun,
            rerunners=rerunners,
        )
        for row in rows
    }
    rows_of: dict[int | None, list[_RowCheck]] = {}
    for row in rows:
        rows_of.setdefault(row.turn_seq, []).append(row_checks[row.id])
    verdicts = []
    used: set[int] = set()
    for check in checks:
        if check.status == "given":
            continue
        verdict = _verdict(check, row_checks, rows_of.get(check.turn_seq, []), rerun=rerun)
        if verdict.trace_id is not None and verdict.status != "consistent":
            used.add(verdict.trace_id)
        verdicts.append(verdict)
    for row in rows:
        found = row_checks[row.id]
        if found.status != "consistent" and row.id not in used:
            verdicts.append(
                ClaimVerdict(
                    row.turn_seq,
                    None,
                    found.status,
                    None,
                    f"trace {row.id}",
                    None,
                    "; ".join(found.findings) + " (no claim in the reply rests on this row)",
                    trace_id=row.id,
                )
            )
    return verdicts


def _verdict(
    check: ClaimCheck,
    row_checks: Mapping[int, _RowCheck],
    turn_rows: Sequence[_RowCheck],
    *,
    rerun: bool,
) -> ClaimVerdict:
    claim = check.claim

    def verdict(
        status: str, trace: str | None, fresh: str | None, why: str, trace_id: int | None
    ) -> ClaimVerdict:
        return ClaimVerdict(
            check.turn_seq,
            check.seq,
            status,
            claim.text,
            trace,
            fresh,
            why,
            trace_id=trace_id,
            context=check.context,
            claim=claim,
        )

    if check.backing:  # backed by an output, or restating an echoed input
        role = "restates the echoed input" if check.status == "input" else "matches"
        status, why, backing, found = min(
            (_backed(claim, b, row_checks[b.trace_id], role) for b in check.backing),
            key=lambda found: _SEVERITY[found[0]],
        )
        fresh = found.fresh_at(backing.path)
        return verdict(status, str(backing), fresh, why, backing.trace_id)
    if not turn_rows:
        return verdict("unbacked", None, None, check.why, None)
    if rerun:  # the reply may match a fresh run that the trace does not
        for found in turn_rows:
            if not found.drifted or found.fresh is None:
                continue
            for path, value in found.fresh.items():
                if backs(claim, value):
                    why = "the reply matches a fresh run, not the trace; " + "; ".join(
                        found.findings
                    )
                    trace = _output_at(found, path)
                    return verdict("drift", trace, str(value), why, found.row.id)
    nearest = _nearest(claim, turn_rows)
    if nearest is None:
        return verdict("misstated", None, None, "the turn's trace rows hold no output", None)
    backing, found = nearest
    why = f"no output of the turn's trace backs it (nearest: {backing.path})"
    if not found.rerun:
        why += "; not rerun"
    elif not found.findings:
        why += "; the fresh run reproduces the trace: the reply is wrong (language layer)"
    else:
        why += "; " + "; ".join(found.findings)
    fresh = found.fresh_at(backing.path)
    return verdict("misstated", str(backing), fresh, why, backing.trace_id)


def _backed(
    claim: Claim, backing: Backing, found: _RowCheck, role: str
) -> tuple[str, str, Backing, _RowCheck]:
    """(status, why) of a claim a trace number backs: the row's finding, except that a
    drifted row whose fresh run still gives this very number leaves the claim consistent."""
    why = f"{role} {backing.path} of trace {backing.trace_id}"
    findings = "; ".join(found.findings)
    if found.status == "drift" and found.fresh is not None:
        again = found.fresh.get(backing.path)
        if again is not None and backs(claim, again):
            why += f"; the fresh run reproduces this number (elsewhere: {findings})"
            return "consistent", why, backing, found
    if findings:
        why += f"; {findings}"
    elif found.rerun:
        why += "; the fresh run reproduces the trace"
    else:
        why += "; not rerun"
    return found.status, why, backing, found


def _output_at(found: _RowCheck, path: str) -> str | None:
    for p, value in json_numbers(trace_envelope(found.row).get("outputs"), "outputs"):
        if p == path:
            return f"{p} = {value}"
    return None


def _nearest(claim: Claim, turn_rows: Sequence[_RowCheck]) -> tuple[Backing, _RowCheck] | None:
    """The output of the turn closest to the stated number (relative difference)."""
    best: tuple[Decimal, Backing, _RowCheck] | None = None
    scale = max(abs(claim.value), claim.quantum, Decimal("1e-12"))
    for found in turn_rows:
        outputs = json_numbers(trace_envelope(found.row).get("outputs"), "outputs")
        for path, value in outputs:
            for factor in (Decimal(1), Decimal(100)) if claim.unit == "%" else (Decimal(1),):
                distance = abs(abs(value * factor) - abs(claim.value)) / scale
                if best is None or distance < best[0]:
                    best = (distance, Backing(found.row.id, path, value), found)
    return None if best is None else (best[1], best[2])
