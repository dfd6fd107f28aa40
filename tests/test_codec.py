"""Canonical CBOR payloads and JSON lines: official vectors and lossless text."""

from __future__ import annotations

import contextlib
import enum
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail import codec
from agenttrail.codec import (
    MAX_DEPTH,
    decode_payload,
    encode_payload,
    indented_json,
    indented_json_chunks,
    json_line,
    normalize_timestamp,
    timestamp_from_nanos,
)
from agenttrail.errors import PayloadError
from tests.conftest import HAS_SHARED, VECTORS

# RFC 8949 Appendix A examples, read in place: ../shared/vectors/cbor/appendix_a.json
# (cbor/test-vectors at 42d0e6e, see ../shared/vectors/cbor/SOURCE).
_APPENDIX_A = json.loads((VECTORS / "cbor" / "appendix_a.json").read_text()) if HAS_SHARED else []


def _json_shaped(value: object) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_shaped(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_shaped(v) for v in value)
    return value is None or isinstance(value, str | int | float | bool)


_CANONICAL = [
    v for v in _APPENDIX_A if v.get("roundtrip") and "decoded" in v and _json_shaped(v["decoded"])
]


@pytest.mark.parametrize("vector", _CANONICAL, ids=lambda v: v["hex"][:24])
def test_appendix_a_values_encode_to_the_rfc_bytes(vector: dict[str, object]) -> None:
    # The payload wraps the value as {"v": value}: a1 61 76 is the map head and key "v".
    encoded = encode_payload({"v": vector["decoded"]})
    assert encoded.hex() == "a16176" + str(vector["hex"])
    assert decode_payload(encoded) == {"v": vector["decoded"]}


def test_enough_appendix_a_vectors_apply() -> None:
    # Guard against the filter above silently skipping the file (59 have a decoded value).
    assert len(_CANONICAL) >= 40


@given(st.text(st.characters(codec=None, categories=None)))
def test_any_python_str_reads_back_equal(text: str) -> None:
    payload = {"type": "message", "role": "user", "content": text, text: [text]}
    assert decode_payload(encode_payload(payload)) == payload
    assert json.loads(json_line(payload)) == payload
    json_line(payload).encode("utf-8")  # the JSON form is always valid UTF-8


def test_lone_surrogates_use_the_documented_tag() -> None:
    encoded = encode_payload({"t": "a\udc81"})
    # docs/log-format.md: tag 1096046419 = 0x41545753 (da 41545753) around WTF-8 bytes.
    assert encoded.hex() == "a16174" + "da41545753" + "44" + "61edb281"
    assert json_line({"t": "a\udc81"}) == '{"t":"a\\udc81"}'


def test_refusals_name_the_path() -> None:
    with pytest.raises(PayloadError, match=r"payload\.a\[1\]\.b: inf"):
        encode_payload({"a": [0, {"b": float("inf")}]})
    deep: dict[str, object] = {}
    node = deep
    for _ in range(300):
        node["x"] = {}
        node = node["x"]  # type: ignore[assignment]
    with pytest.raises(PayloadError, match="deeper than"):
        encode_payload(deep)


@pytest.mark.parametrize(
    ("given_value", "expected"),
    [
        ("2026-02-10T21:11:56.846Z", "2026-02-10T21:11:56.846000Z"),
        ("2025-05-12T20:27:36-04:00", "2025-05-13T00:27:36.000000Z"),
        ("2026-06-24 10:00:00", "2026-06-24T10:00:00.000000Z"),
        (1731368634, "2024-11-11T23:43:54.000000Z"),
    ],
)
def test_timestamps_normalise_to_utc_microseconds(given_value: object, expected: str) -> None:
    assert normalize_timestamp(given_value) == expected  # type: ignore[arg-type]


@given(st.integers(min_value=1, max_value=2**64 - 1))
def test_nanosecond_timestamps_equal_the_datetime_route(nanos: int) -> None:
    # the oracle: the float seconds through datetime.fromtimestamp, as OTLP times were read
    assert timestamp_from_nanos(nanos) == normalize_timestamp(nanos / 1e9)


@pytest.mark.parametrize("second", [0, 1_733_300_000, 2**33])
def test_nanosecond_timestamps_round_ties_as_datetime_does(second: int) -> None:
    # half a microsecond after each microsecond, and the carry into the next second
    ties = [second * 10**9 + u * 1000 + 500 for u in range(0, 1_000_000, 997)]
    carries = [second * 10**9 + 999_999_000 + d for d in range(0, 1000, 7)]
    for nanos in [n for n in ties + carries if n]:
        assert timestamp_from_nanos(nanos) == normalize_timestamp(nanos / 1e9), nanos


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec=None, categories=None)),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(st.characters(codec=None, categories=None), max_size=30), children, max_size=5
        )
    ),
    max_leaves=25,
)


_PATHS = pytest.mark.parametrize("path", ["c", "python"])
"""Run a test with codec's C extensions (``agenttrail._cbor``, ``agenttrail._indent``) and
with its Python paths alone."""


@contextmanager
def _codec_path(path: str, extension: str) -> Iterator[None]:
    """Run codec on ``path`` (see :data:`_PATHS`) for what its C ``extension`` does (the
    name of codec's module attribute); CI (``AGENTTRAIL_REQUIRE_SPEEDUPS``) fails when the
    extension was not built."""
    if path == "c" and getattr(codec, extension) is None:
        if os.environ.get("AGENTTRAIL_REQUIRE_SPEEDUPS"):
            pytest.fail(f"agenttrail.{extension} was not built (a C compiler, Python's headers)")
        pytest.skip(f"agenttrail.{extension} was not built; codec runs in Python only")
    with pytest.MonkeyPatch.context() as patch:
        if path == "python":
            patch.setattr(codec, extension, None)
        yield


def _encoder(path: str) -> contextlib.AbstractContextManager[None]:
    """Encode payloads on ``path`` (:func:`_codec_path` of ``agenttrail._cbor``)."""
    return _codec_path(path, "_cbor")


def _indenter(path: str) -> contextlib.AbstractContextManager[None]:
    """Indent JSON text on ``path`` (:func:`_codec_path` of ``agenttrail._indent``)."""
    return _codec_path(path, "_indent")


@_PATHS
@given(payload=st.dictionaries(st.text(max_size=30), _json_values, max_size=6))
def test_encoding_equals_cbor2_canonical_mode(path: str, payload: dict[str, object]) -> None:
    # The oracle is cbor2's own canonical encoder (RFC 8949 §4.2); ours only gets there faster.
    try:
        expected = cbor2.dumps(payload, canonical=True)
    except UnicodeEncodeError:
        expected = None  # lone surrogates: our tagged escape instead, tested above
    with _encoder(path):
        if expected is not None:
            assert encode_payload(payload) == expected
        assert decode_payload(encode_payload(payload)) == payload


_EDGES: list[object] = [
    *(2**k + d for k in (7, 8, 15, 16, 31, 32, 63, 64) for d in (-1, 0, 1)),
    *(-(2**k) + d for k in (7, 8, 15, 16, 31, 32, 63, 64) for d in (-1, 0, 1)),
    0.0,
    -0.0,
    5.960464477539063e-08,
    2**-25,
    6.1e-05,
    65504.0,
    65505.0,
    65520.0,
    1.401298464324817e-45,
    3.4028234663852886e38,
    3.4028235677973366e38,
    1e-320,
    1e300,
    0.1,
    "",
    "é",
    "\u2028",
    "😀" * 70,
    "a" * 23,
    "a" * 24,
    "a" * 255,
    "a" * 256,
    "a" * 65536,
]
"""Values at the edges of each head width (RFC 8949 §3), of 64 bits, of each float
precision (half subnormals and overflow included), and texts of each width."""


@_PATHS
def test_edge_values_encode_as_cbor2_canonical_mode(path: str) -> None:
    many = {chr(0x61 + i % 26) * (1 + i // 26) + ("é" if i % 3 else ""): i for i in range(70)}
    listed = {"k": [many, [many] * 3, list(range(30))], "é": {"z": 1, "yy": 2, "x": 3}}
    with _encoder(path):
        for value in _EDGES:
            expected = cbor2.dumps({"v": value}, canonical=True)
            assert encode_payload({"v": value}) == expected, value
        assert encode_payload(listed) == cbor2.dumps(listed, canonical=True)


class _Kind(enum.IntEnum):
    ONE = 1


@_PATHS
@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"a": (1, 2)}, r"payload\.a: a tuple"),
        ({"a": [_Kind.ONE]}, r"payload\.a\[0\]: a _Kind"),
        ({"a": {1: 2}}, r"payload\.a: key 1 is not text"),
        ({"a": [0, {"b": float("nan")}]}, r"payload\.a\[1\]\.b: nan"),
        ([1], "must be a mapping, not list"),
    ],
)
def test_both_paths_refuse_alike(path: str, payload: object, message: str) -> None:
    with _encoder(path), pytest.raises(PayloadError, match=message):
        encode_payload(payload)


@_PATHS
def test_nesting_is_refused_at_the_same_depth(path: str) -> None:
    def nested(below: int) -> dict[str, object]:
        """A payload with ``below`` containers under its top map, maps and lists in turn."""
        value: Any = {}
        for level in range(below - 1):
            value = {"x": value} if level % 2 else [value]
        return {"top": value}

    with _encoder(path):
        deepest = nested(MAX_DEPTH - 1)
        assert encode_payload(deepest) == cbor2.dumps(deepest, canonical=True)
        with pytest.raises(PayloadError, match="deeper than"):
            encode_payload(nested(MAX_DEPTH))


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.sampled_from([*'ab"\\,:[]{} \n', "é", "😀", "\u2028"])),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=25,
)


@_PATHS
@given(_JSON, st.integers(0, 4))
def test_indented_json_is_what_the_standard_library_writes(
    path: str, value: object, indent: int
) -> None:
    # the standard library's own indenting encoder is the oracle
    expected = json.dumps(value, ensure_ascii=False, indent=indent, allow_nan=False)
    with _indenter(path):
        assert indented_json(value, indent) == expected


@_PATHS
@given(
    st.dictionaries(st.text(max_size=4), _JSON, max_size=3),
    st.sampled_from(["messages", "", '"']) | st.text(max_size=4),
    st.lists(_JSON, max_size=9),
    st.integers(0, 4),
    st.integers(1, 4),
)
def test_indented_json_in_chunks_is_what_the_standard_library_writes(
    path: str, head: dict[str, object], last: str, items: list[object], indent: int, chunk: int
) -> None:
    # a body whose last member is a long list (a replay's messages), written a few items
    # at a time: the pieces joined are the standard library's text of the whole
    value = {**{k: v for k, v in head.items() if k != last}, last: items}
    expected = json.dumps(value, ensure_ascii=False, indent=indent, allow_nan=False)
    with _indenter(path), pytest.MonkeyPatch.context() as patch:
        patch.setattr(codec, "JSON_CHUNK_ITEMS", chunk)
        pieces = list(indented_json_chunks(value, indent))
    assert "".join(pieces) == expected
    assert len(pieces) == (3 + (len(items) - 1) // chunk if items else 1)


@_PATHS
def test_indented_json_of_text_holding_escaped_quotes_and_backslashes(path: str) -> None:
    # indenting splits the text at every quote and joins again where a quote was escaped:
    # runs of backslashes before quotes, quotes next to each other, structure characters
    # in strings and long strings must still come out as the standard library writes them
    value = {
        "a\x00": ["\x00\x01", '\\"', '\\\\"', "\\", '"', "x\\", "[{,:}]", "", {}, []],
        '\\"\\': ['\\"\\"', '""\\\\\\"', "\\" * 7, '\\\\"' * 3, {'"': "\\"}],
        "k" * 3000: [{"n": 12, "f": 1.5e300, "t": True, "z": None, "s": '"' * 500}] * 3,
    }
    for indent in (0, 1, 2, 4):
        expected = json.dumps(value, ensure_ascii=False, indent=indent, allow_nan=False)
        with _indenter(path):
            assert indented_json(value, indent) == expected


def test_the_c_indent_refuses_text_left_open_and_indentation_too_long() -> None:
    # what codec never hands it, but a caller of the extension could: an error, not a text
    # (nor a text wrong by an overflow, nor a loop over 2**62 spaces before one)
    with _indenter("c"):
        for text in ('"open', '"\\"', "[1,2", "1]", '{"a":1}}', "]["):
            with pytest.raises(ValueError, match="not compact JSON text"):
                codec._indent.indent(text, 2, 0)
        for width, depth in ((3, 2**62), (2**62, 2), (0, 2**63 - 1), (2**31, 2**31)):
            with pytest.raises(OverflowError, match="too"):
                codec._indent.indent("[[1]]", width, depth)


@_PATHS
@pytest.mark.parametrize(("indent", "depth"), [(-1, 0), (-3, 2)])
def test_an_indent_below_zero_indents_as_python_does(path: str, indent: int, depth: int) -> None:
    # json.dumps(indent=-1) breaks lines with no spaces (" " * -1); both paths do the same
    value = {"a": [1, {"b": []}], "c": "d"}
    expected = json.dumps(value, ensure_ascii=False, indent=indent).replace(
        "\n", "\n" + " " * (indent * depth)
    )
    with _indenter(path):
        assert indented_json(value, indent, depth) == expected
