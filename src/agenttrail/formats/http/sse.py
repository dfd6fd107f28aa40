"""Server-sent events, as recorded LLM streams carry them, parsed as the WHATWG HTML standard
says (§9.2.5 "Parsing an event stream" and §9.2.6 "Interpreting an event stream",
https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["SSEEvent", "last_event", "sse_events"]

_LINE_END = re.compile(r"\r\n|\r|\n")
"""The three ways a line may end: CRLF, LF alone, CR alone (§9.2.5, ``end-of-line``)."""


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event."""

    line: int
    """1-based line of the event's first ``data:`` line in the text (lines counted as the
    stream ends them: CRLF, LF or CR)."""
    name: str | None
    """Its ``event:`` field, if any."""
    data: str
    """Its ``data:`` lines joined with newlines."""
    complete: bool
    """False for a last event the text ends inside (no blank line after it: cut off?)."""


def sse_events(text: str) -> list[SSEEvent]:
    """The events of an SSE stream, in order.

    Rules (WHATWG HTML §9.2.5, "Parsing an event stream", and §9.2.6, "Interpreting an event
    stream"): one leading U+FEFF byte order mark is ignored; a line ends in CRLF, LF alone or
    CR alone; a field is ``name: value`` with one space after the colon dropped (a line
    without a colon is a field with an empty value); an event is dispatched at a blank line;
    ``id:``, ``retry:``, unknown fields and comment lines (``:``) are skipped; a data-less
    event is not dispatched. Unlike a browser, a last event the text ends inside is returned,
    marked incomplete, so that the reader can warn about a cut-off stream.

    Args:
        text: the stream as text (a recorded response body or a file).

    Returns:
        The events, each with the line of its first ``data:`` line.
    """
    found: list[SSEEvent] = []
    name: str | None = None
    data: list[str] = []
    start = 0
    lines = _LINE_END.split(text.removeprefix("\ufeff"))
    if lines and lines[-1] == "":
        lines.pop()  # the text's last line end, not an empty line
    for number, line in enumerate(lines, start=1):
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


def last_event(text: str) -> str | None:
    """What the last whole event of a stream is: its data when that is not JSON (``[DONE]``),
    else the ``type`` of its JSON data, else ``error`` for an object with an ``error`` (an
    OpenAI Chat Completions error chunk, which has no type:
    https://platform.openai.com/docs/api-reference/chat-streaming), else its ``event:`` name;
    ``None`` for a stream with no whole event (a last event the text ends inside does not
    count)."""
    whole = [event for event in sse_events(text) if event.complete]
    if not whole:
        return None
    event = whole[-1]
    try:
        data = json.loads(event.data)
    except ValueError:
        return event.data.strip()
    if not isinstance(data, dict):
        return event.name
    kind = data.get("type")
    if isinstance(kind, str):
        return kind
    return "error" if data.get("error") else event.name
