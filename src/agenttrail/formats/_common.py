"""Helpers every format module shares: decoding, JSON/JSONL parsing with locations, ids."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import uuid
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenttrail.codec import normalize_timestamp
from agenttrail.errors import FormatError, InvalidTimestamp
from agenttrail.model import NewEvent, NewSession

__all__ = [
    "ExportedChain",
    "ImportedSession",
    "JSONValueError",
    "PrefixTips",
    "as_object",
    "content_session_id",
    "conversation_start",
    "conversation_step",
    "decode_text",
    "exchange_digest",
    "first_line",
    "first_line_bytes",
    "import_warning",
    "is_json",
    "iter_jsonl",
    "json_prefix",
    "json_problem",
    "lead",
    "lead_bytes",
    "load_json",
    "loads",
    "prefix_tips",
    "recorded_again",
    "timestamp_or_none",
    "title_from",
]


_REWRITTEN = (
    " (a JSON tool that rewrites the file, as jq does, alters it too: 1.0 written as 1, "
    "the keys of session.metadata reordered)"
)
"""What a reformatted export changes that the chain covers: a float's type (canonical CBOR
keeps 1.0 a float) and the order of the metadata the session's genesis hashes."""


@dataclass(frozen=True)
class ExportedChain:
    """The chain hash each line of an export states for its event, and the line: checked
    against the hashes the store computes as it writes the events, inside the transaction
    that writes them, so that an import computes each hash once (docs/log-format.md, Export)."""

    hashes: list[str | None]
    """Each event's ``hash`` as its line states it (hex), ``None`` where a line states none."""
    lines: list[int]
    """The line of each event, named in errors."""
    path: str
    """The file, named in errors."""

    def check(self, first: int, computed: Sequence[bytes]) -> None:
        """Compare the chain hashes of the events at seqs ``first``, ``first + 1`` … with
        those their lines state (a line that states none is not compared).

        Raises:
            FormatError: the first line whose stated hash is not the one computed, naming
                it: its contents, or the chain before it, were altered.
        """
        stated = self.hashes[first - 1 : first - 1 + len(computed)]
        # One comparison in C for the whole session: a hash is hex, so no stated hash holds
        # the separator, and equal texts mean equal hashes line by line.
        if None not in stated and "\n".join(stated) == b"".join(computed).hex("\n", 32):  # type: ignore[arg-type]
            return
        for offset, (written, digest) in enumerate(zip(stated, computed, strict=False)):
            if written is not None and written != digest.hex():
                raise FormatError(
                    "hash does not match the line's contents: the export, or the log it came "
                    f"from, was altered{_REWRITTEN}",
                    path=self.path,
                    line=self.lines[first - 1 + offset],
                    field="hash",
                )


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
    exported: ExportedChain | None = None
    """For agenttrail's own export: the chain hash each line states, checked as the events
    are written so that an altered export is refused."""
    session_stated: bool = False
    """True when the source states every session field, ``None`` included (an export's
    ``session`` line): the importer then fills in no title or start time of its own, so that
    export → import → export gives the same bytes."""


def as_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object (a dict), else an empty one: for optional objects
    whose absence and wrong type mean the same to a reader."""
    return value if isinstance(value, dict) else {}


_BOM = b"\xef\xbb\xbf"
_LEADING_SPACE = re.compile(r"\s*")
_LEADING_SPACE_BYTES = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\n\r\x0b\x0c]*")


def _text_start(value: str | bytes) -> int:
    """Where ``value`` starts after its leading whitespace (and, in bytes, a UTF-8 BOM)."""
    found = (
        _LEADING_SPACE.match(value) if isinstance(value, str) else _LEADING_SPACE_BYTES.match(value)
    )
    return found.end() if found else 0


def lead(text: str, size: int = 1) -> str:
    """The first ``size`` characters of ``text`` after its leading whitespace.

    Unlike ``text.lstrip()[:size]`` it copies nothing but those characters: a reader looks at
    how a file starts without a second copy of a file that may be hundreds of MiB.
    """
    start = _text_start(text)
    return text[start : start + size]


def lead_bytes(data: bytes, size: int = 1) -> bytes:
    """:func:`lead` of a file's bytes: the first ``size`` bytes after a UTF-8 BOM and ASCII
    whitespace (what ``bytes.lstrip()`` drops), copying nothing else."""
    start = _text_start(data)
    return data[start : start + size]


def first_line(text: str) -> str:
    """The first line of ``text`` after its leading whitespace (copying nothing else)."""
    start = _text_start(text)
    end = text.find("\n", start)
    return text[start : len(text) if end == -1 else end]


def first_line_bytes(data: bytes) -> bytes:
    """:func:`first_line` of a file's bytes (after a UTF-8 BOM and ASCII whitespace)."""
    start = _text_start(data)
    end = data.find(b"\n", start)
    return data[start : len(data) if end == -1 else end]


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


class JSONValueError(ValueError):
    """JSON text that parses but holds a value no format may take in (see :func:`loads`).

    ``field`` is the value's path inside the parsed document (``a.b[0]``, ``""`` for the top
    or when unknown); :meth:`within` places it under the field path of the text itself.
    """

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field

    def within(self, where: str) -> str:
        """The full field path: ``where`` (the text's own path) followed by :attr:`field`."""
        if not self.field or not where:
            return where or self.field
        return f"{where}{self.field}" if self.field.startswith("[") else f"{where}.{self.field}"


class _BadNumber(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Marker:
    """Stands for a refused number while :func:`_locate` looks for where it is."""

    def __init__(self, text: str) -> None:
        self.text = text


def _refuse(text: str) -> Any:
    raise _BadNumber(f"{text} is not JSON (RFC 8259 §6 allows no NaN or Infinity)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else f"{text[:20]}..."
        raise _BadNumber(f"{shown} is beyond the range of a double (RFC 8259 §6)")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # more digits than sys.get_int_max_str_digits()
        raise _BadNumber(
            f"an integer of {len(text)} digits is longer than agenttrail reads "
            f"({sys.get_int_max_str_digits()} digits; RFC 8259 §6 lets readers limit range)"
        ) from None


_STRICT = json.JSONDecoder(parse_float=_finite_float, parse_int=_int, parse_constant=_refuse)

_SCAN: Callable[[str, int], tuple[Any, int]]
_SCAN = json.JSONDecoder(parse_float=_finite_float, parse_constant=_refuse).scan_once  # type: ignore[attr-defined]
"""The C scanner of a decoder like :data:`_STRICT` whose integers the scanner makes itself
(``int``, not a call of :func:`_int` each): a document without surrounding white space in
one call, where ``JSONDecoder.decode`` adds two regular-expression matches. It says nothing
of an error, so :func:`loads` decodes again with :data:`_STRICT` to name it."""


def json_problem(error: json.JSONDecodeError) -> str:
    """What :mod:`json` found wrong and the column it found it at, as a message says it:
    ``Expecting value (column 2)``; ``Unterminated string starting at column 16`` for a
    message that ends in "at" (its own "line 1 column 16" cut off by ``.msg``)."""
    if error.msg.endswith(" at"):
        return f"{error.msg} column {error.colno}"
    return f"{error.msg} (column {error.colno})"


def loads(text: str) -> Any:
    """Parse JSON text, refusing what RFC 8259 §6 does not allow as a number.

    ``json.loads`` accepts ``NaN`` and ``Infinity`` and turns ``1e999`` into infinity; none of
    them can be stored (:func:`agenttrail.codec.encode_payload`) or written back as JSON, so
    they are refused here, as are integers longer than Python converts
    (``sys.get_int_max_str_digits()``) and nesting too deep to parse.

    Raises:
        json.JSONDecodeError: not JSON.
        JSONValueError: such a number (its ``field`` names where) or nesting too deep.
    """
    try:
        value, end = _SCAN(text, 0)
        if end == len(text):
            return value
    except (StopIteration, ValueError, _BadNumber, RecursionError):
        pass  # not JSON, white space around it, or a refused number: decoded again below
    try:
        return _STRICT.decode(text)
    except _BadNumber as e:
        raise JSONValueError(e.reason, _locate(text)) from None
    except RecursionError:
        raise JSONValueError("nested too deeply to read") from None


def is_json(text: str) -> bool:
    """True for JSON text, even with a number :func:`loads` refuses."""
    try:
        loads(text)
    except json.JSONDecodeError:
        return False
    except JSONValueError:
        return True
    return True


def _locate(text: str) -> str:
    """The field path of the first refused number in ``text`` (which parses otherwise)."""

    def float_or_marker(value: str) -> Any:
        number = float(value)
        return number if math.isfinite(number) else _Marker(value)

    def int_or_marker(value: str) -> Any:
        try:
            return int(value)
        except ValueError:
            return _Marker(value)

    try:
        doc = json.loads(
            text, parse_float=float_or_marker, parse_int=int_or_marker, parse_constant=_Marker
        )
    except RecursionError:  # deeper than the first pass got before it stopped
        return ""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, _Marker):
            return where
        if isinstance(value, dict):
            items = [(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()]
        elif isinstance(value, list):
            items = [(v, f"{where}[{i}]") for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(items))
    return ""


def load_json(path: Path, data: bytes | str) -> Any:
    """Parse a whole file as one JSON document (:func:`loads`: no NaN or infinity).

    Args:
        path: the file, named in errors.
        data: its bytes, or its text when the caller decoded it already (so that the file is
            not held as text twice).

    Raises:
        FormatError: not UTF-8 or not JSON; names the line and column, or the field.
    """
    text = data if isinstance(data, str) else decode_text(path, data)
    try:
        return loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(
            f"invalid JSON: {json_problem(e)}", path=str(path), line=e.lineno
        ) from None
    except JSONValueError as e:
        raise FormatError(str(e), path=str(path), field=e.field or None) from None


def iter_jsonl(path: Path, data: bytes) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, value)`` for each non-blank line of a JSON Lines file.

    Raises:
        FormatError: a line is not JSON (a truncated last line included) or holds a number
            :func:`loads` refuses; names the line (and the field).
    """
    # One line decoded at a time: the file is not held a second time as text, nor a third
    # time as a list of lines.
    start = len(_BOM) if data.startswith(_BOM) else 0
    number = 0
    while start <= len(data):
        end = data.find(b"\n", start)
        end = len(data) if end == -1 else end
        number += 1
        try:
            line = data[start:end].decode("utf-8")
        except UnicodeDecodeError as e:
            at = start + e.start
            raise FormatError(
                f"not UTF-8 text (byte {at}: {data[at : at + 1]!r})", path=str(path), line=number
            ) from None
        start = end + 1
        if not line.strip():
            continue
        try:
            value = loads(line)
        except json.JSONDecodeError as e:
            unfinished = _UNFINISHED if end == len(data) else ""
            raise FormatError(
                f"invalid JSON: {json_problem(e)}{unfinished}", path=str(path), line=number
            ) from None
        except JSONValueError as e:
            raise FormatError(str(e), path=str(path), line=number, field=e.field or None) from None
        yield number, value


_UNFINISHED = (
    "; it is the last line and has no newline: the file was cut short, or is still being"
    " written (agenttrail watch follows a transcript as it grows)"
)
"""What a JSON Lines file whose last line is not JSON and not ended most likely is."""


def content_session_id(format_name: str, data: bytes, suffix: bytes = b"") -> str:
    """A session id derived from a file's bytes (and ``suffix``, which tells apart the
    sessions of one file), for sources that carry none.

    The same file always gives the same id, so importing it twice writes it once.
    """
    digest = hashlib.sha256(b"agenttrail:" + format_name.encode() + b"\0")
    digest.update(data)  # not concatenated: that would copy the whole file
    digest.update(suffix)
    return str(uuid.UUID(bytes=digest.digest()[:16], version=5))


TITLE_CHARS = 80
"""Longest session title taken from a first prompt (characters, the ellipsis included)."""


def title_from(text: str) -> str | None:
    """A session title from a prompt: its first non-blank line, cut with ``…`` past
    :data:`TITLE_CHARS`, lone surrogates and NUL shown as U+FFFD; ``None`` for blank text."""
    for line in text.splitlines():
        # A title is for display, and database text: a lone surrogate (not text) and NUL
        # (which PostgreSQL text cannot hold) show as U+FFFD. The message keeps them.
        line = line.strip().encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")
        if line:
            return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"
    return None


def timestamp_or_none(value: Any) -> str | None:
    """``value`` in ``created_at`` form, or ``None`` if it is missing or not a timestamp."""
    if value is None or value == "":
        return None
    try:
        return normalize_timestamp(value)
    except InvalidTimestamp:
        return None


_DECODER = json.JSONDecoder()


def json_prefix(data: bytes, limit: int) -> Any:
    """What the first ``limit`` bytes of a JSON document say: the document with every array
    and object cut where the prefix ends (complete members only), for recognising a file too
    large to parse whole. ``None`` when the prefix holds no complete value at all or is not
    JSON as far as it goes.

    Args:
        data: the file's bytes (a leading UTF-8 byte order mark is skipped).
        limit: how many bytes to look at.
    """
    head = data[3 : limit + 3] if data.startswith(b"\xef\xbb\xbf") else data[:limit]
    text = head.decode("utf-8", errors="ignore")  # a character cut at the end is dropped
    try:
        value, _ = _partial(text, _skip(text, 0), 0)
    except _Cut as cut:
        return cut.value
    except (ValueError, RecursionError):
        return None
    return value


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


class _Cut(Exception):
    """The prefix ends here; the value so far is ``value``."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _partial(text: str, at: int, depth: int) -> tuple[Any, int]:
    """Parse one value at ``at``; an array or object cut by the end of ``text`` is returned
    with its complete members (as :class:`_Cut` from nested calls)."""
    if depth > 64:
        raise ValueError("nested too deeply")
    if at >= len(text):
        raise _Cut(None)
    opener = text[at]
    if opener not in "[{":
        try:
            return _DECODER.raw_decode(text, at)
        except json.JSONDecodeError:
            raise _Cut(None) from None
    is_list = opener == "["
    items: Any = [] if is_list else {}
    at = _skip(text, at + 1)
    closer = "]" if is_list else "}"
    if at < len(text) and text[at] == closer:
        return items, at + 1
    while True:
        if is_list:
            try:
                value, at = _partial(text, at, depth + 1)
            except _Cut as cut:
                # an element cut short is kept only when it is all there is to look at
                if cut.value is not None and not items:
                    items.append(cut.value)
                raise _Cut(items) from None
            items.append(value)
        else:
            try:
                key, at = _DECODER.raw_decode(text, at)
            except json.JSONDecodeError:
                raise _Cut(items) from None
            if not isinstance(key, str):
                raise ValueError("expected a string key")
            at = _skip(text, at)
            if at >= len(text):
                raise _Cut(items)
            if text[at] != ":":
                raise ValueError("expected ':'")
            try:
                value, at = _partial(text, _skip(text, at + 1), depth + 1)
            except _Cut as cut:
                if cut.value is not None:
                    items[key] = cut.value
                raise _Cut(items) from None
            items[key] = value
        at = _skip(text, at)
        if at >= len(text):
            raise _Cut(items)
        if text[at] == closer:
            return items, at + 1
        if text[at] != ",":
            raise ValueError(f"expected ',' or '{closer}'")
        at = _skip(text, at + 1)


def import_warning(text: str) -> dict[str, Any]:
    """The ``annotation`` payload an importer leaves in the log where it warned: kind
    ``import_warning``, actor ``system``, the warning's ``text`` (docs/log-format.md, Payload
    types). The same text goes in :attr:`ImportedSession.warnings`, printed on stderr."""
    return {"type": "annotation", "kind": "import_warning", "text": text, "actor": "system"}


def exchange_digest(request: Any, response: Any) -> str:
    """What makes two recorded exchanges the same one recorded twice: the SHA-256 of the
    request and the response as recorded (JSON, keys sorted). A response id alone does not:
    OpenAI-compatible servers exist that give every response the same id, and a request that
    brings a new message under a reused id is a new exchange, never one to skip."""
    text = json.dumps([request, response], sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def recorded_again(response_id: str) -> str:
    """The warning for a response recorded twice (a retried recording, or two records of one
    response): it is imported once; names the provider's response id."""
    return f"response {response_id!r} was already recorded: imported once, this copy skipped"


def conversation_start(provider: str) -> bytes:
    """The digest of an empty conversation of ``provider``: where :func:`prefix_tips` starts
    (docs/capture.md, How conversations are recognised)."""
    return hashlib.sha256(b"agenttrail capture\0" + provider.encode()).digest()


def conversation_step(digest: bytes, print_: Hashable) -> bytes:
    """The digest of a conversation ``digest`` followed by one message whose print (what
    makes two messages the same: role, text, tool ids) is ``print_``."""
    # repr of tuples of str, int, bool and None is the same in every process and version
    return hashlib.sha256(digest + repr(print_).encode("utf-8", "surrogatepass")).digest()


def prefix_tips(provider: str, prints: list[Hashable]) -> list[str]:
    """The tip of each prefix of a conversation's message ``prints``: element ``k - 1`` is
    that of the first ``k`` (32 hex digits). Two requests that repeat the same history give
    the same tips, which is how live capture and the OTLP receiver store each message once."""
    return PrefixTips(provider)(prints)


class PrefixTips:
    """:func:`prefix_tips` of the successive histories of one conversation, each history's
    digests taken up from where the last one that began with the same prints left off: a
    history every request repeats whole is hashed once, not once per request."""

    def __init__(self, provider: str) -> None:
        self.start = conversation_start(provider)
        self.chain: list[tuple[Hashable, bytes]] = []
        """The last history's prints, each with the digest of the conversation up to it."""

    def __call__(self, prints: list[Hashable]) -> list[str]:
        return [d.hex()[:32] for d in self.digests(prints)]

    def digests(self, prints: list[Hashable]) -> list[bytes]:
        """The digest of each prefix of ``prints`` (element ``k - 1``: the first ``k``), whose
        first 32 hex digits are its tip."""
        same = 0
        for (before, _), now in zip(self.chain, prints, strict=False):
            if before != now:
                break
            same += 1
        chain = self.chain[:same]
        digest = chain[-1][1] if chain else self.start
        for p in prints[same:]:
            digest = conversation_step(digest, p)
            chain.append((p, digest))
        self.chain = chain
        return [d for _, d in chain]
