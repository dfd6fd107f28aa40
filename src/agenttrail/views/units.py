"""Quantities as a person reads them: a duration in the unit that suits it (``9.8 µs``,
``812 ms``, ``1.2 s``, ``3 min 4 s``), never a float of milliseconds, and a size in bytes in
IEC binary units (``900 bytes``, ``12.1 KiB``, ``3.4 MiB``), never ``12,345 bytes``.

Sizes use IEC 80000-13 binary prefixes (KiB = 1,024 bytes, MiB = 1,024 KiB, …), as the
CLI's ``--max-bytes`` help (``256 MiB``) and the limits already do; ``--json`` output and
the REST API keep exact byte counts."""

from __future__ import annotations

__all__ = ["counted", "duration_text", "size_text"]


def duration_text(ms: float) -> str:
    """A duration of ``ms`` milliseconds (as events record ``duration_ms``) for a person.

    Below 10 of a unit one decimal is kept, above it none (``9.8 µs``, ``98 µs``, ``1.2 s``,
    ``42 s``); from a minute on, minutes and seconds (``3 min 4 s``), from an hour on, hours
    and minutes (``2 h 5 min``). A negative duration (clocks that stepped back) keeps its sign.
    """
    if ms < 0:
        return "-" + duration_text(-ms)
    if ms < 1:
        return _scaled(ms * 1000, "µs")
    if ms < 1000:
        return _scaled(ms, "ms")
    seconds = ms / 1000
    if seconds < 59.5:  # 59.5 s and up read as a minute
        return _scaled(seconds, "s")
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60} min"


def _scaled(value: float, unit: str) -> str:
    shown = f"{value:.1f}" if round(value, 1) < 10 else f"{round(value)}"
    if shown.endswith(".0"):
        shown = shown[:-2]
    if unit != "s" and shown == "1000":  # 999.7 µs rounds to the next unit
        return _scaled(value / 1000, "ms" if unit == "µs" else "s")
    return f"{shown} {unit}"


_IEC_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def size_text(size: int) -> str:
    """A size of ``size`` bytes for a person, in IEC binary units (IEC 80000-13).

    Below 1 KiB the exact count (``1 byte``, ``900 bytes``); from 1 KiB on, the largest unit
    the size reaches with one decimal, a ``.0`` dropped (``12,345`` → ``12.1 KiB``,
    ``268,435,456`` → ``256 MiB``); a value that rounds to 1,024 of a unit reads as 1 of
    the next (``1,048,575`` → ``1 MiB``).

    Raises:
        ValueError: ``size`` is negative (a size never is).
    """
    if size < 0:
        raise ValueError(f"a size in bytes is never negative, not {size}")
    if size < 1024:
        return "1 byte" if size == 1 else f"{size:,} bytes"
    value, unit = size / 1024, 0
    while round(value, 1) >= 1024 and unit < len(_IEC_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:.1f}".removesuffix(".0") + f" {_IEC_UNITS[unit]}"


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, the noun plural (an ``s`` added) unless the count is one, the
    count with thousands separators: ``1 step``, ``0 steps``, ``12,345 model calls``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
