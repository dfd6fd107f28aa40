"""Outside formats: one module per format, each recognising its own input.

Each format module has ``NAME`` (what ``--format`` takes), ``sniff(path, data) -> bool`` (a
cheap look at the bytes) and ``read(path, data) -> list[ImportedSession]`` (raises
:class:`~agenttrail.errors.FormatError` naming the file, line and field). Formats know events,
not the store: they return payloads, and :mod:`agenttrail.ingest.importer` writes them.

``detect`` asks the formats in turn, most specific first (Inspect's recorder registry shape).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from agenttrail.errors import FormatError
from agenttrail.formats import anthropic, claude_code, fountain, jsonl, openai, toolbench
from agenttrail.formats._common import (
    ImportedSession,
    content_session_id,
    decode_text,
    first_line,
    iter_jsonl,
    lead,
    load_json,
)
from agenttrail.limits import DEFAULT_MAX_IMPORT_BYTES  # its home; kept here for importers

__all__ = [
    "DEFAULT_MAX_IMPORT_BYTES",
    "FORMATS",
    "ImportedSession",
    "detect",
    "read_file",
    "read_input",
]

FORMATS: dict[str, ModuleType] = {
    module.NAME: module for module in (jsonl, fountain, claude_code, anthropic, toolbench, openai)
}
"""Format name → module, in the order ``detect`` asks them."""


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def detect(path: Path, data: bytes) -> ModuleType:
    """The format module that recognises ``data``.

    Raises:
        FormatError: no format recognises the file; the message lists the formats.
    """
    for module in FORMATS.values():
        if module.sniff(path, data):
            return module
    # Nothing claims the file: say what is wrong with it as precisely as we can.
    text = decode_text(path, data)
    if lead(text) == "{" and _first_line_is_json(text):
        for _ in iter_jsonl(path, data):  # JSON Lines: name the first bad line
            pass
    elif lead(text) in ("{", "["):
        load_json(path, text)  # one JSON document: name where it breaks
    names = ", ".join(FORMATS)
    raise FormatError(f"unknown format (not one of: {names}); pass --format", path=str(path))


def read_file(
    path: Path, format: str | None = None, *, max_bytes: int = DEFAULT_MAX_IMPORT_BYTES
) -> list[ImportedSession]:
    """Read one file into sessions, detecting its format unless ``format`` names one.

    Args:
        path: a regular file (a device, FIFO or directory is refused before it is read).
        format: a name of :data:`FORMATS`, or ``None`` to detect.
        max_bytes: largest file read, in bytes; checked before reading.

    Raises:
        FormatError: the file is missing, unreadable, not a regular file, over ``max_bytes``,
            empty, of unknown format or malformed.
    """
    data = read_input(path, max_bytes)
    if not data or data.isspace():  # not data.strip(): that copies the whole file
        raise FormatError("empty file", path=str(path))
    if format is None:
        module = detect(path, data)
    elif format in FORMATS:
        module = FORMATS[format]
    else:
        raise FormatError(f"unknown format {format!r} (use one of: {', '.join(FORMATS)})")
    sessions: list[ImportedSession] = module.read(path, data)
    return [
        session
        if session.session.id is not None
        else _with_content_id(session, module.NAME, data, i)
        for i, session in enumerate(sessions)
    ]


def read_input(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes, read once.

    The file is opened without blocking and checked before anything is read: a FIFO with no
    writer would block for ever, and ``/dev/zero`` never ends.

    Raises:
        FormatError: the file cannot be opened, is not a regular file, or is over the limit;
            names the file (and the limit).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise FormatError(f"cannot read file: {e.strerror or e}", path=str(path)) from None
    try:
        mode = os.fstat(fd)
        if not stat.S_ISREG(mode.st_mode):
            kind = next((kind for test, kind in _KINDS if test(mode.st_mode)), "not a file")
            raise FormatError(
                f"not a regular file ({kind}); import reads regular files only", path=str(path)
            )
        if mode.st_size > max_bytes:
            raise _too_large(path, mode.st_size, max_bytes)
    except BaseException:
        os.close(fd)
        raise
    with open(fd, "rb", buffering=0, closefd=True) as handle:
        try:
            # Read the size fstat gave, plus one byte to see whether the file grew since.
            data = handle.read(mode.st_size + 1) or b""
            if len(data) > mode.st_size:
                data += handle.read(max_bytes + 1 - len(data)) or b""
        except OSError as e:
            raise FormatError(f"cannot read file: {e.strerror or e}", path=str(path)) from None
    if len(data) > max_bytes:
        raise _too_large(path, len(data), max_bytes)
    return data


def _too_large(path: Path, size: int, limit: int) -> FormatError:
    return FormatError(
        f"file is {size:,} bytes, above the import limit of {limit:,} bytes "
        "(--max-bytes / AGENTTRAIL_MAX_IMPORT_BYTES)",
        path=str(path),
    )


def _with_content_id(
    session: ImportedSession, name: str, data: bytes, index: int
) -> ImportedSession:
    """Give a session from a source without ids an id derived from the file's bytes."""
    session_id = content_session_id(name, data, str(index).encode() if index else b"")
    return replace(session, session=replace(session.session, id=session_id))


def _first_line_is_json(text: str) -> bool:
    try:
        json.loads(first_line(text))
    except (ValueError, RecursionError):  # JSONDecodeError, an over-long integer, deep nesting
        return False
    return True
