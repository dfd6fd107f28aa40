"""A Rich table printed a chunk of rows at a time: memory and time linear in the rows, output
from the first chunk on.

Rich lays a :class:`rich.table.Table` out from all its cells at once: it holds every row and
every rendered line until the last is measured, which for a long session (100,000 rows) costs
gigabytes and minutes before anything is printed. :func:`print_table` measures the columns
that size to their content in a first pass over the rows (widths only: no row is kept), or
takes their widest cells from a caller that knows them without building the rows (``show``
measures them as it first reads the session), then prints the rows in chunks whose columns
are fixed to those widths, each chunk without the edges that join it to its neighbours. The
lines are those of the whole table printed at once (``tests/views/test_table.py`` checks
that against Rich itself).

Without colour (a file or a pipe: Rich writes plain text), laying a row out through Rich's
renderables costs about a millisecond, most of the time of ``agenttrail show``; the rows are
then laid out here, as Rich lays them out (its word division, ``rich._wrap.divide_line``, and
its rules for cropping, ellipsis and padding), and the header and edges come from Rich. A
cell given as :class:`StyledText` is then read as its plain text alone: the Rich ``Text`` it
stands for is built only to print in colour.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from functools import cache

from rich.cells import cell_len, chop_cells, get_character_cell_size, set_cell_size
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

__all__ = ["CHUNK_ROWS", "StyledText", "cell_width", "print_table"]

CHUNK_ROWS = 200
"""Rows laid out and printed together: enough that Rich's per-table cost is spread thin."""


class StyledText:
    """Text kept as the calls that would build a Rich :class:`~rich.text.Text`: a first
    string in a base style, then strings appended each in its style. :func:`print_table`
    lays it out from :attr:`plain` alone when there is no colour, and builds the ``Text``
    (:meth:`__rich__`) only to draw it in colour: a ``Text`` costs microseconds a string,
    Rich stripping control codes from each again.

    The strings must hold none of the control codes Rich strips (BEL, BS, VT, FF, CR), or
    :attr:`plain` would keep what the ``Text`` drops: text from the log passes
    :func:`agenttrail.views.safe.safe`, which escapes them.
    """

    __slots__ = ("_runs", "plain", "style")

    def __init__(self, text: str = "", style: str = "") -> None:
        self.style = style
        """The base style, under every string (``Text(text, style=style)``)."""
        self.plain = text
        """The text without styles (kept as it grows: a cell has a few strings, and the
        layout reads it once a row)."""
        self._runs: list[tuple[str, str]] | None = None
        """Each string and its style, once a second is appended (a row's seq, time, actor and
        event cells never have one)."""

    def append(self, text: str, style: str = "") -> None:
        """Add ``text`` in ``style`` (``Text.append``, which adds nothing for ``""``)."""
        if text:
            if self._runs is None:
                self._runs = [(self.plain, "")]
            self._runs.append((text, style))
            self.plain += text

    def __rich__(self) -> Text:
        runs = self._runs or [(self.plain, "")]
        text = Text(runs[0][0], style=self.style)
        for run, style in runs[1:]:
            text.append(run, style=style)
        return text


def print_table(
    console: Console,
    template: Table,
    rows: Callable[[], Iterable[Sequence[RenderableType]]],
    *,
    widest: Sequence[int] | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> None:
    """Print ``template``'s columns with the rows ``rows()`` yields, a chunk at a time.

    Args:
        console: where to print (its width is the table's, as for ``console.print``).
        template: a table with its columns and settings and no rows; a column with a
            ``ratio`` takes the width left (``expand=True``), the others are measured.
        rows: yields the rows; called twice, yielding the same rows each time (once to
            measure, once to print), unless ``widest`` is given.
        widest: the widest cell of each column, in cells (:func:`cell_width`; any value
            for a column with a ratio or a width), when the caller knows them without
            building the rows: then ``rows`` is called once.
        chunk_rows: rows laid out per chunk.
    """
    if widest is None:
        widest = _widest_cells(console, template, rows())
    widths = _measured_widths(console, template, widest)
    if _plain(console, template) and _print_plain(console, _fixed(template, widths, True), rows):
        return
    chunk: list[Sequence[RenderableType]] = []
    first = True
    for row in rows():
        chunk.append(row)
        if len(chunk) == chunk_rows:
            _print_chunk(console, _fixed(template, widths, first), chunk, first, last=False)
            chunk, first = [], False
    _print_chunk(console, _fixed(template, widths, first), chunk, first, last=True)


def cell_width(text: str) -> int:
    """The width Rich measures a ``Text`` of ``text`` at, in cells: its widest line
    (``Text.__rich_measure__``'s maximum)."""
    if _one_cell_each(text):
        return len(text)
    return max(map(_cells, text.splitlines()), default=0)


def _widest_cells(
    console: Console, template: Table, rows: Iterable[Sequence[RenderableType]]
) -> list[int]:
    """The widest cell of each column without a ratio or a width (0 for the others), as
    Rich measures a cell (:func:`cell_width` for text)."""
    options = console.options.update_width(console.width - template._extra_width)
    measured = [c.ratio is None and c.width is None for c in template.columns]
    widest = [0] * len(template.columns)
    for row in rows:
        for i, cell in enumerate(row):
            if not measured[i]:
                continue
            if isinstance(cell, Text | StyledText):
                width = cell_width(cell.plain)
            else:
                width = Measurement.get(console, options, cell).maximum
            if width > widest[i]:
                widest[i] = width
    return widest


def _measured_widths(console: Console, template: Table, widest: Sequence[int]) -> list[int | None]:
    """The content width of each column without a ratio (``None`` for those with one), as
    Rich measures it: the widest of the header and the ``widest`` cell (no wider than the
    table's room), clamped to the column's ``min_width`` and ``max_width``."""
    options = console.options.update_width(console.width - template._extra_width)
    widths: list[int | None] = []
    for column, cells in zip(template.columns, widest, strict=True):
        if column.ratio is not None or column.width is not None:
            widths.append(column.width)
            continue
        header = Measurement.get(console, options, column.header) if template.show_header else None
        width = max(0 if header is None else header.maximum, min(cells, options.max_width))
        if column.max_width is not None:
            width = min(width, column.max_width)
        if column.min_width is not None:
            width = max(width, column.min_width)
        widths.append(width)
    return widths


def _fixed(template: Table, widths: list[int | None], with_header: bool) -> Table:
    table = copy.copy(template)
    table.columns = [
        dataclasses.replace(column, width=width, _cells=[])
        for column, width in zip(template.columns, widths, strict=True)
    ]
    table.rows = []
    table.show_header = template.show_header and with_header
    return table


def _print_chunk(
    console: Console,
    table: Table,
    chunk: list[Sequence[RenderableType]],
    first: bool,
    *,
    last: bool,
) -> None:
    """Print ``chunk`` in ``table``: the top edge on the first chunk only, the bottom edge
    on the last only."""
    if not chunk and not first:
        if last and table.show_edge and table.box is not None:
            _print_lines(console, table, first=False, last=True)
        return
    for row in chunk:
        table.add_row(*row)
    _print_lines(console, table, first=first, last=last)


def _print_lines(console: Console, table: Table, *, first: bool, last: bool) -> None:
    with console.capture() as capture:
        console.print(table)
    lines = capture.get().split("\n")[:-1]  # the text ends with a newline
    edges = table.show_edge and table.box is not None
    if edges and not first:
        lines = lines[1:]
    if edges and not last:
        lines = lines[:-1]
    if lines:
        console.file.write("\n".join(lines) + "\n")


def _plain(console: Console, template: Table) -> bool:
    """Whether the rows can be laid out here: no colour, and a table drawn the way
    :func:`_print_plain` draws (edges, one line of padding each side, no lines between rows,
    one column sharing the width left)."""
    top, right, bottom, left = template.padding
    return (
        console.color_system is None
        and template.box is not None
        and template.show_edge
        and not template.show_lines
        and not template.row_styles
        and (top, bottom, right, left) == (0, 0, 1, 1)
        and sum(c.ratio is not None for c in template.columns) == 1
        and all(c.vertical == "top" for c in template.columns)
    )


def _print_plain(
    console: Console, table: Table, rows: Callable[[], Iterable[Sequence[RenderableType]]]
) -> bool:
    """Print the table laid out here; ``False`` (nothing printed) when a column is left no
    room for text (a console narrower than the table), which Rich lays out its own way."""
    with console.capture() as capture:
        console.print(table)  # no rows: top edge, header, its rule; then the bottom edge
    frame = capture.get().split("\n")[:-1]
    box = table.box
    assert box is not None  # _plain checked
    # the column widths Rich chose, padding included, read off the top edge
    spans = [len(cells) for cells in frame[0][1:-1].split(box.top_divider)]
    last = len(table.columns) - 1
    layout = [
        (
            column,
            span - _pad(table, i, 0, last) - _pad(table, i, 1, last),
            " " * _pad(table, i, 0, last),
            " " * _pad(table, i, 1, last),
        )
        for i, (column, span) in enumerate(zip(table.columns, spans, strict=True))
    ]
    if any(width < 1 for _, width, _, _ in layout):
        return False
    head, bottom = frame[:-1], frame[-1]
    write = console.file.write
    write("\n".join(head if table.show_header else head[:1]) + "\n")
    # a line: the left edge and padding, the cells each padded to its width and joined by
    # the padding either side of a divider (the same between any two), the right edge
    start = box.mid_left + layout[0][2]
    between = " " * table.padding[1] + box.mid_vertical + " " * table.padding[3]
    end = layout[-1][3] + box.mid_right + "\n"
    # a StyledText of one line of one-cell characters that fits (most cells but the text
    # column's: `4→7` too) is padded to its width here; any other cell is laid out by
    # _cell_lines
    columns = [
        (column, width, column.justify in ("left", "default"), column.justify == "right")
        for column, width, _, _ in layout
    ]
    # a line whose cells but the last are blank, up to the last's text
    below = start + between.join([" " * width for _, width, _, _ in layout[:-1]] + [""])
    text: list[str] = []  # written a chunk of rows at a time
    for row in rows():
        firsts: list[str] = []  # each cell's first line
        rest: list[str] = []  # the last cell's other lines
        for (column, width, left, right), cell in zip(columns, row, strict=True):
            if type(cell) is StyledText:
                plain = cell.plain
                if (
                    (left or right)
                    and len(plain) <= width
                    and plain.isprintable()
                    and (plain.isascii() or _one_cell_each(plain))
                ):
                    firsts.append(plain.rstrip().rjust(width) if right else plain.ljust(width))
                    continue
                lines = _cell_lines(console, cell, column, width, plain)
            else:
                lines = _cell_lines(console, cell, column, width)
            if len(lines) > 1:
                if len(firsts) < len(columns) - 1:  # a cell before the last goes on too
                    text += _tall_row(console, row, columns, start, between, end)
                    break
                rest = lines[1:]
            firsts.append(lines[0])
        else:
            text.append(start + between.join(firsts) + end)
            if rest:
                text.append(below + (end + below).join(rest) + end)
        if len(text) >= CHUNK_ROWS:
            write("".join(text))
            text.clear()
    write("".join(text) + bottom + "\n")
    return True


def _tall_row(
    console: Console,
    row: Sequence[RenderableType],
    columns: list[tuple[Column, int, bool, bool]],
    start: str,
    between: str,
    end: str,
) -> list[str]:
    """The lines of a row in which a cell before the last takes more than one line: each
    cell laid out, the shorter ones padded with blank lines to the tallest."""
    cells = [
        _cell_lines(console, cell, column, width)
        for (column, width, _, _), cell in zip(columns, row, strict=True)
    ]
    height = max(map(len, cells))
    for (_, width, _, _), lines in zip(columns, cells, strict=True):
        lines += [" " * width] * (height - len(lines))
    return [start + between.join(parts) + end for parts in zip(*cells, strict=True)]


def _pad(table: Table, index: int, side: int, last: int) -> int:
    """Padding cells left (``side`` 0) or right (1) of column ``index``."""
    if not table.pad_edge and index == (0 if side == 0 else last):
        return 0
    return table.padding[3] if side == 0 else table.padding[1]


_TRAILING_SPACE = re.compile(r"\s+$")


_WORD = re.compile(r"\s*\S+\s*")

_SPACE = re.compile(r"\s")


def _divide(line: str, width: int, *, fold: bool) -> list[int]:
    """``rich._wrap.divide_line``: the offsets to break ``line`` at so that each piece fits
    ``width`` cells, a word longer than a line folded (``fold``) or left to be cropped; a
    word is measured and chopped by :func:`_cells` and :func:`_chop`, without Rich's
    per-character tables where each of its characters takes one cell."""
    breaks: list[int] = []
    offset = 0
    end = 0  # the words tile the line: each starts where the one before it ends
    for word in _WORD.findall(line):
        start, end = end, end + len(word)
        length = _cells(word.rstrip())
        if width - offset >= length:
            offset += _cells(word)
        elif length > width:
            if fold:
                pieces = _chop(word, width)
                for piece in pieces[:-1]:
                    if start:
                        breaks.append(start)
                    start += len(piece)
                if start:
                    breaks.append(start)
                offset = _cells(pieces[-1])
            else:
                if start:
                    breaks.append(start)
                offset = _cells(word)
        elif offset and start:
            breaks.append(start)
            offset = _cells(word)
    return breaks


def _divide_one_cell(line: str, width: int, *, fold: bool) -> list[int]:
    """:func:`_divide` of a line whose characters each take one cell, a line of the result
    at a time: the longest stretch from a line's start that ends a word within ``width``
    (one regex match in C) instead of a step per word. A line ends after the last word
    whose text (without the space after it) fits; the next starts at the next word. A
    word longer than a line is folded into pieces of ``width`` (``fold``; the last piece
    is a line's start, the words that fit after it on that line), or left whole on a line
    of its own. ``tests/views/test_table.py`` holds it to Rich's ``divide_line``."""
    breaks: list[int] = []
    fits = _fits(width)
    start = 0
    while True:
        found = fits.match(line, start)
        if found is not None:
            end = found.end()  # the last word that fits ends here
        else:
            word = _NONSPACE.search(line, start)
            if word is None:
                return breaks  # only space is left
            if start and word.start() > start:
                end = start  # a folded word's last piece is space: the next word goes on
            else:
                end = _WORD.match(line, start).end()  # type: ignore[union-attr]
                if fold:  # a word longer than a line: its pieces, the last one going on
                    last = start + (end - start - 1) // width * width
                    breaks += range(start + width, last + 1, width)
                    start = last
                    continue
        following = _NONSPACE.search(line, end)
        if following is None:
            return breaks
        start = following.start()
        breaks.append(start)


@cache
def _fits(width: int) -> re.Pattern[str]:
    """The longest text of at most ``width`` characters that ends a word (its last
    character is not space, and space or the line's end follows)."""
    return re.compile(rf"(?s).{{0,{width - 1}}}\S(?=\s|\Z)")


_NONSPACE = re.compile(r"\S")


def _chop(word: str, width: int) -> list[str]:
    """``rich.cells.chop_cells``: ``word`` in pieces of ``width`` cells; by slicing when
    every character is one cell (Rich splits it into graphemes, a millisecond a line)."""
    if _one_cell_each(word):
        return [word[at : at + width] for at in range(0, len(word), width)]
    return chop_cells(word, width)


def _cells(text: str) -> int:
    """Terminal cells ``text`` takes (``rich.cells.cell_len``)."""
    return len(text) if _one_cell_each(text) else cell_len(text)


_PRINTABLE_ASCII = frozenset(map(chr, range(0x20, 0x7F)))

_JOINERS = frozenset("\u200d\ufe0f")
"""The zero width joiner and variation selector 16, which change the width of what they
join (``rich.cells.cell_len``)."""


def _one_cell_each(text: str) -> bool:
    """Whether every character of ``text`` takes one cell, so that its cells are its length
    (Rich's ``get_character_cell_size`` of each other than printable ASCII: ``—``, ``…``
    and the like are one cell, but Rich measures them a character at a time)."""
    global _NOT_ONE_CELL
    if text.isascii():
        return text.isprintable()
    if _NOT_ONE_CELL.search(text) is None:
        return True
    chars = set(text) - _ONE_CELL
    if all(c not in _JOINERS and get_character_cell_size(c) == 1 for c in chars):
        _ONE_CELL.update(chars)
        _NOT_ONE_CELL = _other_than(_ONE_CELL)
        return True
    return False


def _other_than(chars: set[str]) -> re.Pattern[str]:
    """A pattern that finds a character not in ``chars``."""
    return re.compile(f"[^{''.join(map(re.escape, sorted(chars)))}]")


_ONE_CELL = set(_PRINTABLE_ASCII)
"""Characters found to take one cell so far (:func:`_one_cell_each`): a session's text uses
a few, each then measured once, not once a line."""

_NOT_ONE_CELL = _other_than(_ONE_CELL)
"""Finds a character not in :data:`_ONE_CELL` (a search in C, where a set of each line's
characters cost a microsecond)."""


def _cell_lines(
    console: Console,
    cell: RenderableType,
    column: Column,
    width: int,
    plain: str | None = None,
) -> list[str]:
    """A cell as lines of exactly ``width`` cells, as Rich lays a ``Text`` out in a column
    (``Text.wrap`` then ``Lines.justify``); ``plain``: a :class:`StyledText` cell's plain
    text, when the caller has it already."""
    if type(cell) is StyledText:
        plain, overflow = cell.plain if plain is None else plain, column.overflow
        no_wrap, justify = column.no_wrap, column.justify
        if justify != "right" and len(plain) <= width and plain.isascii() and plain.isprintable():
            return [plain.ljust(width)]  # one line of one-cell characters that fits
    else:
        if isinstance(cell, str):
            cell = console.render_str(cell)
        if not isinstance(cell, Text):
            return _rendered_lines(console, cell, column, width)
        plain, overflow = cell.plain, cell.overflow or column.overflow
        no_wrap, justify = cell.no_wrap or column.no_wrap, cell.justify or column.justify
    if "\t" in plain or justify not in ("left", "right", "default"):
        return _rendered_lines(console, cell, column, width)
    overflow = overflow or "fold"
    out: list[str] = []
    for line in plain.split("\n"):
        simple = _one_cell_each(line)
        if simple and justify != "right" and len(line) <= width:
            out.append(line.ljust(width))  # it fits: divide_line would not break it
            continue
        cells = len if simple else _cells
        if no_wrap or (simple and len(line) <= width):
            pieces = [line]  # it fits: divide_line would not break it
        elif simple and overflow == "fold" and " " not in line and _SPACE.search(line) is None:
            # one word; `in` finds a space far faster than \s's search (6 ns a character)
            pieces = [line[at : at + width] for at in range(0, len(line), width)]
        else:
            divide = _divide_one_cell if simple else _divide
            breaks = divide(line, width, fold=overflow == "fold")
            ends = [*breaks, len(line)]
            pieces = [line[start:end] for start, end in zip([0, *breaks], ends, strict=True)]
            if max(map(len, pieces)) > width:
                pieces = [_rstrip_end(piece, width) for piece in pieces]
        if simple and justify != "right" and max(map(len, pieces)) <= width:
            out += [piece.ljust(width) for piece in pieces]
            continue
        for piece in pieces:
            if justify == "right":
                piece = piece.rstrip()
            length = cells(piece)
            if length > width:
                if overflow == "ellipsis":
                    piece = set_cell_size(piece, width - 1) + "…"
                else:
                    piece = set_cell_size(piece, width)
                length = width
            space = " " * (width - length)
            if justify == "right":
                out.append(space + piece)
            else:
                out.append(piece + space)
    return out


def _rstrip_end(piece: str, width: int) -> str:
    """``Text.rstrip_end``: the trailing space of a piece longer than ``width`` characters
    goes, down to ``width``."""
    if len(piece) > width and (tail := _TRAILING_SPACE.search(piece)) is not None:
        return piece[: len(piece) - min(len(tail.group()), len(piece) - width)]
    return piece


def _rendered_lines(
    console: Console, cell: RenderableType, column: Column, width: int
) -> list[str]:
    """A cell laid out by Rich itself (tabs, centring, renderables other than text)."""
    options = console.options.update(
        width=width, justify=column.justify, no_wrap=column.no_wrap, overflow=column.overflow
    )
    lines = console.render_lines(cell, options, pad=True)
    return ["".join(segment.text for segment in line) for line in lines]
