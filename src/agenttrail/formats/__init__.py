"""Outside formats: one module per format, each recognising its own input.

Each format module has ``NAME`` (what ``--format`` takes), ``sniff(path, data) -> bool`` (a
cheap look at the bytes) and ``read(path, data) -> list[ImportedSession]`` (raises
:class:`~agenttrail.errors.FormatError` naming the file, line and field). Formats know events,
not the store: they return payloads, and :mod:`agenttrail.ingest.importer` writes them.

``detect`` asks the formats in turn, most specific first (Inspect's recorder registry shape).
"""

from __future__ import annotations

import functools
import importlib
import io
import json
import os
import stat
import zlib
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, BinaryIO

from agenttrail.errors import FormatError, NotATranscript
from agenttrail.formats._common import (
    ImportedSession,
    content_session_id,
    decode_text,
    first_line,
    iter_jsonl,
    lead,
    load_json,
    title_from,
)
from agenttrail.limits import DEFAULT_MAX_IMPORT_BYTES  # its home; kept here for importers

__all__ = [
    "DEFAULT_MAX_IMPORT_BYTES",
    "FORMATS",
    "IMPORT_SUFFIXES",
    "SQLITE_HEADER",
    "ImportedSession",
    "detect",
    "open_input",
    "read_data",
    "read_file",
    "read_input",
    "read_stream",
    "title_from",
]

_MODULES = (
    "jsonl",
    "otlp",
    "fountain",
    "inspect",
    "claude_code",
    "anthropic",
    "langfuse",
    "toolbench",
    "openai",
)
"""The format modules, in the order ``detect`` asks them. They are imported on the first use
of :data:`FORMATS`, not with the package: a command that writes one format (``agenttrail
fountain``) need not load the others (about 0.2 s of CPU time, a tenth of that command's at
100,000 events)."""

if TYPE_CHECKING:
    FORMATS: dict[str, ModuleType]
    """Format name → module, in the order ``detect`` asks them (built on first use)."""


@functools.cache
def _formats() -> dict[str, ModuleType]:
    modules = (importlib.import_module(f"{__name__}.{name}") for name in _MODULES)
    return {module.NAME: module for module in modules}


def __getattr__(name: str) -> dict[str, ModuleType]:
    """:data:`FORMATS`, the format name → module map, imported on first use."""
    if name == "FORMATS":
        return _formats()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


IMPORT_SUFFIXES = (".jsonl", ".json", ".eval", ".yaml", ".yml", ".txt", ".spmd", ".fountain")
"""Name endings of the files ``agenttrail import DIR`` reads below a folder (each also with
``.gz``): the formats' own files (JSON Lines transcripts and exports, JSON recordings and logs,
Inspect's ``.eval`` zips, VCR cassettes, raw server-sent event text, Fountain screenplays).
Other files there (notes, ``SOURCES.md``) are left alone."""

_GZIP_MAGIC = b"\x1f\x8b"
"""The first bytes of a gzip member (RFC 1952 §2.3.1): compressed input is recognised by its
bytes, not its name."""

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file (https://sqlite.org/fileformat.html): a
log given where a file to import or to write is expected."""


def detect(path: Path, data: bytes) -> ModuleType:
    """The format module that recognises ``data``.

    Raises:
        NotATranscript: no format recognises the file; the message lists the formats.
        FormatError: a file that looks like one (JSON, JSON Lines) is malformed (names
            where), or is a SQLite database.
    """
    for name in _MODULES:  # each imported when asked: an export is known by the first
        module = importlib.import_module(f"{__name__}.{name}")
        if module.sniff(path, data):
            return module
    # Nothing claims the file: say what is wrong with it as precisely as we can.
    if data.startswith(SQLITE_HEADER):
        raise FormatError(
            "a SQLite database, not a file to import (a log is copied into another with "
            "agenttrail migrate --from FILE --to URL)",
            path=str(path),
        )
    text = decode_text(path, data)
    suffix = path.suffix.lower()
    if suffix == ".gz":
        suffix = Path(path.stem).suffix.lower()
    if suffix in (".jsonl", ".ndjson") or (lead(text) == "{" and _first_line_is_json(text)):
        for _ in iter_jsonl(path, data):  # JSON Lines: name the first bad line
            pass
    elif lead(text) in ("{", "[") and suffix in ("", ".json"):  # not a .toml's [table]
        load_json(path, text)  # one JSON document: name where it breaks
    names = ", ".join(_formats())
    raise NotATranscript(  # quickstart says it too, and has no --format
        f"unknown format (not one of: {names}); name it with agenttrail import --format",
        path=str(path),
    )


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
    return read_data(path, read_input(path, max_bytes), format, max_bytes=max_bytes)


def read_data(
    path: Path,
    data: bytes,
    format: str | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_IMPORT_BYTES,
) -> list[ImportedSession]:
    """Read a file's bytes (or standard input's) into sessions, as :func:`read_file` does.

    gzip-compressed bytes (RFC 1952, recognised by their first two bytes) are decompressed
    first, to at most ``max_bytes``.

    Args:
        path: the name errors and content-derived ids use (``<stdin>`` for standard input).
        data: the bytes.
        format: a name of :data:`FORMATS`, or ``None`` to detect.
        max_bytes: largest input, in bytes, after decompression.

    Raises:
        FormatError: as :func:`read_file`, or a gzip stream that is damaged, cut short or
            larger than ``max_bytes`` once decompressed.
    """
    if data.startswith(_GZIP_MAGIC):
        data = _gunzip(path, data, max_bytes)
    if not data or data.isspace():  # not data.strip(): that copies the whole file
        raise NotATranscript("empty file", path=str(path))
    if format is None:
        module = detect(path, data)
    elif format in _formats():
        module = _formats()[format]
    else:
        raise FormatError(f"unknown format {format!r} (use one of: {', '.join(_formats())})")
    try:
        sessions: list[ImportedSession] = module.read(path, data)
    except FormatError as e:
        # a file of another format read as the one asked for: say which it looks like
        looks = (
            None
            if format is None
            else next((name for name, other in _formats().items() if other.sniff(path, data)), None)
        )
        if looks is not None and looks != format:
            e.extend(f" (read as --format {format}; it looks like {looks})")
        raise
    return [
        session
        if session.session.id is not None
        else _with_content_id(session, module.NAME, data, i)
        for i, session in enumerate(sessions)
    ]


def open_input(path: Path, max_bytes: int) -> tuple[io.FileIO, int]:
    """A regular file of at most ``max_bytes`` bytes, opened to be read, and its size.

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
            raise NotATranscript(
                f"not a regular file ({kind}); import reads regular files only", path=str(path)
            )
        if mode.st_size > max_bytes:
            raise _too_large(path, mode.st_size, max_bytes)
    except BaseException:
        os.close(fd)
        raise
    return open(fd, "rb", buffering=0, closefd=True), mode.st_size


def read_input(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes, read once
    (:func:`open_input`).

    Raises:
        FormatError: as :func:`open_input`, or the file grew past the limit as it was read.
    """
    handle, size = open_input(path, max_bytes)
    with handle:
        try:
            # Read the size fstat gave, plus one byte to see whether the file grew since.
            data = handle.read(size + 1) or b""
            if len(data) > size:
                data += handle.read(max_bytes + 1 - len(data)) or b""
        except OSError as e:
            raise FormatError(f"cannot read file: {e.strerror or e}", path=str(path)) from None
    if len(data) > max_bytes:
        raise _too_large(path, len(data), max_bytes)
    return data


def read_stream(stream: BinaryIO, max_bytes: int, name: str = "<stdin>") -> bytes:
    """All bytes of ``stream`` (standard input), refused past ``max_bytes``.

    Raises:
        FormatError: the stream is over the limit or cannot be read; names ``name``.
    """
    try:
        data = stream.read(max_bytes + 1)
    except OSError as e:
        raise FormatError(f"cannot read: {e.strerror or e}", path=name) from None
    if len(data) > max_bytes:
        raise FormatError(
            f"input is over the import limit of {max_bytes:,} bytes "
            "(--max-bytes / AGENTTRAIL_MAX_IMPORT_BYTES)",
            path=name,
        )
    return data


def _gunzip(path: Path, data: bytes, max_bytes: int) -> bytes:
    """Decompress gzip members (RFC 1952 §2.2: a file may hold several) to ``max_bytes`` at
    most: a small file can expand to far more than the limit, so it is checked as it grows."""
    parts: list[bytes] = []
    size = 0
    rest = data
    try:
        while rest:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16: expect a gzip header
            part = inflater.decompress(rest, max_bytes + 1 - size)
            size += len(part)
            parts.append(part)
            if size > max_bytes:
                raise FormatError(
                    f"decompresses to more than the import limit of {max_bytes:,} bytes "
                    "(--max-bytes / AGENTTRAIL_MAX_IMPORT_BYTES)",
                    path=str(path),
                )
            if not inflater.eof:
                raise FormatError("gzip stream is cut short (truncated file?)", path=str(path))
            rest = inflater.unused_data
    except zlib.error as e:
        raise FormatError(f"damaged gzip stream ({e})", path=str(path)) from None
    return b"".join(parts)


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
