"""Streaming partials redacted before the live feed shows them (docs/redaction.md, Logs and
the live feed).

A partial (``POST /v1/sessions/{id}/partials``) is never stored, but the viewer shows it while a
response streams, before the final event (which the store redacts) replaces it. A secret can
arrive split over two deltas (``sk-proj-Ab3d`` then ``Ef6h…``), so each delta is not redacted
alone: the text of the session's stream so far is, with the log's own rules and key (so a
partial's marker is the one the final event will carry), and only what lies before its last
token is shown; the last token (the text after the last whitespace) and an open PEM block
(``-----BEGIN`` without its whole ``-----END …-----`` line) are held back until the text goes
on past them or the stream says ``done``.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from agenttrail.log.redact import REDACTIONS, Redactor

__all__ = ["PartialRedactor"]

_PEM_BEGIN = "-----BEGIN"
_PEM_END = re.compile(r"-----END [^\n]*?-----")
"""The whole line that closes a PEM block: its body is a secret only once this is there."""


@dataclass
class _Stream:
    raw: str = ""
    """Every text delta of the stream so far, as sent."""
    shown: str = ""
    """What the feed was sent of it, redacted."""


class PartialRedactor:
    """Redacts the partials of each session's stream (module docstring); thread-safe.

    Args:
        redactor: the log's (``LogStore.redactor``): its rules and key.
    """

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._streams: dict[str, _Stream] = {}
        self._lock = threading.Lock()

    def redact(self, session_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        """The patch to send: its ``textDelta`` replaced by the redacted text that may be
        shown now (none when everything new is held back), its other fields redacted; the
        stream ends with ``done``. May read the log's key (the first secret): call it off
        the event loop."""
        rest = {name: value for name, value in patch.items() if name != "textDelta"}
        rest = self.redactor.payload(rest)
        rest.pop(REDACTIONS, None)
        delta = patch.get("textDelta")
        with self._lock:
            stream = self._streams.setdefault(session_id, _Stream())
            if isinstance(delta, str):
                stream.raw += delta
            done = bool(patch.get("done"))
            end = len(stream.raw) if done else _shown_up_to(stream.raw)
            text = self._text(stream.raw[:end])
            # Redacting a longer text keeps what was shown (a secret ends at whitespace); if
            # a rule ever reads it otherwise, what was sent stays sent and the rest follows.
            new = text[len(stream.shown) :] if len(text) > len(stream.shown) else ""
            stream.shown = text if len(text) > len(stream.shown) else stream.shown
            if done:
                del self._streams[session_id]
        return {**rest, "textDelta": new} if new else rest

    def end(self, session_id: str) -> None:
        """End the session's stream without ``done``: a durable event was appended, which
        replaces what streamed (what was held back of it is not shown, and the next stream
        starts empty instead of with that text)."""
        with self._lock:
            self._streams.pop(session_id, None)

    def _text(self, text: str) -> str:
        redacted = self.redactor.payload({"text": text})["text"]
        assert isinstance(redacted, str)
        return redacted


def _shown_up_to(raw: str) -> int:
    """How much of a stream's text may be shown: up to its last whitespace, and before an
    open PEM block."""
    end = max(raw.rfind(c) for c in " \t\n\r") + 1
    begin = raw.rfind(_PEM_BEGIN)
    if begin >= 0 and not _PEM_END.search(raw, begin):
        end = min(end, begin)
    return end
