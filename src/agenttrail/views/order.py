"""The order a person reads a session in: an assistant message's text runs and its tool calls
interleaved as the provider gave them.

An assistant message whose payload records an ``order`` (docs/log-format.md, Block order) is
shown as runs: the blocks before its first tool call, then those calls, then the blocks after
them, and so on. The tool call events stay where they are in the log (their seqs, pairing and
trace rows do not change); a view only shows them between the runs of their message. A message
without ``order`` is one run followed by its calls, which is the log order itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from agenttrail.model import Event, content_order

__all__ = ["Shown", "TextRun", "reading_order", "text_runs"]


@dataclass(frozen=True)
class TextRun:
    """The blocks of an assistant message between two of its tool calls."""

    blocks: list[dict[str, Any]]
    """The blocks of the run, in order (text, thinking, ...)."""
    calls: list[str] = field(default_factory=list)
    """Ids of the tool calls shown right after the run, in order."""


def text_runs(payload: dict[str, Any]) -> list[TextRun] | None:
    """An ordered assistant message as runs of blocks, each with the calls that follow it;
    ``None`` for a message without a recorded order (:func:`agenttrail.model.content_order`).
    A server tool's result is shown with its call, so its place adds nothing here."""
    order = content_order(payload)
    if order is None:
        return None
    runs = [TextRun([])]
    for part in order:
        if part.block is not None:
            if runs[-1].calls:
                runs.append(TextRun([]))
            runs[-1].blocks.append(part.block)
        elif part.kind == "toolCall" and part.id is not None:
            runs[-1].calls.append(part.id)
    return runs


class Shown(NamedTuple):
    """One event in reading order; ``run`` is the run of an ordered message shown here (a
    tuple: ``show`` makes one a row, and a frozen dataclass cost three times as much)."""

    event: Event
    run: TextRun | None = None
    """For an ordered assistant message, the run this row shows (``None``: the whole event)."""
    first: bool = True
    """False for a message's second and later runs (a continuation of the same seq)."""


def reading_order(events: Sequence[Event]) -> list[Shown]:
    """``events`` (in seq order) in the order a person reads them: each ordered assistant
    message split into its runs, its calls (found by id after it) moved between them.

    A call the order names but the log does not hold after the message is left where it is;
    every event is shown exactly once, and runs stay in their message's order.
    """
    moved: set[int] = set()
    out: list[Shown] = []
    for at, event in enumerate(events):
        if event.seq in moved:
            continue
        runs = text_runs(event.payload) if event.type == "message" else None
        if runs is None:
            out.append(Shown(event))
            continue
        calls = _calls_after(events, at)
        for k, run in enumerate(runs):
            out.append(Shown(event, run, first=k == 0))
            for call_id in run.calls:
                call = calls.pop(call_id, None)
                if call is not None and call.seq not in moved:
                    moved.add(call.seq)
                    out.append(Shown(call))
    return out


def _calls_after(events: Sequence[Event], at: int) -> dict[str, Event]:
    """The first ``tool_call`` event with each id after ``events[at]``, up to the next
    message (an importer writes a message's calls right after it)."""
    found: dict[str, Event] = {}
    for event in events[at + 1 :]:
        if event.type == "message":
            break
        call_id = event.payload.get("id") if event.type == "tool_call" else None
        if isinstance(call_id, str) and call_id:
            found.setdefault(call_id, event)
    return found
