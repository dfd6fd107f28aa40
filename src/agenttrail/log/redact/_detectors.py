"""The built-in detectors: compiled regular expressions, one per kind of secret.

Each detector names its kind (the word a marker carries: ``[REDACTED:openai-key:…]``) and a
pattern whose ``secret`` group, when it has one, is the part replaced (a bearer token's token,
a connection string's password); otherwise the whole match is. The prefixes and lengths are
the providers' own (docs/redaction.md lists each with its source). Measured against
detect-secrets in ``bench/redact.py``; why these and not that library: docs/redaction.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "BUILTIN_DETECTORS",
    "DEFAULT_FIELDS",
    "FIELD_KIND",
    "MARKER",
    "Detector",
    "field_detector",
    "normal_field",
    "scan",
]


@dataclass(frozen=True)
class Detector:
    """One kind of secret found in text."""

    kind: str
    """The marker's kind: lower case, digits and ``-`` (``openai-key``, ``jwt``)."""
    pattern: re.Pattern[str]
    """What it matches; the ``secret`` group, when present, is the part replaced."""


FIELD_KIND = "field"
"""The kind of :func:`field_detector`; its markers name the field instead
(``[REDACTED:aws_secret_access_key:…]``)."""

MARKER = re.compile(r"\[REDACTED:[a-z0-9_.-]+:[0-9a-f]{8}\]")
"""A marker already written (a log's own export imported again is not redacted twice)."""

_B = r"(?<![A-Za-z0-9_-])"
"""Not in the middle of a longer token (``risk-…`` is no OpenAI key)."""
_E = r"(?![A-Za-z0-9_-])"


def _d(kind: str, pattern: str, flags: int = 0) -> Detector:
    return Detector(kind, re.compile(pattern, flags))


BUILTIN_DETECTORS: tuple[Detector, ...] = (
    # Anthropic before OpenAI: both begin with sk-, the more specific one wins a tie.
    _d("anthropic-key", _B + r"sk-ant-[A-Za-z0-9_-]{20,}"),
    _d("openai-key", _B + r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}"),
    _d("aws-access-key-id", r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"),
    _d("github-token", _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    _d("google-api-key", _B + r"AIza[0-9A-Za-z_-]{35}" + _E),
    _d("slack-token", _B + r"xox[abposr]-[A-Za-z0-9-]{10,}"),
    _d("stripe-key", _B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    _d(
        "private-key",
        r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        r".*?-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----",
        re.DOTALL,
    ),
    _d("jwt", _B + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    _d("bearer-token", r"\b[Bb]earer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
    _d("basic-auth", r"\bBasic\s+(?P<secret>[A-Za-z0-9+/]{12,}={0,2})"),
    # scheme://user:password@host (RFC 3986 userinfo): the password only.
    _d("url-password", r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@\"']+:(?P<secret>[^\s/@\"']+)@"),
    # ?api_key=…&sig=…: the value of a query parameter whose name says it is a credential.
    _d(
        "url-key",
        r"[?&](?:[A-Za-z0-9_-]*[_-])?(?:api[_-]?key|key|token|access[_-]?token|sig|signature"
        r"|secret|password|passwd|pwd|auth|credential|security[_-]token)"
        r"=(?P<secret>[^&#\s\"'<>]+)",
        re.IGNORECASE,
    ),
)
"""The detectors every redacting store runs (docs/redaction.md, What is detected)."""

DEFAULT_FIELDS: tuple[str, ...] = (
    "api_key",
    "apikey",
    "authorization",
    "aws_secret_access_key",
    "secret_access_key",
    "session_token",
    "security_token",
    "access_token",
    "refresh_token",
    "id_token",
    "password",
    "passwd",
    "secret",
    "client_secret",
    "private_key",
    "credentials",
    "cookie",
    "set_cookie",
)
"""Field names whose values are secrets, wherever they appear (:func:`normal_field`: case,
``-`` and a prefix such as ``x_``, ``openai_`` or ``db_`` do not matter)."""


def normal_field(name: str) -> str:
    """A field name as field rules compare it: snake case (``SessionToken`` and
    ``session-token`` are ``session_token``: AWS STS answers in camel case)."""
    return _CAMEL.sub("_", name).lower().replace("-", "_").replace(" ", "_")


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def field_detector(names: Iterable[str]) -> Detector | None:
    """A detector of ``name: value`` and ``name=value`` written in text (JSON inside a string,
    YAML, an environment file, a Python repr) for the field ``names``; the value is the secret.

    A name matches with any prefix joined by ``_`` or ``-`` (``AWS_SECRET_ACCESS_KEY``,
    ``x-api-key``), as :func:`matches_field` does for the keys of a mapping."""
    alternatives = sorted({re.escape(normal_field(n)).replace("_", "[_-]?") for n in names})
    if not alternatives:
        return None
    # A prefix ends at a separator or where camel case starts a word (AwsSessionToken).
    prefix = r"(?:[A-Za-z0-9]*[_-]|[A-Za-z0-9]*(?-i:(?<=[a-z0-9])(?=[A-Z])))?"
    name = rf"(?<![A-Za-z0-9])(?P<name>{prefix}(?:{'|'.join(alternatives)}))"
    quote = r"\\{0,3}[\"']"
    value = (
        r"\\{0,3}\"(?P<secret>(?:[^\"\\]|\\(?!\\{0,2}\"))+)"  # "…", or \"…\" nested once or twice
        r"|'(?P<secret2>[^'\\]+)'"
        r"|(?P<secret3>[^\s\"',;&{}\[\]\\][^\s\"',;&}\]\\]*)"  # not an object or a list
    )
    pattern = rf"(?:{quote})?{name}(?:{quote})?\s*[:=]\s*(?:{value})"
    return Detector(FIELD_KIND, re.compile(pattern, re.IGNORECASE))


def scan(text: str, detectors: Sequence[Detector]) -> list[tuple[int, int, str]]:
    """The secrets in ``text``: ``(start, end, kind)`` spans, in order, never overlapping.

    Where two detectors' spans overlap, the one starting first wins, and of two starting
    together the one listed first (the more specific)."""
    # Markers already written (an export of a redacting log, imported back) are kept whole.
    found = [(m.start(), -1, m.end(), "") for m in MARKER.finditer(text)] if "[RED" in text else []
    for rank, detector in enumerate(detectors):
        for match in detector.pattern.finditer(text):
            start, end = _secret_span(match)
            if end <= start:
                continue
            kind = detector.kind
            if kind == FIELD_KIND:
                kind = normal_field(match.group("name"))
            found.append((start, rank, end, kind))
    if not found:
        return []
    found.sort()
    spans: list[tuple[int, int, str]] = []
    last_end = -1
    for start, _, end, kind in found:
        if start >= last_end:
            if kind:
                spans.append((start, end, kind))
            last_end = end
    return spans


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    groups = match.re.groupindex
    for name in ("secret", "secret2", "secret3"):
        if name in groups and match.group(name) is not None:
            return match.span(name)
    return match.span()
