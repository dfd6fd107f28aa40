"""Quantities as a person reads them (``agenttrail.views.units``)."""

from __future__ import annotations

from agenttrail.views.units import duration_text


def test_durations_read_as_a_person_reads_them() -> None:
    # `agenttrail show` printed `0.009775161743164062 ms` before
    cases = {
        0.009775161743164062: "9.8 µs",
        0.25: "250 µs",
        9.96: "10 ms",
        812: "812 ms",
        1234: "1.2 s",
        42_000: "42 s",
        184_000: "3 min 4 s",
        7_500_000: "2 h 5 min",
    }
    assert {ms: duration_text(ms) for ms in cases} == cases


def test_a_duration_at_a_unit_boundary_moves_to_the_larger_unit() -> None:
    assert [duration_text(ms) for ms in (0.9997, 999.6, 59_999, 60_000, 3_599_600, -5)] == [
        "1 ms",
        "1 s",
        "1 min 0 s",
        "1 min 0 s",
        "1 h 0 min",
        "-5 ms",
    ]
