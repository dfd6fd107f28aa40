"""Record hashes: RFC 8785 canonical JSON (official vectors), I-JSON refusals, envelope specs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from agenttrail.codec import canonical_json
from agenttrail.errors import InputError, NotIJSON
from agenttrail.evidence.envelopes import (
    DEFAULT_SPEC,
    EnvelopeSpec,
    check_envelope,
    parse_envelope,
    record_hash,
)
from tests.conftest import VECTORS

# cyberphone/json-canonicalization testdata at 19d51d7 (the vectors' jcs/SOURCE, tests/conftest.py
# VECTORS):
# input/*.json canonicalises to exactly output/*.json.
_JCS = sorted((VECTORS / "jcs" / "input").glob("*.json"))


@pytest.mark.parametrize("path", _JCS, ids=lambda p: p.stem)
def test_the_official_jcs_vectors_pass(path: Path) -> None:
    value = json.loads(path.read_text(encoding="utf-8"))
    expected = (VECTORS / "jcs" / "output" / path.name).read_bytes()
    assert canonical_json(value) == expected
    hex_form = (VECTORS / "jcs" / "outhex" / path.with_suffix(".txt").name).read_text()
    assert canonical_json(value).hex() == "".join(hex_form.split()).lower()


def test_all_six_vector_files_are_read() -> None:
    assert [p.stem for p in _JCS] == [
        "arrays",
        "french",
        "structures",
        "unicode",
        "values",
        "weird",
    ]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"outputs": float("nan")}, "not a JSON number"),
        ({"outputs": float("inf")}, "not a JSON number"),
        ({"outputs": 2**53}, "beyond"),
        ({"outputs": -(2**53)}, "beyond"),
        ({"outputs": "a\udc81"}, "lone surrogate"),
        ({"outputs": (1, 2)}, "not JSON"),
    ],
)
def test_material_that_is_not_ijson_is_refused(value: object, says: str) -> None:
    with pytest.raises(NotIJSON, match=says):
        canonical_json(value)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"model": "m", "model": "n"}', "duplicate key 'model'"),
        ('{"outputs": NaN}', "NaN"),
        ('{"outputs": -Infinity}', "-Infinity"),
    ],
)
def test_envelope_text_that_is_not_ijson_is_refused(text: str, says: str) -> None:
    with pytest.raises(NotIJSON, match=says):
        parse_envelope(text)


def _envelope(**extra: object) -> dict[str, object]:
    body: dict[str, object] = {
        "model": "mortgage",
        "specVersion": "2.1",
        "inputs": {"principal": 300000, "rate": 0.0525, "years": 30},
        "outputs": {"monthly_payment": 1656.61},
        "sentinels": [],
        "assumptions": ["fixed rate"],
        "constants": {"months_per_year": 12},
    }
    body.update(extra)
    return body


def test_the_record_hash_is_sha256_of_jcs_of_the_four_fields() -> None:
    env = _envelope()
    # Independent oracle: the canonical bytes written out by hand (RFC 8785 §3.2: keys sorted
    # by UTF-16 code units, no spaces, shortest numbers).
    material = (
        b'{"inputs":{"principal":300000,"rate":0.0525,"years":30},"model":"mortgage",'
        b'"outputs":{"monthly_payment":1656.61},"specVersion":"2.1"}'
    )
    assert record_hash(env) == hashlib.sha256(material).hexdigest()


def test_statuses_from_the_envelope_itself() -> None:
    good = _envelope()
    digest = record_hash(good)
    verified = check_envelope(json.dumps({**good, "record": {"sha256": digest}}))
    assert verified is not None and (verified.status, verified.record_hash) == ("verified", digest)
    wrong = check_envelope(json.dumps({**good, "record": {"sha256": "0" * 64}}))
    assert wrong is not None and wrong.status == "mismatch" and digest in wrong.detail
    computed = check_envelope(json.dumps(good))
    assert computed is not None and (computed.status, computed.stated_hash) == ("computed", None)
    invalid = check_envelope('{"model":"m","specVersion":"1","inputs":{},"outputs":{"x":NaN}}')
    assert invalid is not None and (invalid.status, invalid.record_hash) == ("invalid", None)
    # JSON may open with whitespace (RFC 8259 §2): still the envelope, whatever the indent
    indented = check_envelope(" \r\n\t" + json.dumps(good, indent=2))
    assert indented is not None and indented.status == "computed"


@pytest.mark.parametrize(
    "output",
    ["The payment is $1,656.61.", "not json {", '{"model": "m"}', "[1, 2]", None, 42],
)
def test_a_result_that_is_not_an_envelope_is_an_ordinary_result(output: object) -> None:
    assert check_envelope(output) is None


def test_a_tool_can_have_its_own_envelope_spec() -> None:
    spec = EnvelopeSpec.from_mapping(
        {"hashed": ["engine", "result"], "required": ["engine", "result"], "stated": ["sig"]}
    )
    body = {"engine": "e1", "result": {"v": 1}, "noise": "ignored"}
    digest = hashlib.sha256(b'{"engine":"e1","result":{"v":1}}').hexdigest()
    check = check_envelope(json.dumps({**body, "sig": digest}), spec)
    assert check is not None and check.status == "verified"
    assert (
        check_envelope(json.dumps(body), DEFAULT_SPEC) is None
    )  # not the envelope of docs/specs.md
    assert EnvelopeSpec.from_json(spec.to_json()) == spec
    with pytest.raises(InputError, match="unknown key"):
        EnvelopeSpec.from_mapping({"hash": ["x"]})
