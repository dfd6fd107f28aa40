"""Three-way reconciliation (docs/specs.md, The three-way reconciliation).

Our loan session (``tests/loan_session.py``) has one turn per class; each claim must be
classified right without and with a fresh run. The fresh run goes through the re-runner
registry: the ``rerunners=`` argument in-process, and a real ``agenttrail.rerunners`` entry
point (a ``*.dist-info`` folder on ``PYTHONPATH``) for the command.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrail import Recorder
from agenttrail.errors import InputError, RerunError, SessionNotFound
from agenttrail.evidence.reconcile import CLASSES, find_rerunner, reconcile
from agenttrail.log.store import LogStore, open_store
from tests import mortgage_model
from tests.conftest import run_cli, run_cli_subprocess
from tests.loan_session import EXPECTED, SESSION_ID, record_loan_session

RERUNNERS = {"mortgage": mortgage_model.rerun}
MODULE = "agenttrail_test_mortgage"


def _classes(store: LogStore, turns: list[int], **options: Any) -> list[tuple[int, str, str]]:
    return [
        (turns.index(v.turn_seq) + 1 if v.turn_seq in turns else 0, v.stated or "", v.status)
        for v in reconcile(store, SESSION_ID, **options)
    ]


def test_each_claim_is_classified_without_a_fresh_run(store: LogStore) -> None:
    turns = record_loan_session(store)
    assert _classes(store, turns) == [(turn, text, plain) for turn, text, plain, _ in EXPECTED]


def test_each_claim_is_classified_with_a_fresh_run(store: LogStore) -> None:
    turns = record_loan_session(store)
    assert _classes(store, turns, rerun=True, rerunners=RERUNNERS) == [
        (turn, text, fresh) for turn, text, _, fresh in EXPECTED
    ]
    assert {fresh for *_, fresh in EXPECTED} == set(CLASSES)  # one turn per class


def test_verdicts_name_the_layer_that_disagrees(store: LogStore) -> None:
    record_loan_session(store)
    verdicts = {v.stated: v for v in reconcile(store, SESSION_ID, rerun=True, rerunners=RERUNNERS)}

    ok = verdicts["$1,896.20"]
    assert (ok.trace, ok.fresh) == ("outputs.monthly_payment = 1896.2", "1896.2")
    assert ok.why.endswith("the fresh run reproduces the trace")

    misstated = verdicts["$2,419.23"]
    assert (misstated.trace, misstated.fresh) == ("outputs.monthly_payment = 2491.23", "2491.23")
    assert "the reply is wrong (language layer)" in misstated.why

    extracted = verdicts["$2,029.17"]
    assert "the user said $350,000" in extracted.why
    assert "inputs.principal = 305000" in extracted.why

    unbacked = verdicts["$2,600"]
    assert (unbacked.trace, unbacked.fresh, unbacked.trace_id) == (None, None, None)
    assert "answered from memory" in unbacked.why

    drift = verdicts["$304,145.48"]
    assert (drift.trace, drift.fresh) == ("outputs.total_interest = 304145.48", "304144.4")
    assert "specVersion 2.1 unchanged" in drift.why
    # The same row's payment is reproduced exactly: that claim stands.
    assert verdicts["$1,539.29"].status == "consistent"
    assert "the fresh run reproduces this number" in verdicts["$1,539.29"].why

    moved = verdicts["$1,199.10"]
    assert moved.fresh == "specVersion 2.1"
    assert "specVersion 2.0 → 2.1: outputs not compared" in moved.why
    assert "stored record hash recomputed and holds" in moved.why


def test_version_moved_says_when_the_stored_record_no_longer_holds(store: LogStore) -> None:
    inputs = {"principal": 200_000, "annual_rate": 0.06, "years": 30}
    envelope = mortgage_model.envelope(
        inputs, mortgage_model.outputs(200_000, 0.06, 30), spec_version="2.0"
    )
    envelope["record"] = {"sha256": "0" * 64}  # stated, and wrong
    rec = Recorder.start(store, session_id="moved")
    with rec.turn(model="gpt-4o") as turn:
        turn.user("And $200,000 at 6% for 30 years?")
        call = turn.tool_call("run_model", inputs)
        turn.tool_result(call, json.dumps(envelope))
        turn.reply("Your payment would be $1,199.10 a month.")
    (verdict,) = reconcile(store, "moved", rerun=True, rerunners=RERUNNERS)
    assert verdict.status == "version-moved"
    assert "stored record hash does NOT hold" in verdict.why


def _turn_with(
    store: LogStore, session_id: str, envelope: dict[str, Any], question: str, answer: str
) -> None:
    rec = Recorder.start(store, session_id=session_id)
    with rec.turn(model="gpt-4o") as turn:
        turn.user(question)
        call = turn.tool_call("run_model", envelope["inputs"])
        turn.tool_result(call, json.dumps(envelope))
        turn.reply(answer)


def test_a_reply_that_matches_the_fresh_run_but_not_the_trace_is_drift(store: LogStore) -> None:
    inputs = {"principal": 250_000, "annual_rate": 0.0625, "years": 30}
    old = mortgage_model.outputs(250_000, 0.0625, 30, interest_from_unrounded=True)
    envelope = mortgage_model.envelope(inputs, old, mortgage_model.SPEC_VERSION)
    _turn_with(store, "s", envelope, "And the interest?", "Interest: $304,144.40.")
    assert [v.status for v in reconcile(store, "s")] == ["misstated"]
    (verdict,) = reconcile(store, "s", rerun=True, rerunners=RERUNNERS)
    assert (verdict.status, verdict.fresh) == ("drift", "304144.4")
    assert verdict.why.startswith("the reply matches a fresh run, not the trace")


def test_a_trace_row_finding_no_claim_rests_on_is_still_reported(store: LogStore) -> None:
    inputs = {"principal": 305_000, "annual_rate": 0.07, "years": 30}
    _turn_with(
        store,
        "s",
        mortgage_model.run_model(inputs),
        "My sister is borrowing $350,000 at 7% over 30 years. What will her payment be?",
        "I have run the numbers; see the attached schedule.",
    )
    (verdict,) = reconcile(store, "s")
    assert (verdict.status, verdict.seq, verdict.stated, verdict.claim) == (
        "mis-extracted",
        None,
        None,
        None,
    )
    assert verdict.why.endswith("(no claim in the reply rests on this row)")


def test_inputs_the_user_gave_in_other_units_are_not_mis_extracted(store: LogStore) -> None:
    # 6.5% arrives as 0.065, 30 years as 360 months, and a default the user never named
    # (no extra payment) is not a finding on its own.
    inputs = {"principal": 300_000, "rate": 0.065, "months": 360, "extra_payment": 0}
    envelope = mortgage_model.envelope(
        inputs, mortgage_model.outputs(300_000, 0.065, 30), mortgage_model.SPEC_VERSION
    )
    _turn_with(
        store,
        "s",
        envelope,
        "What is the payment on $300k at 6.5% over 30 years?",
        "It is $1,896.20 a month.",
    )
    assert [v.status for v in reconcile(store, "s")] == ["consistent"]


def test_an_unknown_session_is_an_error(store: LogStore) -> None:
    with pytest.raises(SessionNotFound):
        reconcile(store, "nope")


def test_rerun_without_a_rerunner_is_an_error_naming_the_model(store: LogStore) -> None:
    record_loan_session(store)
    with pytest.raises(InputError, match="no re-runner for model 'mortgage'"):
        reconcile(store, SESSION_ID, rerun=True, rerunners={})


def _failing(inputs: dict[str, Any], spec_version: str) -> Any:
    raise ZeroDivisionError("division by zero")


@pytest.mark.parametrize(
    ("runner", "message"),
    [
        (_failing, "failed on trace 1: ZeroDivisionError"),
        (lambda inputs, version: {"outputs": {}}, "returned no envelope"),
        (lambda inputs, version: '{"a": NaN}', "returned text that is not I-JSON"),
    ],
)
def test_a_broken_rerunner_is_reported_not_crashed(
    store: LogStore, runner: Any, message: str
) -> None:
    record_loan_session(store)
    with pytest.raises(RerunError, match=message):
        reconcile(store, SESSION_ID, rerun=True, rerunners={"mortgage": runner})


def test_a_rerunner_may_return_the_envelope_as_json_text(store: LogStore) -> None:
    turns = record_loan_session(store)
    as_text = {
        "mortgage": lambda inputs, version: json.dumps(mortgage_model.rerun(inputs, version))
    }
    assert _classes(store, turns, rerun=True, rerunners=as_text) == [
        (turn, text, fresh) for turn, text, _, fresh in EXPECTED
    ]


# -- the entry point registry ------------------------------------------------------------------


def _install_rerunner(root: Path, target: str = "rerun") -> Path:
    """A distribution folder that registers ``mortgage`` in group ``agenttrail.rerunners``,
    as ``pip install`` of a package with that entry point would leave it."""
    root.mkdir(exist_ok=True)
    source = Path(mortgage_model.__file__).read_text(encoding="utf-8")
    (root / f"{MODULE}.py").write_text(source, encoding="utf-8")
    dist = root / f"{MODULE}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: agenttrail-test-mortgage\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        f"[agenttrail.rerunners]\nmortgage = {MODULE}:{target}\n", encoding="utf-8"
    )
    return root


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Put a folder on ``sys.path`` for this test only, and forget the module it imported."""

    def add(root: Path) -> None:
        monkeypatch.syspath_prepend(str(root))

    yield add
    sys.modules.pop(MODULE, None)


def test_find_rerunner_loads_the_entry_point(tmp_path: Path, on_path: Any) -> None:
    on_path(_install_rerunner(tmp_path / "site"))
    runner = find_rerunner("mortgage")
    assert runner.__module__ == MODULE
    assert runner({"principal": 300_000, "annual_rate": 0.065, "years": 30}, "2.1")["outputs"][
        "monthly_payment"
    ] == pytest.approx(1896.2)
    # The argument comes first.
    assert find_rerunner("mortgage", RERUNNERS) is mortgage_model.rerun


def test_an_entry_point_that_is_not_callable_is_refused(tmp_path: Path, on_path: Any) -> None:
    on_path(_install_rerunner(tmp_path / "site", target="SPEC_VERSION"))
    with pytest.raises(RerunError, match="is not callable"):
        find_rerunner("mortgage")


# -- the command -------------------------------------------------------------------------------


@pytest.fixture
def loan_db(db_path: Path) -> tuple[Path, list[int]]:
    with open_store(db_path) as store:
        turns = record_loan_session(store)
        clean = Recorder.start(store, session_id="clean")
        with clean.turn(model="gpt-4o") as turn:
            turn.user("Is a fixed rate safer?")
            turn.reply("It is more predictable: the payment never changes.")
    return db_path, turns


def _json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_cli_reconcile_json(loan_db: tuple[Path, list[int]]) -> None:
    db, turns = loan_db
    result = run_cli("reconcile", SESSION_ID, "--json", "--db", str(db))
    assert result.returncode == 1, result.stderr
    records = _json_lines(result.stdout)
    assert [(turns.index(r["turn_seq"]) + 1, r["stated"], r["status"]) for r in records] == [
        (turn, text, plain) for turn, text, plain, _ in EXPECTED
    ]
    assert records[0]["value"] == "1896.20"
    assert "11 claims: 8 consistent, 1 misstated, 1 mis-extracted, 1 unbacked" in result.stderr


def test_cli_reconcile_rerun_through_a_real_entry_point(
    loan_db: tuple[Path, list[int]], tmp_path: Path
) -> None:
    db, turns = loan_db
    site = _install_rerunner(tmp_path / "site")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    # A subprocess: entry points are read from the interpreter's path when it starts.
    result = run_cli_subprocess(
        "reconcile", SESSION_ID, "--rerun", "--json", "--db", str(db), env={"PYTHONPATH": path}
    )
    assert result.returncode == 1, result.stderr
    assert [
        (turns.index(r["turn_seq"]) + 1, r["stated"], r["status"])
        for r in _json_lines(result.stdout)
    ] == [(turn, text, fresh) for turn, text, _, fresh in EXPECTED]


def test_cli_reconcile_table_and_exit_codes(loan_db: tuple[Path, list[int]]) -> None:
    db, _ = loan_db
    table = run_cli("reconcile", SESSION_ID, "--db", str(db))
    assert table.returncode == 1
    for word in ("misstated", "mis-extracted", "unbacked", "$2,419.23", "outputs.monthly_payment"):
        assert word in table.stdout
    clean = run_cli("reconcile", "clean", "--db", str(db))
    assert (clean.returncode, clean.stderr.strip()) == (0, "0 claims: none")
    missing = run_cli("reconcile", SESSION_ID, "--rerun", "--db", str(db))
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: no re-runner for model 'mortgage'")
    assert "Traceback" not in missing.stderr


def test_cli_claims(loan_db: tuple[Path, list[int]]) -> None:
    db, turns = loan_db
    result = run_cli("claims", SESSION_ID, "--json", "--db", str(db))
    assert result.returncode == 1, result.stderr
    records = _json_lines(result.stdout)
    assert [(r["turn_seq"], r["stated"], r["value"]) for r in records] == [
        (turns[1], "$2,419.23", "2419.23"),
        (turns[3], "$2,600", "2600"),
    ]
    assert result.stderr.strip() == "2 unbacked claims"
    table = run_cli("claims", SESSION_ID, "--db", str(db))
    assert "answered from memory" in table.stdout
    clean = run_cli("claims", "clean", "--db", str(db))
    assert (clean.returncode, clean.stdout.count("$")) == (0, 0)
