"""Response envelopes and their record hashes (docs/specs.md, Tool-call traces).

A tool such as ``run_model`` answers with an envelope::

    {"model": "mortgage", "specVersion": "2.1", "inputs": {...echoed...}, "outputs": {...},
     "sentinels": [...], "assumptions": [...], "constants": {...}, "record": {"sha256": "…"}}

Its **record hash** is the SHA-256 of the RFC 8785 canonical JSON of ``{model, specVersion,
inputs, outputs}`` (docs/evidence.md). The material hashed must be I-JSON (RFC 7493): NaN
and infinities, integers beyond ±(2^53−1), lone surrogates and duplicate keys are refused with
:class:`NotIJSON`, never coerced. Which fields are hashed, which must be present, and where the
envelope states its own hash are an :class:`EnvelopeSpec`, set per tool; the default is the
trace spec's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from agenttrail.codec import canonical_json, json_line
from agenttrail.errors import InputError, NotIJSON, NotJSON

__all__ = [
    "DEFAULT_SPEC",
    "EnvelopeCheck",
    "EnvelopeSpec",
    "check_envelope",
    "envelope_bytes",
    "is_envelope",
    "parse_envelope",
    "record_hash",
]


@dataclass(frozen=True)
class EnvelopeSpec:
    """What makes a tool result an envelope, what its record hash covers, where it states it."""

    hashed: tuple[str, ...] = ("model", "specVersion", "inputs", "outputs")
    """Top-level fields whose canonical JSON is hashed, in this order of presence."""
    required: tuple[str, ...] = ("model", "specVersion", "inputs", "outputs")
    """Fields a JSON object must have to be taken as an envelope at all."""
    stated: tuple[str, ...] = ("record", "sha256")
    """Path of the hash the envelope states about itself."""

    def to_json(self) -> str:
        """The spec as one line of JSON (kept with every trace row)."""
        return json_line({k: list(v) for k, v in asdict(self).items()})

    @classmethod
    def from_json(cls, text: str) -> EnvelopeSpec:
        """The spec written by :meth:`to_json`."""
        value = json.loads(text)
        if not isinstance(value, dict):
            raise InputError("envelope spec: expected a JSON object")
        return cls.from_mapping(value)

    @classmethod
    def from_mapping(cls, value: dict[str, Any]) -> EnvelopeSpec:
        """A spec from ``{"hashed": [...], "required": [...], "stated": [...]}``; missing keys
        take the default spec's values.

        Raises:
            InputError: a key is unknown or a value is not a list of strings.
        """
        fields = {}
        for key, item in value.items():
            if key not in ("hashed", "required", "stated"):
                raise InputError(f"envelope spec: unknown key {key!r}")
            if not isinstance(item, list) or not all(isinstance(x, str) for x in item):
                raise InputError(f"envelope spec: {key!r} must be a list of field names")
            fields[key] = tuple(item)
        return cls(**fields)


DEFAULT_SPEC = EnvelopeSpec()
"""The trace spec's envelope: ``{model, specVersion, inputs, outputs}``, ``record.sha256``."""


@dataclass(frozen=True)
class EnvelopeCheck:
    """The record hash of an envelope, checked against the one it states."""

    status: str
    """``verified`` (stated = computed), ``mismatch`` (stated ≠ computed), ``computed`` (the
    envelope states none; ours is kept) or ``invalid`` (not I-JSON: no hash)."""
    record_hash: str | None
    """Our SHA-256, 64 hex digits; ``None`` when invalid."""
    stated_hash: str | None
    """The hash the envelope states, if any."""
    detail: str = ""
    """Why, for ``mismatch`` and ``invalid``."""


def parse_envelope(text: str) -> Any:
    """Parse JSON text as I-JSON: duplicate keys, NaN and infinities are refused.

    Raises:
        NotJSON: the text is not JSON at all.
        NotIJSON: the text is JSON that is not I-JSON (RFC 7493 §2.3: unique names).
    """

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in pairs:
            if key in out:
                raise NotIJSON(f"duplicate key {key!r} is not I-JSON (RFC 7493 §2.3)")
            out[key] = item
        return out

    def no_constant(name: str) -> Any:
        raise NotIJSON(f"{name} is not a JSON number (RFC 7493 §2.2)")

    try:
        return json.loads(text, object_pairs_hook=unique, parse_constant=no_constant)
    except RecursionError:
        raise NotJSON("nested too deeply to read") from None
    except ValueError as e:  # JSONDecodeError, or an integer longer than Python converts
        raise NotJSON(f"not JSON: {e}") from None


def envelope_bytes(output: Any) -> bytes:
    """The bytes a tool result's envelope is kept as: the text as returned, UTF-8 (with lone
    surrogates kept by ``surrogatepass``), or compact JSON when the result was structured."""
    text = output if isinstance(output, str) else json_line(output)
    return text.encode("utf-8", "surrogatepass")


def _get(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def is_envelope(value: Any, spec: EnvelopeSpec = DEFAULT_SPEC) -> bool:
    """True for a JSON object holding every field ``spec`` requires."""
    return isinstance(value, dict) and all(key in value for key in spec.required)


def record_hash(envelope: dict[str, Any], spec: EnvelopeSpec = DEFAULT_SPEC) -> str:
    """SHA-256 (hex) of the RFC 8785 canonical JSON of the spec's hashed fields.

    Raises:
        NotIJSON: the hashed material is not I-JSON.
    """
    material = {key: envelope[key] for key in spec.hashed if key in envelope}
    return hashlib.sha256(canonical_json(material)).hexdigest()


def check_envelope(output: Any, spec: EnvelopeSpec = DEFAULT_SPEC) -> EnvelopeCheck | None:
    """Check a tool result's output as an envelope; ``None`` when it is not one.

    A result that is not JSON, or JSON without the spec's required fields, is an ordinary
    result: no envelope, no error. A stated hash that differs from ours is ``mismatch``;
    material that is not I-JSON is ``invalid`` (refused, never coerced).
    """
    if isinstance(output, str):
        if output.lstrip()[:1] != "{":  # no JSON object: spares most results a failed parse
            return None
        try:
            value = parse_envelope(output)
        except NotJSON:
            return None
        except NotIJSON as e:
            loose = _loose(output)
            if not is_envelope(loose, spec):
                return None
            return EnvelopeCheck("invalid", None, _stated(loose, spec), str(e))
    else:
        value = output
    if not is_envelope(value, spec):
        return None
    stated = _stated(value, spec)
    try:
        ours = record_hash(value, spec)
    except NotIJSON as e:
        return EnvelopeCheck("invalid", None, stated, str(e))
    if stated is None:
        return EnvelopeCheck("computed", ours, None)
    if stated.lower() == ours:
        return EnvelopeCheck("verified", ours, stated)
    return EnvelopeCheck("mismatch", ours, stated, f"stated {stated}, computed {ours}")


def _stated(value: Any, spec: EnvelopeSpec) -> str | None:
    stated = _get(value, spec.stated)
    return stated if isinstance(stated, str) else None


def _loose(text: str) -> Any:
    """Parse without the I-JSON checks, only to tell whether refused text was an envelope."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None
