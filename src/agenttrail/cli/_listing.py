"""How list commands print: a table on a terminal, tab-separated lines in a pipe or a file,
JSON Lines with ``--json``.

On a terminal a list is a borderless table (``docker ps``, ``kubectl get``: columns two
spaces apart, no box), so that at 80 columns the columns that matter keep their room. When
stdout is not a terminal (Rich's ``Console.is_terminal``: ``isatty()``, overridden by
``TTY_COMPATIBLE`` or ``FORCE_COLOR``) a list is one line per row, its fields separated by
tabs, no header (as ``gh`` prints in a pipe), each field whole: ``cut -f1`` gives the ids, ``awk
-F'\\t'`` the rest. A tab, newline or other control character in a field is shown as a visible
escape (``\\t``, ``\\n``, ``\\x1b``) so that a row stays one line of its fields.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any

from agenttrail.cli._common import out

__all__ = [
    "ID_PREFIX",
    "is_terminal",
    "list_table",
    "print_json_lines",
    "print_tsv",
    "tsv_field",
    "unique_prefix",
]


def is_terminal() -> bool:
    """Whether stdout is a terminal (a table) or a pipe or file (tab-separated lines)."""
    return out.is_terminal


def list_table(**settings: Any) -> Any:
    """A borderless :class:`rich.table.Table` for a list: a bold header, columns two spaces
    apart, the width of the terminal (``settings`` go to the table, a caption for one)."""
    from rich.table import Table

    return Table(
        box=None, pad_edge=False, expand=True, header_style="bold", show_edge=False, **settings
    )


def tsv_field(value: object) -> str:
    """``value`` as one tab-separated field: ``None`` is empty; control and bidi characters
    and lone surrogates become the visible escapes :func:`agenttrail.views.safe.safe` gives
    them (``\\x1b``, ``\\u202e``), tabs and newlines ``\\t`` and ``\\n``."""
    text = "" if value is None else str(value)
    if text.isprintable():  # no control, format or surrogate character: nothing to escape
        return text
    from agenttrail.views.safe import safe

    return safe(text).replace("\t", "\\t").replace("\n", "\\n")


def print_tsv(rows: Iterable[Sequence[object]]) -> None:
    """Print each row as one line of tab-separated fields (:func:`tsv_field`), in one write."""
    sys.stdout.write("".join("\t".join(map(tsv_field, row)) + "\n" for row in rows))


def print_json_lines(records: Iterable[dict[str, Any]]) -> None:
    """Print each record as one line of JSON (:func:`agenttrail.codec.json_line`)."""
    from agenttrail.codec import json_line

    write = sys.stdout.write
    for record in records:
        write(json_line(record) + "\n")


ID_PREFIX = 8
"""Shortest id prefix shown (git's abbreviated hashes start at 7)."""


def unique_prefix(shown: list[str], ids: list[str]) -> int:
    """The shortest length, at least :data:`ID_PREFIX`, at which each of ``shown`` has a
    prefix that no other of ``ids`` starts with (what ``find_session`` resolves): a list on
    a narrow terminal shows ids cut to it."""
    ordered = sorted(set(ids))
    need = ID_PREFIX
    wanted = set(shown)
    for i, sid in enumerate(ordered):
        if sid not in wanted:
            continue
        neighbours = (ordered[i - 1] if i else "", ordered[i + 1] if i + 1 < len(ordered) else "")
        for other in neighbours:
            common = next(
                (n for n, (x, y) in enumerate(zip(sid, other, strict=False)) if x != y), None
            )
            common = min(len(sid), len(other)) if common is None else common
            need = max(need, min(common + 1, len(sid)))
    return need
