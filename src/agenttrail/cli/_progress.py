"""The progress bar of a long import: on a terminal only, never on a pipe or a file.

``agenttrail import`` reads every file before it writes anything, then writes one session per
transaction (an export of one session, read as it is written, shows none); an import of a
few small files ends before a bar could be read, so the bar is shown only for an import
large enough to take more than a moment (:data:`MIN_FILES`, :data:`MIN_BYTES`). It is drawn
on stderr (the session ids go to stdout) and removed when the import ends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from agenttrail.cli._common import err
from agenttrail.ingest.importer import STDIN, ImportReport
from agenttrail.views.safe import safe

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = ["MIN_BYTES", "MIN_FILES", "ImportProgress", "import_progress"]

MIN_FILES = 20
"""Files from which an import shows a bar: a Claude Code projects folder holds hundreds."""

MIN_BYTES = 16 * 1024 * 1024
"""Bytes (16 MiB) from which an import shows a bar however few its files: parsing and
hashing that much takes about a second."""


class ImportProgress:
    """Advances the bar (if any) as files are read and sessions written."""

    def __init__(self, progress: Progress | None, files: int) -> None:
        self._progress = progress
        self._task: TaskID | None = (
            progress.add_task("reading", total=files) if progress is not None else None
        )

    def read(self, path: Path) -> None:
        """One more file read and checked."""
        if self._progress is not None and self._task is not None:
            described = f"reading {safe(path.name)}"
            self._progress.update(self._task, advance=1, description=described)

    def writing(self, sessions: int) -> None:
        """Reading is done; ``sessions`` sessions are to be written."""
        if self._progress is not None and self._task is not None:
            self._progress.reset(self._task, total=sessions, description="writing")

    def written(self, report: ImportReport) -> None:
        """One more session committed."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1)


@contextmanager
def import_progress(paths: list[Path]) -> Iterator[ImportProgress]:
    """An :class:`ImportProgress` for importing ``paths``, drawn when stderr is a terminal and
    the import is large (:data:`MIN_FILES` files or :data:`MIN_BYTES` bytes)."""
    if not (err.is_terminal and _large(paths)):
        yield ImportProgress(None, len(paths))
        return
    # imported only to draw it: 0.015 s of every import's start, in a pipe too
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    # a file's name as it is: no markup ("[bold]"), no emoji code (":smile:"), no ESC
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        yield ImportProgress(progress, len(paths))


def _large(paths: list[Path]) -> bool:
    if len(paths) >= MIN_FILES:
        return True
    total = 0
    for path in paths:
        if path != STDIN:
            try:
                total += os.stat(path).st_size
            except OSError:
                continue  # reading it names what is wrong
    return total >= MIN_BYTES
