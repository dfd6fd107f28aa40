"""Quantities as a person reads them: a duration in the unit that suits it (``9.8 µs``,
``812 ms``, ``1.2 s``, ``3 min 4 s``), never a float of milliseconds."""

from __future__ import annotations

__all__ = ["duration_text"]


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
