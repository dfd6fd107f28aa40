"""Outside formats: one module per format, each recognising its own input.

Each format module has ``NAME`` (what ``--format`` takes), ``sniff(path, data) -> bool`` (a
cheap look at the bytes) and ``read(path, data) -> list[ImportedSession]`` (raises
:class:`~agenttrail.errors.FormatError` naming the file, line and field). Formats know events,
not the store: they return payloads, and :mod:`agenttrail.ingest.importer` writes them.

``detect`` asks the formats in turn, most specific first (Inspect's recorder registry shape).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from agenttrail.errors import FormatError
from agenttrail.formats import anthropic, claude_code, fountain, jsonl, openai, toolbench
from agenttrail.formats._common import (
    ImportedSession,
    content_session_id,
    decode_text,
    iter_jsonl,
    load_json,
)

__all__ = ["FORMATS", "ImportedSession", "detect", "read_file"]

FORMATS: dict[str, ModuleType] = {
    module.NAME: module for module in (jsonl, fountain, claude_code, anthropic, toolbench, openai)
}
"""Format name → module, in the order ``detect`` asks them."""


def detect(path: Path, data: bytes) -> ModuleType:
    """The format module that recognises ``data``.

    Raises:
        FormatError: no format recognises the file; the message lists the formats.
    """
    for module in FORMATS.values():
        if module.sniff(path, data):
            return module
    # Nothing claims the file: say what is wrong with it as precisely as we can.
    text = decode_text(path, data).lstrip()
    if text.startswith("{") and _first_line_is_json(text):
        for _ in iter_jsonl(path, data):  # JSON Lines: name the first bad line
            pass
    elif text.startswith(("{", "[")):
        load_json(path, data)  # one JSON document: name where it breaks
    names = ", ".join(FORMATS)
    raise FormatError(f"unknown format (not one of: {names}); pass --format", path=str(path))


def read_file(path: Path, format: str | None = None) -> list[ImportedSession]:
    """Read one file into sessions, detecting its format unless ``format`` names one.

    Raises:
        FormatError: the file is missing, unreadable, empty, of unknown format or malformed.
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FormatError(f"cannot read file: {e.strerror or e}", path=str(path)) from None
    if not data.strip():
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


def _with_content_id(
    session: ImportedSession, name: str, data: bytes, index: int
) -> ImportedSession:
    """Give a session from a source without ids an id derived from the file's bytes."""
    session_id = content_session_id(name, data if index == 0 else data + str(index).encode())
    return replace(session, session=replace(session.session, id=session_id))


def _first_line_is_json(text: str) -> bool:
    try:
        json.loads(text.split("\n", 1)[0])
    except (ValueError, RecursionError):  # JSONDecodeError, an over-long integer, deep nesting
        return False
    return True
