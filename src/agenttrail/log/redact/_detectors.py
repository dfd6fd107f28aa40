"""The built-in detectors: compiled regular expressions, one per kind of secret.

Each detector names its kind (the word a marker carries: ``[REDACTED:openai-key:…]``) and a
pattern whose ``secret`` group, when it has one, is the part replaced (a bearer token's token,
a connection string's password); otherwise the whole match is. The prefixes and lengths are
the providers' own (docs/redaction.md lists each with its source). Measured against
detect-secrets in ``bench/redact.py``; why these and not that library: docs/redaction.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ahocorasick_rs import AhoCorasick, BytesAhoCorasick

__all__ = [
    "BUILTIN_DETECTORS",
    "DEFAULT_FIELDS",
    "MARKER",
    "Detector",
    "FieldNames",
    "Gate",
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
    anchors: tuple[str, ...] = ()
    """Text one of which every match holds, lower case: the pattern runs only on a text
    holding one (:class:`Gate`). Empty: it runs on every text."""


MARKER = re.compile(r"\[REDACTED:[a-z0-9_.-]+:[0-9a-f]{8}\]")
"""A marker already written (a log's own export imported again is not redacted twice)."""


def _alone(width: int) -> str:
    """After a literal of ``width`` characters at a pattern's start: the literal does not
    continue a longer token (``risk-…`` holds no OpenAI key). A lookbehind *after* the
    literal, not before it: a pattern that starts with a literal is searched for that literal
    first, some fifty times faster over a long text (bench/redact.py, the base64 case)."""
    return _not_after(r"[A-Za-z0-9_-]", width)


def _not_after(token: str, width: int) -> str:
    """Not after a ``token`` character, ``width`` characters back — unless that character
    ends an escape (``\\n``, ``\\t``): JSON inside a string has a secret on a new line as
    ``…\\nghp_…``."""
    return rf"(?<!(?<!\\){token}.{{{width}}})"


_E = r"(?![A-Za-z0-9_-])"


def _d(kind: str, anchors: tuple[str, ...], pattern: str, flags: int = 0) -> Detector:
    return Detector(kind, re.compile(pattern, flags), anchors)


BUILTIN_DETECTORS: tuple[Detector, ...] = (
    # Anthropic before OpenAI: both begin with sk-, the more specific one wins a tie.
    _d("anthropic-key", ("sk-ant-",), r"sk-ant-" + _alone(7) + r"[A-Za-z0-9_-]{20,}"),
    _d(
        "openai-key",
        ("sk-",),
        r"sk-" + _alone(3) + r"(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}",
    ),
    _d(
        "aws-access-key-id",
        ("akia", "asia", "abia", "acca"),
        r"(?:AKIA|ASIA|ABIA|ACCA)" + _not_after("[A-Z0-9]", 4) + r"[A-Z0-9]{16}(?![A-Z0-9])",
    ),
    _d(
        "github-token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"gh[pousr]_" + _alone(4) + r"[A-Za-z0-9]{36,}"
        r"|github_pat_" + _alone(11) + r"[A-Za-z0-9_]{22,}",
    ),
    _d("google-api-key", ("aiza",), r"AIza" + _alone(4) + r"[0-9A-Za-z_-]{35}" + _E),
    _d("slack-token", ("xox",), r"xox[abposr]-" + _alone(5) + r"[A-Za-z0-9-]{10,}"),
    _d(
        "stripe-key",
        ("_live_", "_test_"),
        r"[sr]k_(?:live|test)_" + _alone(8) + r"[A-Za-z0-9]{16,}",
    ),
    _d(
        "private-key",
        ("private key",),
        r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        r".*?-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----",
        re.DOTALL,
    ),
    _d(
        "jwt",
        ("eyj",),
        r"eyJ" + _alone(3) + r"[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    ),
    _d(
        "bearer-token",
        ("bearer",),
        r"[Bb]earer" + _not_after("[A-Za-z0-9]", 6) + r"\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})",
    ),
    _d(
        "basic-auth",
        ("basic",),
        r"Basic" + _not_after("[A-Za-z0-9]", 5) + r"\s+(?P<secret>[A-Za-z0-9+/]{12,}={0,2})",
    ),
    # scheme://user:password@host (RFC 3986 userinfo): the password only.
    _d("url-password", ("://",), r"://[^\s/:@\"']+:(?P<secret>[^\s/@\"']+)@"),
    # ?api_key=…&sig=…: the value of a query parameter whose name says it is a credential.
    _d(
        "url-key",
        (
            *("key=", "token=", "sig=", "signature=", "secret="),
            *("password=", "passwd=", "pwd=", "auth=", "credential="),
        ),
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
    ``session-token`` are ``session_token``: AWS STS answers in camel case; an OpenTelemetry
    attribute's ``http.request.header.authorization`` ends in ``_authorization``)."""
    return _CAMEL.sub("_", name).lower().translate(_SEPARATORS)


_SEPARATORS = str.maketrans("-. ", "___")


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
"""Lower case for the anchors' letters only (ASCII), which keeps a text's length."""

_SURROGATE = re.compile("[\ud800-\udfff]")

_WORD = re.compile(r"[A-Za-z0-9_-]+")

_VALUE = re.compile(
    r"\\{0,3}[\"']?\s*[:=]\s*(?:"  # the name's closing quote, then : or =
    r"\\{0,3}\"(?P<secret>(?:[^\"\\]|\\(?!\\{0,2}\"))+)"  # "…", or \"…\" nested once or twice
    r"|'(?P<secret2>[^'\\]+)'"
    r"|(?P<secret3>[^\s\"',;&{}\[\]\\][^\s\"',;&}\]\\]*))"  # bare; not an object or a list
)
"""What follows a secret field's name written in text: ``": "value"``, ``=value``, ``: 'v'``."""


@dataclass(frozen=True)
class FieldNames:
    """Field names whose values are secrets: the keys of a mapping, and ``name: value`` or
    ``name=value`` written in text (JSON inside a string, YAML, an environment file).

    A name matches with any prefix joined by ``_`` or ``-`` or in camel case
    (``AWS_SECRET_ACCESS_KEY``, ``x-api-key``, ``SessionToken``): :meth:`kind`."""

    names: frozenset[str]
    """The names, as :func:`normal_field` gives them."""
    suffixes: tuple[str, ...]
    """``_name`` of each: a prefixed name ends with one."""
    anchors: tuple[str, ...]
    """Each name's longest word: a name is looked for in text only where that word is."""

    @classmethod
    def of(cls, names: Iterable[str]) -> FieldNames:
        """The rule for ``names`` (any case or separator)."""
        normal = frozenset(normal_field(n) for n in names)
        anchors = sorted({max(n.split("_"), key=len) for n in normal})
        return cls(normal, tuple(sorted("_" + n for n in normal)), tuple(anchors))

    def kind(self, name: str) -> str | None:
        """The marker kind of the field ``name`` (its :func:`normal_field` form) when its
        value is a secret, else ``None``."""
        normal = normal_field(name)
        if normal in self.names or normal.endswith(self.suffixes):
            return normal
        return None

    def spans(self, text: str, places: Iterable[int]) -> Iterator[tuple[int, int, str]]:
        """``(start, end, kind)`` of each value written after a secret field's name in
        ``text``, looked for where one of :attr:`anchors` was found (``places``, from
        :meth:`Gate.which`)."""
        seen: set[int] = set()
        for found in places:
            # The value first: most occurrences of a name's word are not followed by one.
            word = _WORD.match(text, found)
            value = _VALUE.match(text, word.end()) if word else None
            if word is None or value is None or word.end() in seen:
                continue
            seen.add(word.end())
            begin = found
            while begin and (text[begin - 1].isalnum() or text[begin - 1] in "_-"):
                if begin > 1 and text[begin - 2] == "\\":  # an escape: \\n, \\t
                    break
                begin -= 1
            kind = self.kind(text[begin : word.end()])
            if kind is not None:
                yield (*_secret_span(value), kind)


_FOLDS_TO_ASCII = ("\u0130".encode(), "\u212a".encode())
"""The UTF-8 bytes of the characters beyond ASCII whose lower case holds an ASCII letter
(LATIN CAPITAL LETTER I WITH DOT ABOVE, KELVIN SIGN; tests/log/test_redact.py finds them
all): where one is, bytes lowered miss an anchor that the text lowered holds."""


class Gate:
    """Which rules may match a text, in one pass over it: an Aho-Corasick automaton
    (ahocorasick-rs) of every anchor of every detector and field name. Most texts hold no
    anchor, and then no regular expression runs at all (bench/redact.py: 45 ``in`` tests
    cost ten times more)."""

    def __init__(self, detectors: Sequence[Detector], fields: FieldNames) -> None:
        self.fields = len(detectors)
        """The rank :meth:`which` gives the field names."""
        owners: dict[str, set[int]] = {}
        for rank, detector in enumerate(detectors):
            for anchor in detector.anchors:
                owners.setdefault(anchor, set()).add(rank)
        for anchor in fields.anchors:
            owners.setdefault(anchor, set()).add(self.fields)
        self._anchors = sorted(owners)
        self._owners = [frozenset(owners[a]) for a in self._anchors]
        self._automaton = AhoCorasick(self._anchors) if self._anchors else None
        self.always = frozenset(r for r, d in enumerate(detectors) if not d.anchors)
        """Ranks of the detectors without anchors (a user's patterns): they run on every text."""
        ascii_only = all(anchor.isascii() for anchor in self._anchors)
        self._bytes_automaton = (  # with the folds: where one is, the text must be looked at
            BytesAhoCorasick([a.encode() for a in self._anchors] + list(_FOLDS_TO_ASCII))
            if self._anchors and ascii_only
            else None
        )

    def may_match_bytes(self, data: bytes) -> bool:
        """False when no anchor is in the texts whose UTF-8 bytes ``data`` holds (a payload's
        CBOR: every text's bytes whole, keys too), as :meth:`which` would find none in them
        lowered; True when one may be. Bytes lower ASCII letters only, so this answers True
        whenever a character whose lower case is an ASCII letter is there (KELVIN SIGN,
        İ), and :meth:`which` is the only answer when an anchor is not ASCII (a user's field
        name) or a rule has none."""
        if self.always or (self._anchors and self._bytes_automaton is None):
            return True
        if self._bytes_automaton is None:
            return False
        return bool(self._bytes_automaton.find_matches_as_indexes(data.lower()))

    def which(self, lowered: str) -> tuple[set[int], list[int]]:
        """Ranks of the detectors (and :attr:`fields`) whose anchors ``lowered`` holds, with
        :attr:`always`; and where the field names' anchors are (offsets)."""
        ranks = set(self.always)
        places: list[int] = []
        if self._automaton is not None:
            try:
                matches = self._automaton.find_matches_as_indexes(lowered, overlapping=True)
            except UnicodeEncodeError:  # a lone surrogate (the log keeps them: log-format.md)
                safe = _SURROGATE.sub("?", lowered)
                matches = self._automaton.find_matches_as_indexes(safe, overlapping=True)
            for index, start, _ in matches:
                owners = self._owners[index]
                ranks |= owners
                if self.fields in owners:
                    places.append(start)
        return ranks, places


def scan(
    text: str, detectors: Sequence[Detector], fields: FieldNames, gate: Gate
) -> list[tuple[int, int, str]]:
    """The secrets in ``text``: ``(start, end, kind)`` spans, in order, never overlapping.

    Where two spans overlap, the one starting first wins, and of two starting together the
    detector listed first (the more specific; field names come last)."""
    lowered = text.lower()
    if len(lowered) != len(text):  # "İ".lower() is two characters: keep the offsets
        lowered = text.translate(_ASCII_LOWER)
    ranks, places = gate.which(lowered)
    if not ranks:
        return []
    # Markers already written (an export of a redacting log, imported back) are kept whole.
    found = (
        [(m.start(), -1, m.end(), "") for m in MARKER.finditer(text)] if "[red" in lowered else []
    )
    for rank in ranks:
        if rank == gate.fields:
            found += [(start, rank, end, kind) for start, end, kind in fields.spans(text, places)]
            continue
        detector = detectors[rank]
        for match in detector.pattern.finditer(text):
            start, end = _secret_span(match)
            if end > start:
                found.append((start, rank, end, detector.kind))
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
