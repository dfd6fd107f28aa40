"""Escaping arbitrary text into a Fountain session file so that it cannot create structure.

One rule reads everything back: **a backslash followed by a character stands for that
character**, and ``\\u{HEX}`` stands for the code point HEX. The writer uses it in three ways
(rules in ``docs/fountain-format.md``):

- *inline*, anywhere in a line: ``\\`` itself, a second ``[`` of ``[[`` and a second ``]`` of
  ``]]`` (notes), the ``*`` of ``/*`` and the ``/`` of ``*/`` (boneyard), line breaks,
  control characters, bidi controls and lone surrogates (``\\u{a}``, ``\\u{202e}``);
- *line starts* in dialogue: a line that a Fountain parser could read as something other
  than dialogue (a scene heading, a character cue, a transition, ``THE END.``, a forced
  element ``! @ . > ~ = #``, a parenthetical, a blank-looking line) gets a leading ``\\``;
- *empty lines* in dialogue are the Fountain convention, two spaces, so a reply with blank
  lines stays one dialogue block.
"""

from __future__ import annotations

import re

__all__ = [
    "BIDI_CONTROLS",
    "dialogue_lines",
    "escape_inline",
    "is_plain_cue",
    "text_from_dialogue",
    "unescape",
]

BLANK_IN_DIALOGUE = "  "
"""How an empty line of a message is written inside its dialogue block (Fountain spec)."""

_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
"""Characters some reader would take as the end of a line (``str.splitlines`` and others)."""

BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
"""Invisible direction controls: they can make a line display in another order than it reads
("Trojan Source", CVE-2021-42574), so they are always written as escapes."""

_PAIRS = {"[": "[", "]": "]", "*": "/", "/": "*"}
"""Character → the preceding character that makes the pair structural: ``[[``, ``]]``, ``/*``,
``*/``. The second character of such a pair is escaped."""

_HEADING = re.compile(r"(?:INT|EXT|EST|I/E|INT/EXT|INT\./EXT)(?:\s*\.|\s|$)", re.IGNORECASE)
_GUARDED_STARTS = frozenset("!@>~=#(")
_FORCED_HEADING = re.compile(r"\.[A-Za-z0-9]")  # "." + alphanumeric; "./x" and "..." are text
_PLAIN_CUE = re.compile(r"[A-Z][A-Z0-9 ._'#-]*")
_ESCAPE = re.compile(r"\\u\{([0-9a-fA-F]{1,6})\}|\\(.)", re.DOTALL)


def _needs_code(char: str) -> bool:
    code = ord(char)
    return (
        char in _BREAKS
        or char in BIDI_CONTROLS
        or (code < 0x20 and char != "\t")
        or 0x7F <= code <= 0x9F
        or 0xD800 <= code <= 0xDFFF
    )


def escape_inline(text: str, *, also: str = "") -> str:
    """Escape ``text`` so it fits on one line and opens no note, boneyard or other escape.

    Args:
        text: any string (lone surrogates included).
        also: extra characters to escape wherever they stand (``—`` inside notes, whose
            fields are separated by `` — ``).

    Returns:
        One line of text; :func:`unescape` gives back ``text`` exactly.
    """
    out: list[str] = []
    prev = ""
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif _needs_code(char):
            out.append(f"\\u{{{ord(char):x}}}")
        elif (char in _PAIRS and prev == _PAIRS[char]) or char in also:
            out.append("\\" + char)
        else:
            out.append(char)
        prev = char
    return "".join(out)


def unescape(line: str) -> str:
    """Undo :func:`escape_inline` and line-start guards.

    ``\\c`` → ``c`` for any character ``c``; ``\\u{HEX}`` → the code point HEX.
    """
    if "\\" not in line:
        return line

    def one(match: re.Match[str]) -> str:
        code, char = match.groups()
        if code is None:
            return char
        value = int(code, 16)
        return chr(value) if value <= 0x10FFFF else match.group()

    return _ESCAPE.sub(one, line)


def _needs_guard(line: str, *, first: bool) -> bool:
    """True when a dialogue line could be read as anything but dialogue."""
    if line.strip() == "":  # whitespace only (an empty line is written as two spaces)
        return True
    if line[0] in _GUARDED_STARTS or _HEADING.match(line) or _FORCED_HEADING.match(line):
        return True
    if line.upper() == line and any(c.isalpha() for c in line):
        return True  # a cue, a transition ("CUT TO:"), "THE END.", "FADE IN:"
    return first and line.startswith("Forwarding to ")


def dialogue_lines(text: str, *, mention: str | None = None) -> list[str]:
    """The lines of a dialogue block for ``text`` (at least one line; the cue not included).

    ``mention`` is the model a user's turn was routed to: a first line that opens with
    ``@<mention>`` is Harvey's routing command (docs/specs.md, The Harvey audit trail: W4) and is
    written as typed.
    """
    lines = []
    for index, raw in enumerate(text.split("\n")):
        if raw == "":
            lines.append(BLANK_IN_DIALOGUE)
            continue
        line = escape_inline(raw)
        guard = _needs_guard(line, first=index == 0)
        if guard and index == 0 and mention and _is_mention(line, mention):
            guard = False
        lines.append("\\" + line if guard else line)
    return lines


def _is_mention(line: str, model: str) -> bool:
    head = line[1 : len(model) + 1]
    rest = line[len(model) + 1 :]
    return head.lower() == model.lower() and (rest == "" or rest.startswith(" "))


def text_from_dialogue(lines: list[str]) -> str:
    """The text of a dialogue block written by :func:`dialogue_lines`."""
    return "\n".join("" if line == BLANK_IN_DIALOGUE else unescape(line) for line in lines)


def is_plain_cue(name: str) -> bool:
    """True when ``name`` can be a character cue as it is (upper case, no punctuation that a
    parser reads as an extension, a dual-dialogue caret or a heading)."""
    return bool(_PLAIN_CUE.fullmatch(name)) and not _HEADING.match(name) and name.strip() == name
