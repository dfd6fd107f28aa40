"""Text from the log made safe to show: one rule for the terminal, the viewer's rows and
search snippets (a module of its own, so that those that show text need not import the
terminal's tables)."""

from __future__ import annotations

import re

__all__ = ["safe"]

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def safe(text: str) -> str:
    """Text from the log made safe for a terminal: control characters (an ESC could move the
    cursor or clear the screen), bidi controls (they reorder what is shown, CVE-2021-42574) and
    lone surrogates (not encodable) become visible escapes such as ``\\x1b``, ``\\u202e`` and
    ``\\udc81``; newlines and tabs stay."""
    if text.isprintable():  # a line of most text: nothing to escape, found in C (every
        return text  # character escaped here is one Python does not count printable)
    return _UNSAFE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
