"""A fixed-rate mortgage model behind ``run_model``: our own, for the reconciliation tests.

It answers with the seed's response envelope (``{model, specVersion, inputs, outputs,
assumptions, constants, record: {sha256}}``). :func:`rerun` is the re-runner the tests register
as the entry point ``mortgage`` of group ``agenttrail.rerunners``: ``test_reconcile.py`` copies
this file into a temporary folder beside a ``*.dist-info/entry_points.txt`` so that the real
``agenttrail`` command finds it through ``importlib.metadata``. Keep it self-contained.
"""

from __future__ import annotations

from typing import Any

from agenttrail.evidence.envelopes import record_hash

MODEL = "mortgage"
SPEC_VERSION = "2.1"
"""The version this build computes; the session fixture also holds a 2.0 envelope."""


def outputs(
    principal: float, annual_rate: float, years: int, *, interest_from_unrounded: bool = False
) -> dict[str, Any]:
    """Monthly payment (currency units, to the cent), payment count, totals and the share of
    all payments that is interest (a fraction, 4 places). Standard annuity formula, monthly
    compounding. ``interest_from_unrounded`` reproduces an older build's bug: total interest
    from the unrounded payment."""
    n = years * 12
    r = annual_rate / 12
    exact = principal * r / (1 - (1 + r) ** -n)
    payment = round(exact, 2)
    total_paid = round((exact if interest_from_unrounded else payment) * n, 2)
    total_interest = round(total_paid - principal, 2)
    return {
        "monthly_payment": payment,
        "n_payments": n,
        "total_paid": total_paid,
        "total_interest": total_interest,
        "interest_share": round(total_interest / total_paid, 4),
    }


def envelope(inputs: dict[str, Any], outs: dict[str, Any], spec_version: str) -> dict[str, Any]:
    """The response envelope, with its record hash stated under ``record.sha256``."""
    body: dict[str, Any] = {
        "model": MODEL,
        "specVersion": spec_version,
        "inputs": inputs,
        "outputs": outs,
        "sentinels": [],
        "assumptions": ["fixed rate", "monthly compounding", "no fees"],
        "constants": {"months_per_year": 12},
    }
    body["record"] = {"sha256": record_hash(body)}
    return body


def run_model(inputs: dict[str, Any]) -> dict[str, Any]:
    """Run the current build on ``{principal, annual_rate (fraction), years}``."""
    outs = outputs(inputs["principal"], inputs["annual_rate"], inputs["years"])
    return envelope(inputs, outs, SPEC_VERSION)


def rerun(inputs: dict[str, Any], spec_version: str) -> dict[str, Any]:
    """The re-runner: this build runs only its own version, whatever ``spec_version`` asks."""
    return run_model(inputs)
