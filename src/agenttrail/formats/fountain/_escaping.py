"""Escaping arbitrary text into a Fountain session file: as light as the readers allow.

Three readers must see the structure we mean: a Fountain 1.1 parser (fountain-py,
screenplain), rsdoiel/fountain under Harvey's own ``--continue`` reader, and ours. Harvey's
reader shows every backslash, so a line is escaped only where one of them would otherwise read
another element; everything else is written as it is (rules and reasons in
``docs/fountain-format.md``, Escaping).

- *Inline*: a backslash followed by one of ``\\ [ ] * / - — (`` stands for that character, and
  ``\\u{HEX}`` for the code point HEX; any other backslash is itself. The writer escapes the
  second ``[`` of ``[[`` and ``]`` of ``]]`` (notes), the ``*`` of ``/*`` and ``/`` of ``*/``
  (boneyard), a ``-`` after a space (rsdoiel reads any line holding `` -`` as a scene
  heading), a line-final ``#`` or ``:`` after ``TO``/``IN`` and the dot of ``THE END.``
  (rsdoiel headings and transitions) as code points, and line breaks, control characters,
  bidi controls and lone surrogates as code points.
- *Guard*: a dialogue line that a reader would take as another element (a heading, a forced
  element ``! @ . ( > ~ = #``, ``THE END``, a blank line) gets one leading ``\\``, which the
  reader drops only where the rest of the line is such a line.
- *Blank lines* inside a dialogue are two spaces (Fountain 1.1); a guarded empty line ``\\``
  where two spaces would end the dialogue for rsdoiel: the first line, or before an all-caps
  line (rsdoiel would read it as a new cue).
- *Long lines* are cut below Harvey's 64 KiB line limit; a line ending in a lone ``\\``
  continues on the next.
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "BIDI_CONTROLS",
    "cue_line",
    "dialogue_lines",
    "escape_inline",
    "escape_note",
    "is_plain_cue",
    "text_from_dialogue",
    "unescape",
]

BLANK = "  "
"""How an empty line of a message is written inside its dialogue block (Fountain spec)."""

BLANK_LINES = "(blank: {count})"
"""The parenthetical that counts a message's leading empty lines (``(blank: 1)`` alone is an
empty message)."""
_BLANK_OPEN = "(blank: "

LINE_CHARS = 8000
"""Longest run of message characters on one line: a code point escapes to at most 10 bytes,
so a line stays under the 64 KiB that Harvey's line scanner (Go's ``bufio.Scanner``) reads."""

BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
"""Invisible direction controls: they can make a line display in another order than it reads
("Trojan Source", CVE-2021-42574), so they are always written as escapes."""

_CODED = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff"
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
)
"""Characters always written as ``\\u{HEX}`` (with the line feed, outside dialogue): line breaks
(every one ``str.splitlines`` knows),
control characters, lone surrogates and bidi controls."""

_ESCAPED = "\\\\\\[\\]*/\\-—("
"""The characters a backslash escapes (a regex class body): ``\\ [ ] * / - — (``."""

_PAIRS_AND_HEADINGS = r"|(?<= )-|#(?=[^\S\n]*$)|(?<=TO|IN):$|(?<=THE END)\."
"""rsdoiel's headings and transitions: `` -`` anywhere, a final ``#``, ``TO:``/``IN:`` at the
end, ``THE END.`` anywhere. (Notes and boneyards are :func:`_pairs`'s.)"""
_PAIR = re.compile(r"\[{2,}|\]{2,}|/\*")
_ONLY_HIDDEN = re.compile(r"(?:\s*(?:\[\[.*?\]\]|/\*.*?\*/))+\s*")
"""Where a note or a boneyard may open or close."""
_FIRST = rf"(?=[\\\-#:.{_CODED}"
"""A cheap first test (every escape starts with one of these), which makes the search fast."""
_INLINE = re.compile(
    rf"{_FIRST}\n])(?:\\(?=[{_ESCAPED}{_CODED}\n]|u\{{|#?[^\S\n]*$)|[{_CODED}\n]{_PAIRS_AND_HEADINGS})"
)
"""What :func:`escape_inline` escapes in a one-line field."""
_INLINE_LINES = re.compile(
    rf"{_FIRST}])(?:\\(?=[{_ESCAPED}{_CODED}]|u\{{|#?[^\S\n]*$)|[{_CODED}]{_PAIRS_AND_HEADINGS})",
    re.MULTILINE,
)
"""The same, line by line over a whole message whose line feeds stay line feeds."""
_IN_NOTE = re.compile(
    rf"(?=[\\\[\]{_CODED}\n])(?:\\(?=[{_ESCAPED}{_CODED}\n]|u\{{|$)|[{_CODED}\n]|(?<=\[)\[|(?<=\])\])"
)
"""What :func:`escape_note` escapes: only what would end the note or the line."""
_INLINE_CUE = re.compile(rf"{_INLINE.pattern}|\(")
"""In a forced cue, ``(`` too (it would open an extension)."""
_IN_NOTE_FIELD = re.compile(rf"{_IN_NOTE.pattern}|[—(]")
"""In a field of a note we write, ``—`` (separates the fields) and ``(`` (opens arguments)."""
_ESCAPE = re.compile(rf"\\u\{{([0-9a-fA-F]{{1,6}})\}}|\\([{_ESCAPED}])")

_GUARDED_STARTS = frozenset("!@(>~=#")
_MAY_NEED_GUARD = re.compile(
    r"^(?:[^\S\n]*(?:[!@(>~=#]|(?i:INT|EXT|I/E|EST[.\s]|FADE TO|\.[A-Za-z0-9]))"
    r"|[^\S\n]*(?:THE END|LA FIN\.?)[^\S\n]*$|[^\S\n]+$|\\)",
    re.MULTILINE | re.IGNORECASE,
)
"""Some line of a message may need a guard (a cheap test over the whole message first)."""
_HEADING_START = re.compile(r"(?:INT|EXT|I/E|EST[.\s]|FADE TO|\.[A-Za-z0-9])", re.IGNORECASE)
"""Scene headings for rsdoiel (``INT``, ``EXT``, ``I/E`` with no word boundary) and Fountain 1.1
(``EST``; a forced ``.heading``: a dot before a letter or digit, so ``./run`` and ``...`` are
text, as the seed's shell output ``./harvey.go:42:5: …`` is)."""
_CUE_LIKE = re.compile(r"(?=[A-Z0-9\s_.'#-]*[A-Z])[A-Z0-9][A-Z0-9\s_.'#-]*(?:\(.*\))?\s*\^*")
"""A line fountain-py reads as a cue (ASCII capitals, its extension, its caret): as the first
of several dialogue lines, it makes fountain-py demote the cue above it to action."""
_ENDINGS = frozenset(("THE END", "LA FIN", "LA FIN."))
_PLAIN_CUE = re.compile(r"(?=[A-Z0-9 _.'-]*[A-Z])[A-Z0-9][A-Z0-9 _.'-]*")
_NOT_CUE = re.compile(r"--| -|#$|ANGLE$|SHOT$|P\.O\.V\.$|TO:$|IN:$|THE END|^(?:INT|EXT|I/E|EST)")


def _one(match: re.Match[str]) -> str:
    char = match.group()
    if char in "\\[]*/-" or char in "—(":
        return "\\" + char
    return f"\\u{{{ord(char):x}}}"


def escape_inline(text: str) -> str:
    """Escape ``text`` so it fits on one line and opens no note, boneyard, heading or escape.

    Args:
        text: any string (lone surrogates included).

    Returns:
        One line of text; :func:`unescape` gives back ``text`` exactly.
    """
    escaped = _INLINE.sub(_one, text) if _INLINE.search(text) else text
    return _pairs(escaped) if _PAIR.search(escaped) else escaped


def _pairs(line: str, *, first: bool = False) -> str:
    """Escape the ``[[``, ``]]`` and ``/*`` of a line that would open a note or a boneyard
    beyond the line, or close one it did not open. A note or boneyard that opens and closes
    on the line stays as it is: it hides nothing but itself, and Harvey's reader would show
    the escape."""
    if not first and _ONLY_HIDDEN.fullmatch(line):
        # Nothing but notes and boneyards: kept, they would leave an empty line (the end of
        # a dialogue) to a Fountain parser. (A first line is kept, after a parenthetical.)
        return _PAIR.sub(lambda m: m.group()[0] + "".join("\\" + c for c in m.group()[1:]), line)
    out: list[str] = []
    position, note = 0, False
    for match in _PAIR.finditer(line):
        token = match.group()
        if token == "[[":
            # At the start of a line rsdoiel reads a note wherever it closes: never kept.
            at_start = line[: match.start()].strip() == ""
            keep = not note and not at_start and line.find("]]", match.end()) >= 0
            note = note or keep
        elif token == "]]":
            keep, note = note, False
        elif token == "/*":
            keep = line.find("*/", match.end()) >= 0
        else:  # "[[[", "]]]": every bracket after the first escaped
            keep = False
        out.append(line[position : match.start()])
        out.append(token if keep else token[0] + "".join("\\" + c for c in token[1:]))
        position = match.end()
    out.append(line[position:])
    return "".join(out)


def escape_note(text: str, *, field: bool = False) -> str:
    """Escape the text of a note: only ``[[``, ``]]``, line breaks and a backslash that would
    start an escape (a note's `` -`` or ``#`` is no heading to any reader), so that a note
    kept as it was written (Harvey's ``[[model switch: …]]``, ``[[write: PATH — ok]]``) reads
    back, to Harvey's parsers too, as written.

    ``field``: the text is one field of a note we write, where ``—`` separates the fields and
    ``(`` opens a tool's arguments; both are escaped too.
    """
    pattern = _IN_NOTE_FIELD if field else _IN_NOTE
    return pattern.sub(_one, text) if pattern.search(text) else text


def _decode(match: re.Match[str]) -> str:
    code, char = match.groups()
    if code is None:
        return str(char)
    value = int(code, 16)
    return chr(value) if value <= 0x10FFFF else match.group()


def unescape(line: str) -> str:
    """Undo :func:`escape_inline`: ``\\c`` → ``c`` for the escaped characters, ``\\u{HEX}`` →
    the code point HEX; any other backslash stays."""
    return _ESCAPE.sub(_decode, line) if "\\" in line else line


def _hazard(line: str, *, first: bool, agent: bool) -> bool:
    """True when a reader would take this dialogue line as something other than dialogue."""
    bare = line.strip()
    if not bare:
        return True  # a blank line ends a dialogue
    if bare[0] in _GUARDED_STARTS or _HEADING_START.match(bare) or bare.upper() in _ENDINGS:
        return True
    return first and agent and line.startswith("Forwarding to ")


def _needs_guard(line: str, *, first: bool, agent: bool) -> bool:
    # A line that starts with backslashes before a hazard is guarded too, so that the reader
    # drops a guard exactly where the writer put one.
    return _hazard(line.lstrip("\\"), first=first, agent=agent) and (
        line[:1] == "\\" or _hazard(line, first=first, agent=agent)
    )


def _is_caps(line: str) -> bool:
    return line == line.upper() and line != line.lower()


def dialogue_lines(text: str, *, mention: str | None = None, agent: bool = False) -> list[str]:
    """The lines of a dialogue block for ``text`` (at least one line; the cue not included).

    Args:
        text: the message.
        mention: the model a user's turn was routed to: a first line that opens with
            ``@<mention>`` is Harvey's routing command (docs/specs.md, The Harvey audit
            trail: W4) and is written as typed.
        agent: the block is spoken under the agent's cue, where a first line ``Forwarding to
            …`` is Harvey's routing record.
    """
    if text[:1] in ("", "\n"):
        # Leading empty lines are counted in a parenthetical: a blank first line would end the
        # dialogue for every reader, and Harvey's reader takes the first line only.
        rest = text.lstrip("\n")
        count = len(text) - len(rest) + (rest == "")
        after = dialogue_lines(rest, mention=mention, agent=agent) if rest else []
        return [BLANK_LINES.format(count=count), *after]
    if len(text) > LINE_CHARS:
        return _long_dialogue_lines(text, mention=mention, agent=agent)
    if _plain_line(text, agent=agent):
        return [text]
    return _flagged_lines(text, mention=mention, agent=agent)


def _plain_line(text: str, *, agent: bool) -> bool:
    """True for a one-line text (not empty, at most :data:`LINE_CHARS`) that none of
    :func:`_flagged_lines`' tests flags, so that it returns the text as its one line: no
    escape, no note or boneyard (nor, then, a line only of them), no line that may need a
    guard (a one-line text is tested at its start only), no routing record. Most short
    messages are such a line."""
    return (
        "\n" not in text
        and not _INLINE_LINES.search(text)
        and not _PAIR.search(text)
        and not _MAY_NEED_GUARD.match(text)
        and not (agent and text.startswith("Forwarding to "))
    )


def _flagged_lines(text: str, *, mention: str | None, agent: bool) -> list[str]:
    """:func:`dialogue_lines` of a text that is not empty, does not start with a line feed
    and is at most :data:`LINE_CHARS` long."""
    # Most messages need nothing or little: test the whole text once, then touch only what a
    # test found (the same rules as line by line, at a fraction of the cost).
    escaped = _INLINE_LINES.sub(_one, text) if _INLINE_LINES.search(text) else text
    lines = escaped.split("\n")
    if _PAIR.search(escaped):
        lines = [
            _pairs(line, first=i == 0) if _PAIR.search(line) else line
            for i, line in enumerate(lines)
        ]
        escaped = "\n".join(lines)
    suspects = {0} if agent and escaped.startswith("Forwarding to ") else set()
    index, counted = 0, 0
    for match in _MAY_NEED_GUARD.finditer(escaped):
        index += escaped.count("\n", counted, match.start())
        counted = match.start()
        suspects.add(index)
    for index in suspects:
        if lines[index]:
            lines[index] = _guarded(lines[index], index == 0, mention, agent)
    if "" in lines:
        lines = _blank_lines(lines)
    if (len(lines) > 1 and _CUE_LIKE.fullmatch(lines[0].strip())) or _ONLY_HIDDEN.fullmatch(
        lines[0]
    ):
        # fountain-py would take this first line for a rival cue (and the cue above for an
        # action), or hide it whole and end the dialogue: a parenthetical in between keeps the
        # cue a cue, and the line as it is for Harvey's reader.
        lines.insert(0, BLANK_LINES.format(count=0))
    return lines


def _guarded(line: str, first: bool, mention: str | None, agent: bool) -> str:
    if first and mention and _is_mention(line, mention):
        return line
    return "\\" + line if _needs_guard(line, first=first, agent=agent) else line


def _blank_lines(lines: list[str]) -> list[str]:
    """Empty lines as two spaces, or as a guarded empty line ``\\`` first and before an
    all-caps line (rsdoiel reads a line after a blank one as a new cue)."""
    last = len(lines) - 1
    return [
        ("\\" if index < last and _is_caps(lines[index + 1]) else BLANK) if line == "" else line
        for index, line in enumerate(lines)
    ]


def _long_dialogue_lines(text: str, *, mention: str | None, agent: bool) -> list[str]:
    """Line by line, cutting a line longer than :data:`LINE_CHARS` into pieces that each end
    in a continuation backslash but the last."""
    lines: list[str] = []
    for index, content in enumerate(text.split("\n")):
        if content == "":
            lines.append("")
            continue
        pieces = [content[i : i + LINE_CHARS] for i in range(0, len(content), LINE_CHARS)]
        for number, piece in enumerate(pieces):
            line = escape_inline(piece) + ("\\" if number < len(pieces) - 1 else "")
            first = index == 0 and number == 0
            lines.append(_guarded(line, first, mention, agent))
    return _blank_lines(lines)


def _is_mention(line: str, model: str) -> bool:
    head = line[1 : len(model) + 1]
    rest = line[len(model) + 1 :]
    return line[:1] == "@" and head.lower() == model.lower() and (rest == "" or rest[0] == " ")


def text_from_dialogue(lines: list[str], *, agent: bool = False) -> str:
    """The text of a dialogue block written by :func:`dialogue_lines`."""
    count_text = lines[0][len(_BLANK_OPEN) : -1] if lines else ""
    if lines and lines[0].startswith(_BLANK_OPEN) and count_text.isdigit():
        count = int(count_text)
        rest = lines[1:]
        return (
            "\n" * count + text_from_dialogue(rest, agent=agent)
            if rest
            else "\n" * max(count - 1, 0)
        )
    out: list[str] = []
    joined = False
    for index, line in enumerate(lines):
        if line == BLANK:
            text, continues = "", False
        else:
            first = index == 0
            if line[:1] == "\\" and _needs_guard(line[1:], first=first, agent=agent):
                line = line[1:]
            continues = _continues(line)
            text = unescape(line[:-1] if continues else line)
        if joined:
            out[-1] += text
        else:
            out.append(text)
        joined = continues
    return "\n".join(out)


def _continues(line: str) -> bool:
    """True when the line ends in a backslash that starts no escape: the line goes on."""
    if not line.endswith("\\"):
        return False
    end = 0
    for match in _ESCAPE.finditer(line):
        end = match.end()
    return end != len(line)


def is_plain_cue(name: str) -> bool:
    """True when ``name`` is read as a character cue as it is by fountain-py, screenplain and
    rsdoiel/fountain: ASCII upper case, none of the punctuation that a parser reads as an
    extension, a dual-dialogue caret, a heading or a transition. Other names are forced
    (``@name``)."""
    return bool(_PLAIN_CUE.fullmatch(name)) and not _NOT_CUE.search(name) and name.strip() == name


@functools.lru_cache(maxsize=256)
def cue_line(name: str) -> str:
    """A character as a cue line: as it is when every reader takes it as a cue, else forced
    with ``@`` (and written the same way in the headings that name it, so that Harvey's reader
    matches the cue to the heading)."""
    if is_plain_cue(name):
        return name
    forced = _INLINE_CUE.sub(_one, name) if _INLINE_CUE.search(name) else name
    return "@" + (_pairs(forced) if _PAIR.search(forced) else forced)
