"""A Rich table printed a chunk of rows at a time: memory and time linear in the rows, output
from the first chunk on.

Rich lays a :class:`rich.table.Table` out from all its cells at once: it holds every row and
every rendered line until the last is measured, which for a long session (100,000 rows) costs
gigabytes and minutes before anything is printed. :func:`print_table` measures the columns
that size to their content in a first pass over the rows (widths only: no row is kept), then
prints the rows in chunks whose columns are fixed to those widths, each chunk without the
edges that join it to its neighbours. The lines are those of the whole table printed at once
(``tests/views/test_table.py`` checks that against Rich itself).

Without colour (a file or a pipe: Rich writes plain text), laying a row out through Rich's
renderables costs about a millisecond, most of the time of ``agenttrail show``; the rows are
then laid out here, as Rich lays them out (its word division, ``rich._wrap.divide_line``, and
its rules for cropping, ellipsis and padding), and the header and edges come from Rich.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence

from rich.cells import cell_len, chop_cells, get_character_cell_size, set_cell_size
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

__all__ = ["CHUNK_ROWS", "print_table"]

CHUNK_ROWS = 200
"""Rows laid out and printed together: enough that Rich's per-table cost is spread thin."""


def print_table(
    console: Console,
    template: Table,
    rows: Callable[[], Iterable[Sequence[RenderableType]]],
    *,
    chunk_rows: int = CHUNK_ROWS,
) -> None:
    """Print ``template``'s columns with the rows ``rows()`` yields, a chunk at a time.

    Args:
        console: where to print (its width is the table's, as for ``console.print``).
        template: a table with its columns and settings and no rows; a column with a
            ``ratio`` takes the width left (``expand=True``), the others are measured.
        rows: called twice, yielding the same rows each time: once to measure, once to print.
        chunk_rows: rows laid out per chunk.
    """
    widths = _measured_widths(console, template, rows())
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


def _measured_widths(
    console: Console, template: Table, rows: Iterable[Sequence[RenderableType]]
) -> list[int | None]:
    """The content width of each column without a ratio (``None`` for those with one), as
    Rich measures it: the widest of the header and every cell, clamped to the column's
    ``min_width`` and ``max_width``."""
    options = console.options.update_width(console.width - template._extra_width)
    measured = [c.ratio is None and c.width is None for c in template.columns]
    widest = [
        Measurement.get(console, options, c.header).maximum if template.show_header else 0
        for c in template.columns
    ]
    for row in rows:
        for i, cell in enumerate(row):
            if not measured[i]:
                continue
            if isinstance(cell, Text):  # Text.__rich_measure__'s maximum, without its minimum
                lines = cell.plain.splitlines()
                width = min(max(map(_cells, lines), default=0), options.max_width)
            else:
                width = Measurement.get(console, options, cell).maximum
            if width > widest[i]:
                widest[i] = width
    widths: list[int | None] = []
    for column, is_measured, width in zip(template.columns, measured, widest, strict=True):
        if not is_measured:
            widths.append(column.width)
            continue
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
    for row in rows():
        cells = [
            _cell_lines(console, cell, column, width)
            for (column, width, _, _), cell in zip(layout, row, strict=True)
        ]
        height = max(len(lines) for lines in cells)
        for n in range(height):
            parts = [
                lpad + (lines[n] if n < len(lines) else " " * width) + rpad
                for (_, width, lpad, rpad), lines in zip(layout, cells, strict=True)
            ]
            write(box.mid_left + box.mid_vertical.join(parts) + box.mid_right + "\n")
    write(bottom + "\n")
    return True


def _pad(table: Table, index: int, side: int, last: int) -> int:
    """Padding cells left (``side`` 0) or right (1) of column ``index``."""
    if not table.pad_edge and index == (0 if side == 0 else last):
        return 0
    return table.padding[3] if side == 0 else table.padding[1]


_TRAILING_SPACE = re.compile(r"\s+$")


_WORD = re.compile(r"\s*\S+\s*")


def _divide(line: str, width: int, *, fold: bool) -> list[int]:
    """``rich._wrap.divide_line``: the offsets to break ``line`` at so that each piece fits
    ``width`` cells, a word longer than a line folded (``fold``) or left to be cropped; a
    word of printable ASCII is measured and chopped without Rich's per-character tables."""
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(line):
        start, word = match.start(), match.group()
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


def _chop(word: str, width: int) -> list[str]:
    """``rich.cells.chop_cells``: ``word`` in pieces of ``width`` cells; by slicing when
    every character is one cell (Rich splits it into graphemes, a millisecond a line)."""
    if (word.isascii() and word.isprintable()) or all(
        get_character_cell_size(c) == 1 for c in set(word)
    ):
        return [word[at : at + width] for at in range(0, len(word), width)]
    return chop_cells(word, width)


def _cells(text: str) -> int:
    """Terminal cells ``text`` takes (``rich.cells.cell_len``; printable ASCII is one each)."""
    return len(text) if text.isascii() and text.isprintable() else cell_len(text)


def _cell_lines(console: Console, cell: RenderableType, column: Column, width: int) -> list[str]:
    """A cell as lines of exactly ``width`` cells, as Rich lays a ``Text`` out in a column
    (``Text.wrap`` then ``Lines.justify``)."""
    if isinstance(cell, str):
        cell = console.render_str(cell)
    if not isinstance(cell, Text) or "\t" in cell.plain:
        return _rendered_lines(console, cell, column, width)
    overflow = cell.overflow or column.overflow or "fold"
    no_wrap = cell.no_wrap or column.no_wrap
    justify = cell.justify or column.justify
    if justify not in ("left", "right", "default"):
        return _rendered_lines(console, cell, column, width)
    out: list[str] = []
    for line in cell.plain.split("\n"):
        if no_wrap or (line.isascii() and line.isprintable() and len(line) <= width):
            pieces = [line]  # it fits: divide_line would not break it
        else:
            pieces = []
            breaks = _divide(line, width, fold=overflow == "fold")
            for start, end in zip([0, *breaks], [*breaks, len(line)], strict=True):
                piece = line[start:end]
                if len(piece) > width:  # Text.rstrip_end: trailing space past the width goes
                    tail = _TRAILING_SPACE.search(piece)
                    if tail is not None:
                        piece = piece[: len(piece) - min(len(tail.group()), len(piece) - width)]
                pieces.append(piece)
        for piece in pieces:
            if justify == "right":
                piece = piece.rstrip()
            length = _cells(piece)
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


def _rendered_lines(
    console: Console, cell: RenderableType, column: Column, width: int
) -> list[str]:
    """A cell laid out by Rich itself (tabs, centring, renderables other than text)."""
    options = console.options.update(
        width=width, justify=column.justify, no_wrap=column.no_wrap, overflow=column.overflow
    )
    lines = console.render_lines(cell, options, pad=True)
    return ["".join(segment.text for segment in line) for line in lines]
