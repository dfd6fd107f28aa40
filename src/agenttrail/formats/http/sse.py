"""Server-sent events (WHATWG HTML §9.2.6), as recorded LLM streams carry them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SSEEvent", "sse_events"]


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event."""

    line: int
    """1-based line of the event's first ``data:`` line in the text."""
    name: str | None
    """Its ``event:`` field, if any."""
    data: str
    """Its ``data:`` lines joined with newlines."""
    complete: bool
    """False for a last event the text ends inside (no blank line after it: cut off?)."""


def sse_events(text: str) -> list[SSEEvent]:
    """The events of an SSE stream: each dispatched at a blank line; ``id:``, ``retry:`` and
    comment lines (``:``) are skipped; a data-less event is not dispatched (WHATWG HTML
    §9.2.6, "dispatch the event")."""
    found: list[SSEEvent] = []
    name: str | None = None
    data: list[str] = []
    start = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        if not line:
            if data:
                found.append(SSEEvent(start, name, "\n".join(data), True))
            name, data, start = None, [], 0
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "event":
            name = value
        elif key == "data":
            data.append(value)
            start = start or number
    if data:
        found.append(SSEEvent(start, name, "\n".join(data), False))
    return found
