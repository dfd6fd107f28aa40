"""The files an import reads: each path named, with a folder walked for the files the formats
read (``agenttrail import FOLDER``, ``agenttrail quickstart``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from agenttrail.errors import InputError
from agenttrail.formats import IMPORT_SUFFIXES
from agenttrail.ingest.importer import STDIN

__all__ = ["expand_paths"]


def expand_paths(paths: Iterable[Path], *, suffixes: Sequence[str] = IMPORT_SUFFIXES) -> list[Path]:
    """The files to import: each path named, with a folder replaced by the files below it.

    A folder is walked whole (Claude Code keeps a project's transcripts in
    ``~/.claude/projects/<project>/``, its subagents' in ``<session>/subagents/``), in name
    order, skipping hidden entries; of its files, those whose name ends in one of ``suffixes``
    (or one of them and ``.gz``) are taken. Any other path is kept as it is (reading a
    missing file names it, :func:`agenttrail.ingest.importer.read_paths`).

    Raises:
        InputError: a folder holds no such file.
    """
    endings = tuple(suffixes) + tuple(f"{s}.gz" for s in suffixes)
    found: list[Path] = []
    for path in paths:
        if path == STDIN or not path.is_dir():
            found.append(path)
            continue
        below = _walk(path, endings)
        if not below:  # a mistyped folder, not a successful import of nothing
            raise InputError(
                f"{path}: no file to import in this folder (looked for {', '.join(suffixes)})"
            )
        found.extend(below)
    return found


def _walk(root: Path, endings: tuple[str, ...]) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(
            Path(folder, name)
            for name in sorted(files)
            if not name.startswith(".") and name.lower().endswith(endings)
        )
    return found
