"""Helpers every format module shares: decoding, JSON/JSONL parsing with locations, ids."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenttrail.codec import normalize_timestamp
from agenttrail.errors import FormatError
from agenttrail.store import NewEvent, NewSession

__all__ = [
    "ImportedSession",
    "content_session_id",
    "decode_text",
    "iter_jsonl",
    "load_json",
    "timestamp_or_none",
]


@dataclass(frozen=True)
class ImportedSession:
    """A session read from a file, ready to be written in one transaction."""

    session: NewSession
    """Session fields; ``id`` is the source's own id when it has one."""
    events: list[NewEvent]
    """Events in log order, each with a ``key`` unique in the session so that importing the
    same file again writes nothing new."""
    warnings: list[str] = field(default_factory=list)
    """Problems found in the source that did not stop the import (printed on stderr)."""
    exported_hashes: list[bytes] | None = None
    """For agenttrail's own export: the chain hash of each event as exported, checked on
    import so that an altered export is refused."""


def decode_text(path: Path, data: bytes) -> str:
    """UTF-8 text of a file (a leading BOM dropped).

    Raises:
        FormatError: the bytes are not UTF-8; names the line and byte offset.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise FormatError(
            f"not UTF-8 text (byte {e.start}: {data[e.start : e.start + 1]!r})",
            path=str(path),
            line=line,
        ) from None


def load_json(path: Path, data: bytes) -> Any:
    """Parse a whole file as one JSON document.

    Raises:
        FormatError: not UTF-8 or not JSON; names the line and column.
    """
    text = decode_text(path, data)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(
            f"invalid JSON: {e.msg} (column {e.colno})", path=str(path), line=e.lineno
        ) from None


def iter_jsonl(path: Path, data: bytes) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, value)`` for each non-blank line of a JSON Lines file.

    Raises:
        FormatError: a line is not JSON (a truncated last line included); names the line.
    """
    text = decode_text(path, data)
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as e:
            raise FormatError(
                f"invalid JSON: {e.msg} (column {e.colno})", path=str(path), line=number
            ) from None


def content_session_id(format_name: str, data: bytes) -> str:
    """A session id derived from a file's bytes, for sources that carry none.

    The same file always gives the same id, so importing it twice writes it once.
    """
    digest = hashlib.sha256(b"agenttrail:" + format_name.encode() + b"\0" + data).digest()
    return str(uuid.UUID(bytes=digest[:16], version=5))


def timestamp_or_none(value: Any) -> str | None:
    """``value`` in ``created_at`` form, or ``None`` if it is missing or not a timestamp."""
    if value is None or value == "":
        return None
    try:
        return normalize_timestamp(value)
    except (ValueError, TypeError, OverflowError, OSError):
        return None
