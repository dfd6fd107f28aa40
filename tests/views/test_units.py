"""Quantities as a person reads them (``agenttrail.views.units``)."""

from __future__ import annotations

import pytest

from agenttrail.views.units import counted, duration_text, size_text


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


def test_sizes_read_in_iec_binary_units() -> None:
    # the attachment label printed `12,345 bytes` before; expected values by hand:
    # 12,345 / 1,024 = 12.06; 268,435,456 = 256 × 1,024²; 10¹² / 1,024³ = 931.32
    cases = {
        0: "0 bytes",
        1: "1 byte",
        1023: "1,023 bytes",
        1024: "1 KiB",
        1536: "1.5 KiB",
        12_345: "12.1 KiB",
        268_435_456: "256 MiB",
        10**12: "931.3 GiB",
    }
    assert {n: size_text(n) for n in cases} == cases


def test_a_size_at_a_unit_boundary_moves_to_the_larger_unit() -> None:
    # 1,048,575 bytes is 1,023.999 KiB, which rounds to 1,024.0: it reads as 1 MiB
    assert [size_text(n) for n in (1_048_575, 1024**3 - 1, 1024**7)] == [
        "1 MiB",
        "1 GiB",
        "1024 EiB",
    ]
    with pytest.raises(ValueError, match="never negative, not -1"):
        size_text(-1)


def test_a_count_of_one_takes_the_singular() -> None:
    assert [counted(n, "model call") for n in (0, 1, 2, 12_345)] == [
        "0 model calls",
        "1 model call",
        "2 model calls",
        "12,345 model calls",
    ]
