"""Redaction: secrets replaced by markers before anything is appended to the log.

The log is append-only: a secret written once stays in every export, replay and backup. So
the store redacts every payload and every session it is given before it encodes them, on
every way in alike (the recorder, capture, the proxy, import, REST): it is the one place
all of them pass (docs/architecture.md, The flow). What is found (:mod:`._detectors`):
provider API keys, bearer and basic credentials, JWTs, PEM private keys, passwords in URLs,
credential query parameters, and the values of fields named like secrets, in any string at
any depth (JSON text inside a string too) — and the user's own rules (:class:`RedactRules`).

Each secret becomes ``[REDACTED:<kind>:<digest>]``, the digest being the first 8 hex digits
of HMAC-SHA-256 (RFC 2104) of the secret under a key kept in the log: the same secret gives
the same marker within a log, so occurrences can be told apart and matched without
disclosing it, and a payload redacted twice is redacted alike (idempotency keys hold). The
payload records what was redacted, never the value: a ``redactions`` list of
``{"kind", "path"}``. Docs: docs/redaction.md.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import logging
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, overload

from agenttrail.log.redact._config import (
    CONFIG_ENV,
    CONFIG_FILE,
    DEFAULT_RULES,
    REDACT_ENV,
    RedactRules,
    redact_rules,
)
from agenttrail.log.redact._detectors import (
    BUILTIN_DETECTORS,
    DEFAULT_FIELDS,
    MARKER,
    Detector,
    FieldNames,
    Gate,
    scan,
)
from agenttrail.model import NewEvent, NewSession

__all__ = [
    "BUILTIN_DETECTORS",
    "CONFIG_ENV",
    "CONFIG_FILE",
    "DEFAULT_FIELDS",
    "DEFAULT_RULES",
    "DIGEST_HEX",
    "REDACTIONS",
    "REDACT_ENV",
    "RedactRules",
    "Redactor",
    "SecretsFilter",
    "redact_rules",
    "redacted_text",
    "redacting_logger",
]

DIGEST_HEX = 8
"""Hex digits of a marker's digest: 32 bits tell a log's secrets apart (a clash among a few
thousand distinct secrets is unlikely) while giving a guesser with the log's key little to
confirm a guess against."""

REDACTIONS = "redactions"
"""The payload field (and session metadata key) listing what was redacted."""

_SESSION_TEXT = ("title", "agent", "user", "workspace")

PAYLOADS_PER_LOOK = 1024
"""Payloads :meth:`Redactor.may_change` looks through at once (their bytes joined, then
lowered: two copies of that many payloads in memory at a time)."""


class Redactor:
    """Applies :class:`RedactRules` to payloads and sessions, with a log's key.

    Args:
        rules: what to redact; ``rules.enabled`` False makes every method return its input.
        key: returns the log's redaction key (bytes), called once, at the first secret.

    Raises:
        InputError: a user pattern does not compile (when constructed).
    """

    def __init__(self, rules: RedactRules, key: Callable[[], bytes]) -> None:
        self.rules = rules
        self._key_source = key
        self._key: bytes | None = None
        detectors = list(BUILTIN_DETECTORS) if rules.builtin else []
        detectors += [Detector(kind, pattern) for kind, pattern in rules.compiled()]
        self._detectors = detectors
        self._fields = FieldNames.of(rules.all_fields())
        self._paths = _paths_pattern(rules.paths)
        self._gate = Gate(detectors, self._fields)

    def events(self, events: Sequence[NewEvent]) -> Sequence[NewEvent]:
        """``events`` with their payloads redacted (:meth:`payload`); the same objects when
        nothing is found."""
        if not self.rules.enabled:
            return events
        out = list(events)
        for index, event in enumerate(events):
            payload = self.payload(event.payload)
            if payload is not event.payload:
                out[index] = replace(event, payload=payload, data=None)  # stale bytes
        return out

    def payload(self, payload: dict[str, Any], data: bytes | None = None) -> dict[str, Any]:
        """``payload`` with every secret replaced by its marker and a ``redactions`` list of
        ``{"kind", "path"}`` (RFC 9535 JSON paths, dot notation where a name allows it)
        added to those already there; ``payload`` itself when nothing is found. ``data``:
        the payload's canonical CBOR when the caller has it (import), which the first look
        for a secret reads instead of the payload's ``repr``, about three times faster."""
        if not self.rules.enabled or not self._may_hold_secret(payload, data):
            return payload
        found: list[dict[str, str]] = []
        redacted = self._walk(payload, "$", found)
        if not found:
            return payload
        assert isinstance(redacted, dict)
        before = payload.get(REDACTIONS)
        redacted[REDACTIONS] = (before if isinstance(before, list) else []) + found
        return redacted

    def finds(self, payload: dict[str, Any], data: bytes | None = None) -> list[dict[str, str]]:
        """The secrets :meth:`payload` would redact in ``payload``, ``{"kind", "path"}`` each
        in its order (``[]`` for none), found without the log's key: the markers are not
        kept, so the key is neither read nor drawn (the importer's check of an export, inside
        the transaction that writes it)."""
        unkeyed = copy.copy(self)
        unkeyed._key = bytes(32)
        redacted = unkeyed.payload(payload, data)
        if redacted is payload:
            return []
        before = payload.get(REDACTIONS)  # payload() adds to a list, and replaces the rest
        found: list[dict[str, str]] = redacted[REDACTIONS]
        return found[len(before) if isinstance(before, list) else 0 :]

    def may_change(self, data: Sequence[bytes]) -> bool:
        """False when :meth:`payload` changes none of the payloads whose canonical CBOR is
        ``data`` (no rule's anchor is in any of them): the first look for a secret
        (:meth:`Gate.may_match_bytes`) over many payloads at a time, cheaper than one at a
        time for an import's many small ones. True when one of them may hold a secret
        (then :meth:`payload` tells which)."""
        if not self.rules.enabled:
            return False
        if self._paths is not None or self._gate.always:
            return True
        for start in range(0, len(data), PAYLOADS_PER_LOOK):
            # NUL between payloads: no anchor holds it, so none is found across two
            if self._gate.may_match_bytes(b"\0".join(data[start : start + PAYLOADS_PER_LOOK])):
                return True
        return False

    @overload
    def session(self, new: NewSession) -> NewSession: ...
    @overload
    def session(self, new: None) -> None: ...
    @overload
    def session(self, new: NewSession | None) -> NewSession | None: ...

    def session(self, new: NewSession | None) -> NewSession | None:
        """A session to create with its text fields and metadata redacted (``redactions``
        in its metadata); ``new`` itself when nothing is found, ``None`` for ``None``."""
        if new is None or not self.rules.enabled:
            return new
        found: list[dict[str, str]] = []
        changes: dict[str, Any] = {}
        for name in _SESSION_TEXT:
            value = getattr(new, name)
            if isinstance(value, str):
                text = self._text(value, f"$.{name}", found)
                if text is not value:
                    changes[name] = text
        metadata = self._walk(new.metadata, "$.metadata", found)
        if not found:
            return new
        assert isinstance(metadata, dict)
        metadata = dict(metadata)
        metadata[REDACTIONS] = found
        return replace(new, metadata=metadata, **changes)

    def marker(self, kind: str, secret: str) -> str:
        """``[REDACTED:<kind>:<digest>]`` for ``secret`` under the log's key."""
        if self._key is None:
            self._key = self._key_source()
        data = secret.encode("utf-8", "surrogatepass")
        digest = hmac.new(self._key, data, hashlib.sha256).hexdigest()[:DIGEST_HEX]
        return f"[REDACTED:{kind}:{digest}]"

    def _may_hold_secret(self, payload: dict[str, Any], data: bytes | None = None) -> bool:
        """False when no rule can match anywhere in ``payload`` (most payloads): the gate
        over its text, keys and values alike, before any walk. Over ``data``, its CBOR, when
        given (every text's bytes are there whole: :meth:`Gate.may_match_bytes`); else over
        its ``repr`` rather than JSON: it is three times cheaper, and the escapes of either
        (``\\n``, a quote) are in no anchor."""
        if self._paths is not None or self._gate.always:
            return True
        if data is not None:
            return self._gate.may_match_bytes(data)
        return bool(self._gate.which(repr(payload).lower())[0])

    # -- the walk ---------------------------------------------------------------------------

    def _walk(self, value: Any, path: str, found: list[dict[str, str]]) -> Any:
        """``value`` redacted; the same object when nothing in it is."""
        if isinstance(value, str):
            return self._text(value, path, found)
        if isinstance(value, dict):
            out: dict[Any, Any] | None = None
            for name, item in value.items():
                sub = _member(path, name)
                if self._paths is not None and self._paths.fullmatch(sub):
                    new = self._whole(item, "path", sub, found)
                elif isinstance(name, str) and (kind := self._fields.kind(name)):
                    new = self._whole(item, kind, sub, found)
                else:
                    new = self._walk(item, sub, found)
                if new is not item:
                    if out is None:
                        out = dict(value)
                    out[name] = new
            return value if out is None else out
        if isinstance(value, list):
            items: list[Any] | None = None
            for index, item in enumerate(value):
                sub = f"{path}[{index}]"
                if self._paths is not None and self._paths.fullmatch(sub):
                    new = self._whole(item, "path", sub, found)
                else:
                    new = self._walk(item, sub, found)
                if new is not item:
                    if items is None:
                        items = list(value)
                    items[index] = new
            return value if items is None else items
        return value

    def _whole(self, value: Any, kind: str, path: str, found: list[dict[str, str]]) -> Any:
        """A secret field's value replaced whole (text, or the JSON text of anything else);
        an empty value, ``null``, a boolean (``"secret": false``) or a marker already written
        is kept."""
        if value is None or value == "" or isinstance(value, bool):
            return value
        if isinstance(value, str) and MARKER.fullmatch(value):
            return value
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=repr)
        found.append({"kind": kind, "path": path})
        return self.marker(kind, text)

    def _text(self, text: str, path: str, found: list[dict[str, str]]) -> str:
        spans = scan(text, self._detectors, self._fields, self._gate)
        if not spans:
            return text
        parts: list[str] = []
        last = 0
        for start, end, kind in spans:
            parts += [text[last:start], self.marker(kind, text[start:end])]
            found.append({"kind": kind, "path": path})
            last = end
        parts.append(text[last:])
        return "".join(parts)


def _member(path: str, name: object) -> str:
    """The JSON path of member ``name`` (RFC 9535: ``.name`` when the name is an identifier,
    else a bracketed string literal, ``["x-api-key"]``)."""
    if isinstance(name, str) and name.isidentifier():
        return f"{path}.{name}"
    return f"{path}[{json.dumps(name if isinstance(name, str) else str(name))}]"


def _paths_pattern(paths: Sequence[str]) -> re.Pattern[str] | None:
    """One expression matching the JSON paths of :attr:`RedactRules.paths`, where ``[*]``
    stands for any index and ``.*`` for any member; ``None`` without paths."""
    if not paths:
        return None
    alternatives = [
        re.escape(p).replace(r"\[\*\]", r"\[\d+\]").replace(r"\.\*", r"(?:\.\w+|\[\"[^\]]*\])")
        for p in paths
    ]
    return re.compile("|".join(alternatives))


_PROCESS_REDACTOR = Redactor(RedactRules(), key=lambda: secrets.token_bytes(32))
"""The built-in rules, for text that never reaches a log (log records, error lines): keyed by
a key of this process alone, so its markers match each other and nothing in any log."""


def redacted_text(text: str) -> str:
    """``text`` with every secret the built-in detectors and field names find replaced by
    ``[REDACTED:<kind>:<digest>]`` under a key of this process (not the log's: a log record
    or an error line is no part of any log); ``text`` itself when it holds none."""
    found: list[dict[str, str]] = []
    return _PROCESS_REDACTOR._text(text, "$", found)


class SecretsFilter(logging.Filter):
    """A logging filter that redacts each record of the logger it is on (docs/redaction.md,
    Logs and the live feed): the message with its arguments, a traceback (formatted here,
    once, as :class:`logging.Formatter` would, and kept as ``exc_text``, which formatters
    print instead of formatting it again) and a stack. An exception's text can quote what
    failed: a payload, a URL, a line of input."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redacted_text(message)
        if clean is not message:
            record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redacted_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redacted_text(record.stack_info)
        return True


_FILTER = SecretsFilter()


def redacting_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with :class:`SecretsFilter` on it: every agenttrail logger
    is made so, so that no record of ours carries a secret of a built-in kind."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
