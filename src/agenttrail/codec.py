"""Bytes for the log: canonical CBOR payloads, JSON text, RFC 8785 canonical JSON, and
``created_at`` timestamps.

Payloads are stored as canonical CBOR (RFC 8949 §4.2, as produced by ``cbor2`` with
``canonical=True``): the same mapping always gives the same bytes, and the chain hashes those
bytes. Only JSON-shaped values are accepted (mapping with text keys, list, text, int, finite
float, bool, null), so that every payload also has an exact JSON form for export.

Lossless text. CBOR text strings must be valid UTF-8, but a Python ``str`` may hold lone
surrogates (``"\\udc81"``, e.g. from ``surrogateescape`` decoding of bytes that were not
UTF-8). Such a string, and only such a string, is written as CBOR tag
:data:`SURROGATE_TEXT_TAG` around a byte string holding its WTF-8 bytes (UTF-8 with
``surrogatepass``; https://simonsapin.github.io/wtf-8/). Reading turns the tag back into the
same ``str``. In JSON output, lone surrogates are written as ``\\u`` escapes (``\\udc81``), which
Python's ``json`` reads back to the same ``str``. Both escapes are reversible and documented in
``docs/log-format.md``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import lru_cache
from itertools import accumulate, compress, count, repeat
from typing import Any

import cbor2
import rfc8785

from agenttrail.errors import InvalidTimestamp, NotIJSON, PayloadError

try:
    from agenttrail import _cbor
except ImportError:  # built without a C compiler (pyproject.toml): the Python path alone
    _cbor = None  # type: ignore[assignment]
try:
    from agenttrail import _indent
except ImportError:  # as above
    _indent = None  # type: ignore[assignment]

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "SURROGATE_TEXT_TAG",
    "canonical_json",
    "decode_payload",
    "encode_payload",
    "escaped_surrogates",
    "indented_json",
    "indented_json_chunks",
    "json_line",
    "normalize_timestamp",
    "now_timestamp",
    "timestamp_from_nanos",
]

SURROGATE_TEXT_TAG = 1096046419
"""CBOR tag (0x41545753, "ATWS", first-come-first-served range of RFC 8949 §9.2) wrapping the
WTF-8 bytes of a text string that holds lone surrogates."""

MAX_DEPTH = 200
"""Deepest nesting of lists and mappings accepted in a payload. cbor2 refuses to decode beyond
400 levels by default; 200 leaves room for our own wrapping and keeps recursion shallow."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_payload(payload: Any) -> bytes:
    """Encode a payload mapping as canonical CBOR bytes.

    The bytes are exactly ``cbor2.dumps(payload, canonical=True)`` (RFC 8949 §4.2: map keys
    in length-first order, shortest integer and float forms); ``tests/test_codec.py`` holds
    the two equal. They are produced faster: in C (``agenttrail._cbor``) when the extension
    was built and the payload holds nothing it leaves to Python (a text with lone
    surrogates, an int beyond 64 bits, a value that is refused). Otherwise one walk
    validates the payload and orders each map's keys, then cbor2 encodes without re-sorting
    (its canonical mode sorts every map again, about three times slower); a payload holding
    a float goes through canonical mode, which writes the shortest exact float form (RFC
    8949 §4.2.2).

    Args:
        payload: a ``dict`` with ``str`` keys whose values are JSON-shaped (``dict`` with
            ``str`` keys, ``list``, ``str``, ``int``, finite ``float``, ``bool``, ``None``).

    Returns:
        The canonical CBOR encoding.

    Raises:
        PayloadError: the payload is not a mapping, or holds a value that would not read back
            equal (a tuple, a set, bytes, a non-text key, NaN or infinity, nesting deeper than
            :data:`MAX_DEPTH`); the message names the path of the offending value.
    """
    if _cbor is not None:
        fast = _cbor.encode(payload, MAX_DEPTH)
        if fast is not None:
            return fast
    if not isinstance(payload, dict):
        raise PayloadError(f"payload must be a mapping, not {type(payload).__name__}")
    floats: list[float] = []
    try:
        prepared = _prepare(payload, 0, floats)
    except _Refused as e:
        path = "payload" + "".join(reversed(e.path))
        raise PayloadError(f"{path}: {e.reason}") from None
    try:
        if floats:
            # Shortest exact float forms need cbor2's canonical mode (RFC 8949 §4.2.2).
            return cbor2.dumps(payload, canonical=True)
        return cbor2.dumps(prepared)  # keys already in canonical order
    except UnicodeEncodeError:
        return cbor2.dumps(_tag_surrogates(payload), canonical=True)


def decode_payload(data: bytes) -> Any:
    """Decode canonical CBOR bytes written by :func:`encode_payload` back to the mapping."""
    return cbor2.loads(data, tag_hook=_untag_surrogates)


class _Refused(Exception):
    """A value that would not round-trip; ``path`` is filled in while the walk unwinds."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.path: list[str] = []


_SCALARS = frozenset({str, int, bool, type(None)})


KEY_ORDER_CACHE_SIZE = 4096
"""Distinct key sets whose canonical order is remembered. Agents write a few dozen payload
shapes over and over; sorting each map's keys anew was the slowest step of an append."""

_key_orders: dict[tuple[Any, ...], tuple[str, ...]] = {}


def _canonical_order(keys: tuple[Any, ...]) -> tuple[str, ...]:
    """The keys in canonical order: length-first by encoded key, then bytewise.

    For text keys that is (UTF-8 length, text): UTF-8 preserves code point order, and a
    longer key never has a shorter CBOR head. Only all-text key sets reach the cache, so a
    later lookup that hits it also proves its keys are text.
    """
    order = _key_orders.get(keys)
    if order is None:
        for key in keys:
            if type(key) is not str:
                raise _Refused(f"key {key!r} is not text")
        order = tuple(sorted(keys, key=lambda k: (len(k.encode("utf-8", "surrogatepass")), k)))
        if len(_key_orders) < KEY_ORDER_CACHE_SIZE:
            _key_orders[keys] = order
    return order


def _prepare(value: Any, depth: int, floats: list[float]) -> Any:
    """Validate a value and order its maps' keys canonically; collect floats into ``floats``.

    Paths are only built on failure, so the common case costs a type lookup per value.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise _Refused(f"{value} is not allowed (JSON has no NaN or infinity)")
        floats.append(value)
        return value
    if depth >= MAX_DEPTH:
        raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
    if kind is dict:
        out = {}
        for key in _canonical_order(tuple(value)):
            item = value[key]
            if type(item) not in _SCALARS:
                try:
                    item = _prepare(item, depth + 1, floats)
                except _Refused as e:
                    e.path.append(f".{key}")
                    raise
            out[key] = item
        return out
    if kind is list:
        items = []
        for index, item in enumerate(value):
            if type(item) not in _SCALARS:
                try:
                    item = _prepare(item, depth + 1, floats)
                except _Refused as e:
                    e.path.append(f"[{index}]")
                    raise
            items.append(item)
        return items
    raise _Refused(
        f"a {kind.__name__} would not read back equal; use dict, list, str, int, float, bool "
        "or None"
    )


def _tag_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return cbor2.CBORTag(SURROGATE_TEXT_TAG, value.encode("utf-8", "surrogatepass"))
        return value
    if isinstance(value, dict):
        return {_tag_surrogates(k): _tag_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tag_surrogates(v) for v in value]
    return value


def _untag_surrogates(tag: cbor2.CBORTag, immutable: bool) -> Any:
    if tag.tag == SURROGATE_TEXT_TAG and isinstance(tag.value, bytes):
        return tag.value.decode("utf-8", "surrogatepass")
    return tag


def json_line(value: Any, *, spaced: bool = False) -> str:
    """One line of compact JSON, UTF-8 text kept readable, lone surrogates as ``\\u`` escapes.

    ``json.loads`` of the result gives back an equal value, lone surrogates included; the
    text encodes to valid UTF-8 (the escapes are ASCII). ``spaced`` puts a space after each
    ``,`` and ``:`` between tokens (``{"path": "a.go", "n": 2}``), for text a terminal wraps
    at spaces: a line then breaks between tokens, never inside ``"a.go"`` while a break
    between tokens is left (docs/usage.md, Output).
    """
    return escaped_surrogates((_SPACED_JSON if spaced else _COMPACT_JSON).encode(value))


def escaped_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\udc81``), so that it
    encodes to UTF-8: as JSON text writes one, and as text a database stores (the log keeps
    lone surrogates in payloads, docs/log-format.md; a text column takes none)."""
    if text.isascii():  # most text: no lone surrogate to look for (a flag of the string)
        return text
    try:
        text.encode("utf-8")  # in C, ten times faster than the search below finding none
    except UnicodeEncodeError:
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_SPACED_JSON = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "), allow_nan=False)
""":func:`json_line`'s encoders, made once: ``json.dumps`` makes one each call when its
arguments are not the defaults (1.4 µs of a small value's 3 µs); an encoder holds no state
between calls."""


def now_timestamp() -> str:
    """The current UTC time as a ``created_at`` string (see :func:`normalize_timestamp`)."""
    return _format(datetime.now(UTC))


def normalize_timestamp(value: str | int | float | datetime) -> str:
    """Turn a timestamp into the ``created_at`` form: RFC 3339 UTC, microseconds, ``Z``.

    ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` is always 27 ASCII characters, so text order is time order.

    Args:
        value: an RFC 3339 / ISO 8601 string with an offset (``Z``, ``-04:00``) or none
            (taken as UTC), Unix seconds as int or float (OpenAI ``created``), or a datetime.

    Raises:
        InvalidTimestamp: the value is not a timestamp, or one out of range.
    """
    try:
        if isinstance(value, datetime):
            moment = value
        elif isinstance(value, int | float) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(value, UTC)
        elif isinstance(value, str):
            moment = datetime.fromisoformat(value.strip())
        else:
            raise InvalidTimestamp(f"not a timestamp: {value!r}")
    except (ValueError, OverflowError, OSError) as e:
        raise InvalidTimestamp(f"not a timestamp: {value!r} ({e})") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _format(moment.astimezone(UTC))


def timestamp_from_nanos(nanos: int) -> str:
    """Unix nanoseconds (OTLP's ``*_time_unix_nano``, 0 to 2**64 - 1) as a ``created_at``
    string: exactly ``normalize_timestamp(nanos / 1e9)``, without a ``datetime`` per call.

    The same float, split and rounded as ``datetime.fromtimestamp`` does it (CPython
    ``_PyTime_DoubleToDenominator``: the fraction of the float seconds times 10**6, rounded
    half to even, carried into the seconds at 10**6); the date and time of day come from
    the whole seconds, formatted once per second (:func:`_second`).
    """
    fraction, whole = math.modf(nanos / 1e9)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        micros -= 1_000_000
        whole += 1.0
    return f"{_second(int(whole))}.{micros:06d}Z"


@lru_cache(maxsize=4096)
def _second(seconds: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of a Unix second (UTC)."""
    return _format(datetime.fromtimestamp(seconds, UTC))[:19]


def _format(moment: datetime) -> str:
    # Not strftime: glibc writes year 1 as "1", and the form must stay 27 characters. Field
    # by field rather than a format spec: an OTLP request formats two times per span.
    m = moment
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
        f".{m.microsecond:06d}Z"
    )


MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer I-JSON carries exactly (RFC 7493 §2.2)."""


def canonical_json(value: Any) -> bytes:
    """RFC 8785 (JCS) canonical JSON of an I-JSON value.

    Raises:
        NotIJSON: NaN or an infinity, an integer beyond ±(2^53−1), a lone surrogate, or a
            non-JSON type; the message names the path.
    """
    _check_ijson(value, "$")
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as e:  # what the walk above could not name
        raise NotIJSON(f"not I-JSON: {e}") from None


def _check_ijson(value: Any, path: str) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise NotIJSON(f"{path}: a lone surrogate is not I-JSON (RFC 7493 §2.1)") from None
        return
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise NotIJSON(f"{path}: {value} is beyond ±(2^53−1) (RFC 7493 §2.2)")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotIJSON(f"{path}: {value} is not a JSON number (RFC 7493 §2.2)")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotIJSON(f"{path}: key {key!r} is not text")
            _check_ijson(key, f"{path} key")
            _check_ijson(item, f"{path}.{key}")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_ijson(item, f"{path}[{index}]")
        return
    raise NotIJSON(f"{path}: a {type(value).__name__} is not JSON")


_STRUCTURE = re.compile(r"\[\]|\{\}|[\[\]{},:]")
"""What indenting changes in compact JSON text outside strings: a bracket, a comma or a
colon; an empty array or object is kept as it is."""


def indented_json(value: object, indent: int, depth: int = 0) -> str:
    """``json.dumps(value, ensure_ascii=False, indent=indent, allow_nan=False)``, the same
    text, at C speed: the standard library encodes with its C encoder only without ``indent``
    (its pure-Python one walks every node), so the compact text is encoded in C and then
    indented outside its strings: in C (``agenttrail._indent``) when the extension was built,
    else as follows.

    In compact JSON text a control character never appears raw and a quote inside a string
    is always escaped (``\\"``), so splitting on ``"`` alternates the text between strings
    and the runs between them (``:``, ``,``, ``}]},{``, ``:12,``), once the pieces that an
    escaped quote split are joined again (:func:`_split_at_quotes`). A run's indentation
    depends only on the run and the depth it starts at, so each distinct (run, depth) is
    indented once, in Python, and the rest (splitting, the running depth, the look-ups,
    joining) runs in C: the cost no longer depends on the nodes in Python.

    ``depth``: the text as it is written nested that deep (its lines after the first
    indented ``depth`` levels more), for :func:`indented_json_chunks`.

    Raises:
        ValueError: ``value`` holds NaN or an infinity; TypeError: it is not JSON-ready.
    """
    compact = _COMPACT_JSON.encode(value)
    if _indent is not None:
        return _indent.indent(compact, indent, depth)
    pieces = _split_at_quotes(compact)
    del compact  # the text is held twice at most (a long replay's is tens of MB)
    runs = pieces[0::2]
    steps = {run: _depth_step(run) for run in set(runs)}
    depths = accumulate(map(steps.__getitem__, runs), initial=depth)  # where each run starts
    pieces[0::2] = map(_Runs(indent).__getitem__, zip(runs, depths, strict=False))  # one more depth
    del runs
    return '"'.join(pieces)


JSON_CHUNK_ITEMS = 1000
"""Items of a long list indented at once by :func:`indented_json_chunks`."""


def indented_json_chunks(value: dict[str, Any], indent: int) -> Iterator[str]:
    """:func:`indented_json` of ``value`` in pieces whose concatenation is that text: when
    its last member is a list, the list's items are indented :data:`JSON_CHUNK_ITEMS` at a
    time, so that a long list's text (a long replay's message list, tens of MB) is never
    whole in memory, nor its pieces while it is indented.

    Raises:
        ValueError, TypeError: as :func:`indented_json`.
    """
    last = next(reversed(value), None)
    items = value[last] if last is not None else None
    if last is None or not isinstance(items, list) or not items:
        yield indented_json(value, indent)
        return
    emptied: dict[str, Any] = {**value, last: []}
    head = indented_json(emptied, indent)
    yield head[: -len("]\n}")]  # ends with the list's "["
    close = len("\n]") + indent  # the list's closing line
    for start in range(0, len(items), JSON_CHUNK_ITEMS):
        text = indented_json(items[start : start + JSON_CHUNK_ITEMS], indent, depth=1)
        yield ("," if start else "") + text[1:-close]  # its items without its brackets
    yield "\n" + " " * indent + "]\n}"


def _split_at_quotes(compact: str) -> list[str]:
    """Compact JSON text split at the quotes that open and close its strings: runs outside
    strings at even indexes, string contents at odd ones.

    A quote inside a string is escaped: it follows an odd number of backslashes (an escaped
    backslash is two), and only a string's content can end in a backslash. So the text is
    split at every quote (in C), the pieces ending in a backslash are found (in C), and only
    where such a piece ends in an odd number of them is it joined to the next.
    """
    pieces = compact.split('"')
    if '\\"' not in compact:
        return pieces
    ends = compress(count(), map(str.endswith, pieces, repeat("\\")))
    escaped = [i for i in ends if (len(pieces[i]) - len(pieces[i].rstrip("\\"))) % 2]
    if not escaped:
        return pieces
    first = last = escaped[0]
    out = pieces[:first]
    for i in escaped[1:]:
        if i != last + 1:  # the string that ends at piece last + 1 is whole
            out.append('"'.join(pieces[first : last + 2]))
            out += pieces[last + 2 : i]
            first = i
        last = i
    out.append('"'.join(pieces[first : last + 2]))
    out += pieces[last + 2 :]
    return out


class _Runs(dict[tuple[str, int], str]):
    """Each (run, depth) indented on first use (:func:`_indent_run`), then looked up."""

    def __init__(self, indent: int) -> None:
        super().__init__()
        self.indent = indent

    def __missing__(self, key: tuple[str, int]) -> str:
        self[key] = spaced = _indent_run(*key, self.indent)
        return spaced


def _depth_step(run: str) -> int:
    """How a run of compact JSON outside strings changes the depth of nesting."""
    return run.count("[") + run.count("{") - run.count("]") - run.count("}")


def _indent_run(run: str, depth: int, indent: int) -> str:
    """A run of compact JSON outside strings, starting at ``depth``, as ``json.dumps``
    writes it with ``indent``."""

    def spaced(token: re.Match[str]) -> str:
        nonlocal depth
        text = token.group()
        if len(text) == 2:
            return text
        if text == ",":
            return ",\n" + " " * (indent * depth)
        if text == ":":
            return ": "
        if text in "[{":
            depth += 1
            return text + "\n" + " " * (indent * depth)
        depth -= 1
        return "\n" + " " * (indent * depth) + text

    return _STRUCTURE.sub(spaced, run)
